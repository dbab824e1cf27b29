"""Checker for chapter 16, *Profile a training step and read the trace*: self time from raw events.

16.1: the learner writes ``self_times(events)``: from the host's complete events of a
Chrome trace (dicts with ``name``, ``ts``, ``dur``, ``pid``, ``tid``), each name's total
*self* time in microseconds: an event's duration less the durations of the events nested
directly inside it on the same thread, summed over the events of that name. That is the
"Self CPU" column of ``prof.key_averages().table()``.

The checker profiles programs the learner has not seen (sizes and depths drawn afresh
each run), exports their traces, and compares the learner's answer with the profiler's
own: the events rebuilt from the same JSON, nested by ``teachgrad.profiler`` and summed
by ``key_averages``. Two hand-made traces pin the edges: a child that starts with its
parent, and an event that starts exactly when the one before it ended (a sibling, not a
child).
"""
from __future__ import annotations

import math
import random
import threading
from typing import Callable

import teachgrad as tg
from teachgrad.profiler import ProfilerActivity, profile, record_function
from teachgrad.profiler.events import FunctionEvent, nest
from teachgrad.profiler.averages import EventList

from ..core import Feedback, Mismatch, Test, check, unseen_rng

EXERCISE = "16.1"


def host_events(prof: profile) -> list[dict]:
    """The complete host events of a profile's Chrome trace, as the learner gets them."""
    return [dict(e) for e in prof.chrome_trace()["traceEvents"]
            if e["ph"] == "X" and e["cat"] not in ("kernel", "gpu_memcpy")]


def profiler_self_times(events: list[dict]) -> dict[str, float]:
    """What the profiler makes of these events: nested by ``teachgrad.profiler``, per name."""
    rebuilt = [FunctionEvent(i, e["name"], hash((e["pid"], e["tid"])), e["ts"], e["ts"] + e["dur"])
               for i, e in enumerate(events)]
    nest(rebuilt)
    return {row.key: row.self_cpu_time_total for row in EventList(rebuilt).key_averages()}


# -- the hidden programs ------------------------------------------------------------------------

def _training_step(rng) -> list[dict]:
    width = int(rng.integers(3, 9))
    model = tg.nn.Sequential(tg.nn.Linear(4, width), tg.nn.Tanh(), tg.nn.Linear(width, 2))
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    x = tg.tensor(rng.standard_normal((int(rng.integers(2, 6)), 4)).astype("float32"))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("forward"):
            loss = model(x).pow(2).mean()
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad()
    return host_events(prof)


def _nested_blocks(rng) -> list[dict]:
    depth = int(rng.integers(3, 6))
    x = tg.tensor(rng.standard_normal(5).astype("float32"), requires_grad=True)

    def block(level: int, y):
        with record_function("block"):  # the same name at every depth
            y = (y * 1.5).tanh()
            if level < depth:
                y = block(level + 1, y) + y
        return y

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        block(1, x).sum().backward()
    return host_events(prof)


def _two_threads(rng) -> list[dict]:
    both_inside = threading.Barrier(2)
    n = int(rng.integers(3, 7))

    def worker() -> None:
        with record_function("worker"):
            both_inside.wait()
            y = tg.ones(n)
            for _ in range(n):
                y = y * 2.0

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        thread = threading.Thread(target=worker)
        thread.start()
        with record_function("main"):
            both_inside.wait()
            z = tg.ones(n)
            for _ in range(n):
                z = z + 1.0
            thread.join()
    return host_events(prof)


def _shuffled(rng) -> list[dict]:
    events = _training_step(rng)
    random.Random(int(rng.integers(1 << 30))).shuffle(events)
    return events


def _edges(rng) -> list[dict]:
    """A child starting with its parent; a sibling starting as the one before it ends."""
    a, b = float(rng.integers(5, 20)), float(rng.integers(5, 20))
    lane = {"ph": "X", "pid": 1, "tid": 7}
    return [dict(lane, name="step", ts=100.0, dur=2 * a + 2 * b),
            dict(lane, name="load", ts=100.0, dur=a),              # starts with its parent
            dict(lane, name="compute", ts=100.0 + a, dur=a + b),   # starts as load ends
            dict(lane, name="load", ts=100.0 + a, dur=b),          # starts with its parent
            dict(lane, name="save", ts=100.0 + 2 * a + b, dur=b)]  # ends with "step"


PROGRAMS: list[tuple[str, Callable]] = [
    ("a training step: forward, backward and optimizer regions", _training_step),
    ("regions named 'block' nested inside each other", _nested_blocks),
    ("two threads whose regions overlap in time", _two_threads),
    ("the events of a training step in shuffled order", _shuffled),
    ("a hand-made trace: children starting with their parents, siblings back to back", _edges),
]


def _compare(self_times: Callable, events: list[dict]) -> None:
    expected = profiler_self_times(events)
    got = self_times([dict(e) for e in events])  # (a copy: the learner may change it)
    if not isinstance(got, dict):
        raise Mismatch("self_times must return a dict {name: microseconds}",
                       "a dict", type(got).__name__, show_values=False)
    if set(got) != set(expected):
        raise Mismatch("the names differ", sorted(expected), sorted(got),
                       hint="every name of the events needs an entry, even one with no children")
    for name, value in expected.items():
        if not math.isclose(float(got[name]), value, rel_tol=1e-6, abs_tol=1e-6):
            raise Mismatch(f"wrong self time for {name!r}", round(value, 3), got[name],
                           hint="an event's children are the events of the same thread (pid, tid) "
                                "that lie inside it with no event between; subtract the children "
                                "only, not their children (they are inside the children's time)")


def check_self_times(self_times: Callable) -> Feedback:
    """16.1: ``self_times(events)`` gives each name's total self time, as the profiler's table."""
    rng = unseen_rng()

    def test(program: Callable) -> Callable[[], None]:
        return lambda: _compare(self_times, program(rng))

    return check(EXERCISE, [Test(description, test(program)) for description, program in PROGRAMS],
                 solved="the Self CPU column, from the raw trace", candidate=self_times)

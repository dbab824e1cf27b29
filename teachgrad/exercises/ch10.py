"""Checkers for chapter 10, *Asynchronous execution*: the queue's depth (10.1), timing with
events (10.2), and a loop that runs ahead of the device by a bounded number of steps (10.3).

The checkers watch the engine, not the learner's source: the recorded ops and host waits
of a timeline, and the state of the queue at the moment the learner's code calls back."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad import streams
from teachgrad.streams import OpRecord

from .core import (
    Feedback, Mismatch, Test, check, expect_close, expect_equal, expect_true, unseen_rng,
)


# -- 10.1: how far the host runs ahead ----------------------------------------------------------

def _reference_max_in_flight(ops: list[OpRecord], begin: str = "enqueued") -> int:
    """The most ops enqueued and not finished at one moment (finished at t frees its slot at t).

    ``begin="started"`` counts the ops *running* instead: the usual mistake.
    """
    events = []
    for op in ops:
        events.append((getattr(op, begin) if getattr(op, begin) is not None else np.inf, 1))
        events.append((op.finished if op.finished is not None else np.inf, -1))
    depth = best = 0
    for _, change in sorted(events):  # at equal times -1 sorts first: finish before enqueue
        depth += change
        best = max(best, depth)
    return best


def _op(enqueued: float, started: float, finished: float | None, stream: int = 0) -> OpRecord:
    return OpRecord("kernel", "k", None, "-", stream, enqueued, started, finished,
                    "done" if finished is not None else "running")


def _synthetic(rng: np.random.Generator, n: int, stream: int = 0) -> list[OpRecord]:
    """One stream's ops on a whole-number clock: enqueued in order, run one after another."""
    enqueued = np.cumsum(rng.integers(0, 3, size=n)).astype(float)
    ops, device_free = [], 0.0
    for t in enqueued:
        start = max(t, device_free)
        device_free = start + float(rng.integers(1, 4))
        ops.append(_op(float(t), start, device_free, stream))
    return ops


def _shuffled(rng: np.random.Generator, ops: list[OpRecord]) -> list[OpRecord]:
    return [ops[i] for i in rng.permutation(len(ops))]


def check_max_in_flight(max_in_flight: Callable[[list[OpRecord]], int]) -> Feedback:
    """Exercise 10.1: ``max_in_flight(ops)``: how many ops were queued or running at the peak."""

    def on(description: str, ops: list[OpRecord], hint: str = "") -> Test:
        def run() -> None:
            expected = _reference_max_in_flight(ops)
            got = max_in_flight(list(ops))
            running = _reference_max_in_flight(ops, begin="started")
            if got == running != expected:
                hint_here = ("in flight begins at enqueued (the host's clock), not at started: "
                             "an op waiting in the queue counts too")
            else:
                hint_here = hint or ("+1 when an op is enqueued, -1 when it finishes; "
                                     "keep the largest count")
            expect_equal(got, expected, what="number of ops in flight", hint=hint_here)
        return Test(description, run, hint)

    queue = [_op(0, 0, 3), _op(1, 3, 6), _op(2, 6, 9)]
    handover = [_op(0, 0, 2), _op(2, 2, 4), _op(4, 4, 6)]
    unfinished = [_op(0, 0, 5), _op(1, 5, None), _op(6, 6, 7)]
    rng = unseen_rng()
    seeds = rng.integers(0, 10_000, size=3)
    tests = [
        on("3 ops enqueued at t=0,1,2, each running 3 units after the last", queue),
        on("each op enqueued exactly when the one before finishes", handover,
           "an op that finishes at t no longer counts at t: the next one takes its place"),
        on("an op that has not finished (finished is None) is still in flight", unfinished,
           "finished is None means it is still queued or running: it counts until the end"),
        on("ops that started long after they were enqueued", [_op(0, 4, 5), _op(0, 5, 6)],
           "in flight begins at enqueued (the host's clock), not at started"),
        on("an empty recording", [], "no ops: nothing was ever in flight, 0"),
        on("one op", [_op(2, 3, 4)]),
        on("the same ops as the first example, listed out of order", queue[::-1],
           "ops may come in any order (several streams, a merged list): sort the changes by time"),
    ]
    tests += [on(f"random ops on one stream (seed {seed})", _synthetic(np.random.default_rng(seed), 12))
              for seed in seeds]
    two = np.random.default_rng(int(seeds[0]) + 1)
    tests.append(on("random ops on two streams, in no particular order",
                    _shuffled(two, _synthetic(two, 8) + _synthetic(two, 7, stream=1)),
                    "ops may come in any order (several streams, a merged list): sort the "
                    "changes by time"))
    tests.append(on("a real recording: 12 small cuda ops", _recorded_burst()))
    return check("10.1", tests, candidate=max_in_flight,
                 solved="you can read from the timeline how far the host ran ahead of the device.")


def _recorded_burst() -> list[OpRecord]:
    x = tg.ones(16, device="cuda")
    with streams.recording() as rec:
        for _ in range(12):
            x = x * 1.0001
    return rec.ops


# -- 10.2: time the device with events ----------------------------------------------------

def _too_short_hint(ops: list[OpRecord], got: float, expected_ms: float, held_ms: float) -> str:
    """Which mistake gives a time far below the kernels': read it from the stream's order."""
    kernels = {op.stream for op in ops if op.kind == "kernel"}
    if not any(op.kind == "event" and op.stream in kernels for op in ops):
        return ("the events went to another stream than fn's kernels: record both on the "
                "current stream (event.record() with no argument)")
    if got < 0:
        return "start.elapsed_time(end): the time from start to end, not end to start"
    kinds = [op.kind for op in ops if op.kind in ("event", "kernel")][::-1]
    end_first = "kernel" in kinds and kinds.index("event") > kinds.index("kernel")
    if not end_first and 0.5 * expected_ms <= got * 1e3 <= expected_ms + held_ms:
        return "elapsed_time is already in milliseconds: do not divide by 1000"
    return "record the end event after fn(): the marker must sit behind fn's kernels on the stream"


_NESTED_HINT = ("the call inside fn re-recorded your start marker: make both events afresh "
                "inside device_time_ms (tg.cuda.Event(enable_timing=True)), not shared ones "
                "such as the notebook's start and end")


def check_device_time_ms(device_time_ms: Callable[[Callable[[], Any]], float]) -> Feedback:
    """Exercise 10.2: ``device_time_ms(fn)``: the device's time for fn's kernels, with events.

    Each test queues work ahead of ``fn`` (a host clock counts it), some run ``fn`` with a
    side stream as the current one (events recorded on the default stream miss its work),
    and some ``fn`` launch several kernels.
    """

    def on(held: float, kernels: list[float], side: bool = False, nested: bool = False) -> Test:
        def fn() -> None:
            for i, k in enumerate(kernels):
                if nested and i == 1:  # fn times its second kernel with device_time_ms too
                    device_time_ms(lambda: streams.busy(k))
                else:
                    streams.busy(k)

        def run() -> None:
            tg.cuda.synchronize()
            where = tg.cuda.Stream() if side else None
            with tg.cuda.stream(where):
                ahead = streams.busy(held)  # the stream is busy before fn even starts
                with streams.recording() as rec:
                    got = device_time_ms(fn)
            expect_true(isinstance(got, (int, float)) and not isinstance(got, bool),
                        f"device_time_ms returned {type(got).__name__}, not a number of ms",
                        hint="return start.elapsed_time(end), a float")
            if sum(op.kind == "event" for op in rec.ops) < 2:
                raise Mismatch("your function recorded no pair of events on the stream: "
                               "a host clock measures when the host is told, not the device",
                               hint="start = tg.cuda.Event(enable_timing=True); start.record(); "
                                    "fn(); end.record(); end.synchronize()", show_values=False)
            # the truth, from the device's own records: when fn's kernels started and ended
            ran = [op for op in rec.ops if op.kind == "kernel"]
            expected = (ran[-1].finished - ran[0].started) * 1e3
            # the longest a right answer can read: from the moment the work ahead finished
            # (a start marker cannot be reached earlier) to the last thing fn's call left on
            # the stream. A loaded simulator spends a while launching each kernel, and the
            # markers count that time, the kernels' own stamps do not.
            longest = (max(op.finished for op in rec.ops if op.finished is not None)
                       - ahead.finished) * 1e3
            queued_ms = (ran[0].started - rec.began) * 1e3  # the work ahead of fn
            slack = 0.25 * expected + 10.0  # markers and kernels are stamped a moment apart
            if got < expected - slack:
                raise Mismatch(f"{got:.3g} ms is far shorter than the {expected:.0f} ms fn's kernels "
                               "ran on the device", f"about {expected:.0f}", got,
                               _NESTED_HINT if nested else
                               _too_short_hint(rec.ops, got, expected, queued_ms))
            if got > longest + slack:
                raise Mismatch(f"{got:.0f} ms is longer than the {expected:.0f} ms fn's kernels ran: "
                               f"it includes (part of) the {queued_ms:.0f} ms the stream was already "
                               "busy before fn", f"about {expected:.0f}", got,
                               hint="events measure between two markers on the device; a host "
                                    "clock started before fn also counts the queue ahead of it")
        ms = " + ".join(f"{k * 1e3:.0f}" for k in kernels)
        where = ", on a side stream (the current one)" if side else ""
        if nested:
            where += ", timing its second kernel with device_time_ms itself (a nested call)"
        return Test(f"fn launches {ms} ms of kernels, behind {held * 1e3:.0f} ms of queued work{where}",
                    run, "make both events with enable_timing=True, and synchronize the end event")

    rng = unseen_rng()
    tests = [on(0.4, [0.1]),
             on(float(rng.uniform(0.4, 0.6)), [float(rng.uniform(0.08, 0.15))]),
             on(float(rng.uniform(0.3, 0.4)), [float(rng.uniform(0.04, 0.07)) for _ in range(2)]),
             on(float(rng.uniform(0.3, 0.4)), [float(rng.uniform(0.08, 0.12))], side=True),
             # events shared between calls (the notebook's start and end, say) break here
             on(float(rng.uniform(0.2, 0.3)), [float(rng.uniform(0.12, 0.16)),
                                               float(rng.uniform(0.03, 0.05)), 0.02], nested=True)]
    return check("10.2", tests, candidate=device_time_ms,
                 solved="events time the device between two markers, whatever the host was doing.")


# -- 10.3: run ahead, but not too far -------------------------------------------------------

class _StepWatch:
    """The checker's ``step``: enqueues a training step and looks at the queue when called.

    Each call first notes which earlier steps still have work on the device (their ops are
    in the recording, unfinished): the learner's waits, of whatever kind, show there.
    """

    def __init__(self, rec: streams.Recording, weights: np.ndarray, device_s: float) -> None:
        self.rec, self.weights, self.device_s = rec, weights, device_s
        self.spans: list[tuple[int, int]] = []  # each step's ops: rec.ops[first:end]
        self.done: list[streams.Event] = []  # the checker's own marker after each step
        self.in_flight_at_launch: list[list[int]] = []  # per step: earlier steps not finished
        self.waits_before: list[int] = []  # per step: how many host waits were recorded by then

    def unfinished(self) -> list[int]:
        # the device says, through markers (on a GPU op records get their times only when
        # the recording ends); _happened() asks without counting as a wait of the learner's
        return [j for j, marker in enumerate(self.done) if not marker._happened()]

    def __call__(self, batch: np.ndarray) -> tg.Tensor:
        self.in_flight_at_launch.append(self.unfinished())
        self.waits_before.append(len(self.rec.waits))
        first = len(self.rec.ops)
        # the device's share of a training step: one sleeping thread and the copy of a loss,
        # so that the simulator leaves Python's lock to the host (the timing stays sharp)
        streams.busy(self.device_s)
        loss = tg.tensor(np.float32(np.dot(batch, self.weights)), device="cuda")
        self.done.append(streams.Event().record())
        self.spans.append((first, len(self.rec.ops)))
        return loss


def _waited_for(watch: _StepWatch, wait: streams.HostWait, launched: int) -> int:
    """The last step a host wait waited for: the steps enqueued before the event marker it
    waited on, or (a whole-stream wait) every step launched so far."""
    if wait.target is None:
        if wait.reason.startswith("Event."):
            return -1  # a GPU's event: its marker is not on the recorded queue, so not judged
        return launched - 1
    marker = next((k for k, op in enumerate(watch.rec.ops) if op is wait.target), -1)
    return max((j for j, (_, end) in enumerate(watch.spans) if end <= marker), default=-1)


def _ahead_mistake(watch: _StepWatch, max_ahead: int) -> Mismatch | None:
    """The first launch at which the host was too far ahead, or had waited too long.

    Too far ahead is read from the queue (more unfinished steps than allowed); too long
    from what each recorded host wait waited for, which no delay of a busy machine changes.
    """
    for i, earlier in enumerate(watch.in_flight_at_launch):
        if len(earlier) > min(i, max_ahead - 1):  # with step i itself: max_ahead in flight
            return Mismatch(
                f"when step {i} was launched, steps {earlier} were still on the device: "
                f"{len(earlier) + 1} steps in flight, more than max_ahead={max_ahead}",
                show_values=False,
                hint=("stream.wait_event(e) makes the device wait, not the host: the host "
                      "must block, with e.synchronize() (or an e.query() loop)"
                      if any(op.kind == "wait_event" for op in watch.rec.ops) else
                      f"before launching step i, make the host wait for step i - max_ahead "
                      f"(step {i - max_ahead} here): record an event after each step and call "
                      "its synchronize()"))
        waits = watch.rec.waits[watch.waits_before[i - 1] if i else 0:watch.waits_before[i]]
        for wait in waits:
            waited = _waited_for(watch, wait, i)
            if waited > i - max_ahead:
                return _waited_too_long(wait, waited, i, max_ahead)
    return None


def _waited_too_long(wait: streams.HostWait, waited: int, i: int, max_ahead: int) -> Mismatch:
    """The host waited for step ``waited`` before launching step i: name the wait."""
    allowed = f"step {i - max_ahead}" if i >= max_ahead else "no step yet"
    if wait.target is None:
        hint = (f"{wait.reason} (at {wait.site}) waits for the whole queue: wait on the event "
                "of step i - max_ahead only")
    else:
        hint = ("off by one? wait for the event recorded after step i - max_ahead, and only "
                "once i - max_ahead >= 0")
    return Mismatch(f"before launching step {i} the host waited for step {waited} ({wait.reason}): "
                    f"it may wait for {allowed}, and the device then waits for the host",
                    show_values=False, hint=hint)


def check_train_bounded(train_bounded: Callable[..., list]) -> Feedback:
    """Exercise 10.3: ``train_bounded(step, batches, max_ahead)`` returns the step losses.

    The host may run ahead of the device, but never by more than ``max_ahead`` steps: at
    each launch at most ``min(i, max_ahead - 1)`` earlier steps may still be on the device,
    and before step ``i`` no host wait (of any kind) may have waited for a step after
    ``i - max_ahead``.
    """

    def on(steps: int, max_ahead: int, device_s: float, rng: np.random.Generator) -> Test:
        def run() -> None:
            weights = rng.normal(size=3).astype(np.float32)
            batches = [rng.normal(size=3).astype(np.float32) for _ in range(steps)]
            tg.cuda.synchronize()
            with streams.recording() as rec:
                watch = _StepWatch(rec, weights, device_s)
                losses = train_bounded(watch, list(batches), max_ahead)
            expect_true(isinstance(losses, list) and len(losses) == steps,
                        f"expected a list of {steps} losses, got {type(losses).__name__}"
                        + (f" of {len(losses)}" if isinstance(losses, list) else ""),
                        hint="append each step's loss tensor to a list and return it")
            expect_equal(len(watch.spans), steps, what="number of steps run",
                         hint="call step(batch) once per batch, in order")
            expect_true(all(isinstance(loss, tg.Tensor) for loss in losses),
                        "the list holds numbers, not the loss tensors step returned",
                        hint="return the tensors: reading them (.item(), .tolist()) makes the "
                             "host wait for the whole queue")
            mistake = _ahead_mistake(watch, max_ahead)
            if mistake is not None:
                raise mistake
            expect_close([float(loss.item()) for loss in losses],
                         [float(np.dot(b, weights)) for b in batches], what="losses",
                         hint="step i must get batches[i], in order")
        return Test(f"{steps} batches, max_ahead={max_ahead}, {device_s * 1e3:.0f} ms of device "
                    "work per step", run, "record an event after each step; before step i, "
                    "synchronize the event of step i - max_ahead")

    rng = unseen_rng()
    # 100 ms of device work per step: far longer than the host needs between a wait and the
    # next launch, even on a busy machine, so a right answer never looks like an over-wait
    tests = [on(4, 2, 0.1, rng), on(4, 1, 0.03, rng), on(3, 5, 0.03, rng),
             on(int(rng.integers(5, 7)), int(rng.integers(2, 4)), 0.1, rng)]
    return check("10.3", tests, candidate=train_bounded,
                 solved="the host stays ahead of the device, by max_ahead steps and no more: the "
                        "device never waits for the host, and the queue cannot grow without bound.")

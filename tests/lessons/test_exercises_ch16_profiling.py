"""Exercise 16.1: self time from raw trace events, checked against the profiler's own nesting."""
from __future__ import annotations

import contextlib
import io

import pytest

import teachgrad as tg
from teachgrad.exercises import ch16
from teachgrad.exercises.ch16.profiling import host_events, profiler_self_times
from teachgrad.profiler import ProfilerActivity, profile, record_function


def reference(events):
    totals, lanes = {}, {}
    for e in events:
        lanes.setdefault((e["pid"], e["tid"]), []).append(e)
    for lane in lanes.values():
        lane.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_events = []
        for e in lane:
            while open_events and open_events[-1]["ts"] + open_events[-1]["dur"] <= e["ts"]:
                open_events.pop()
            if open_events:
                parent = open_events[-1]["name"]
                totals[parent] = totals.get(parent, 0.0) - e["dur"]
            totals[e["name"]] = totals.get(e["name"], 0.0) + e["dur"]
            open_events.append(e)
    return totals


def quiet_check(fn):
    with contextlib.redirect_stdout(io.StringIO()):
        return ch16.check_self_times(fn)


def test_the_reference_solves_it():
    assert quiet_check(reference).status == "solved"


@pytest.mark.parametrize("wrong", [
    lambda events: {e["name"]: 0.0 for e in events},
    lambda events: {name: 0.0 for name in reference(events)} | {"x": 1.0},
    lambda events: reference([dict(e, tid=0) for e in events]),  # threads mixed up
    lambda events: {e["name"]: sum(x["dur"] for x in events if x["name"] == e["name"])
                    for e in events},  # totals, not self times
    lambda events: reference(sorted(events, key=lambda e: e["ts"] + e["dur"])[::-1][:1] + events[1:]),
    "not a function",
])
def test_wrong_answers_are_rejected(wrong):
    assert quiet_check(wrong).status in ("wrong", "error")


def test_the_checkers_expectation_is_the_profilers_table():
    model = tg.nn.Sequential(tg.nn.Linear(3, 5), tg.nn.ReLU(), tg.nn.Linear(5, 1))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("step"):
            model(tg.randn(4, 3)).sum().backward()
    from_trace = profiler_self_times(host_events(prof))
    table = {r.key: r.self_cpu_time_total for r in prof.key_averages()}
    assert set(from_trace) == set(table)
    for name, value in table.items():  # (the trace keeps nanoseconds: a rounding apart)
        assert from_trace[name] == pytest.approx(value, abs=0.01 * len(prof.events()))

"""The schedule cases both profilers run: torch's to record them, teachgrad's to be tested.

``run_case(lib, profiler, case)`` runs a loop of ``steps`` steps with ``lib``'s profiler
(``torch`` and ``torch.profiler``, or ``teachgrad`` and ``teachgrad.profiler``): each step
is one small op inside ``record_function("work<i>")``, then ``prof.step()``. It returns the
action of each step number and, for every call of ``on_trace_ready``, the step number it
came at, which ``ProfilerStep`` and ``work<i>`` rows its ``key_averages()`` holds and which
``ProfilerStep#<k>`` events its exported Chrome trace holds.
``scripts/record_profiler_schedule.py`` stores torch's answers; ``tests/execution/
test_profiler.py`` compares teachgrad's with them.
"""
from __future__ import annotations

import json
import os
import tempfile
import warnings
from typing import Any

#: (wait, warmup, active, repeat, skip_first, steps); None: no schedule at all
CASES = [
    (1, 1, 2, 1, 0, 7),
    (1, 1, 2, 2, 0, 10),
    (0, 1, 1, 0, 1, 6),
    (2, 0, 1, 2, 0, 8),
    (0, 0, 3, 1, 2, 6),
    (1, 2, 3, 0, 0, 5),     # ends in the middle of an active cycle
    (1, 2, 3, 0, 0, 2),     # ends in warm-up
    None,
]


def regions(prof: Any) -> list[str]:
    """The rows of key_averages() that are our regions or the profiler's steps."""
    names = {e.key for e in prof.key_averages()}
    return sorted(n for n in names if n.startswith(("ProfilerStep", "work")))


def trace_steps(prof: Any) -> list[str]:
    """The ``ProfilerStep#<k>`` events of the exported Chrome trace."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    return sorted({e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")})


def run_case(lib: Any, profiler: Any, case: tuple | None) -> dict:
    calls = []
    steps = 3 if case is None else case[5]
    kwargs = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (schedules without warm-up warn)
        if case is not None:
            wait, warmup, active, repeat, skip_first, _ = case
            kwargs["schedule"] = profiler.schedule(wait=wait, warmup=warmup, active=active,
                                                   repeat=repeat, skip_first=skip_first)
        x = lib.ones(3)
        with profiler.profile(activities=[profiler.ProfilerActivity.CPU],
                              on_trace_ready=lambda p: calls.append(
                                  {"step": p.step_num, "regions": regions(p),
                                   "trace_steps": trace_steps(p)}),
                              **kwargs) as prof:
            for i in range(steps):
                with profiler.record_function(f"work{i}"):
                    x = x * 2.0
                if case is not None:
                    prof.step()
    actions = [kwargs["schedule"](i).name for i in range(steps + 1)] if case is not None else []
    return {"case": list(case) if case is not None else None, "steps": steps,
            "actions": actions, "ready": calls}

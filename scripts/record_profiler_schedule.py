"""Record what ``torch.profiler`` does with a schedule, for teachgrad's profiler tests.

Run from the repository root (needs torch; teachgrad's tests never import it)::

    PYTHONPATH= /work/torchenv/bin/python scripts/record_profiler_schedule.py

For each schedule below it runs a loop of ``steps`` steps, each step one small op inside
``record_function("work<i>")`` followed by ``prof.step()``, and stores: the action of
each step number, and for every call of ``on_trace_ready`` the step number it came at
and which ``ProfilerStep`` and ``work<i>`` rows its ``key_averages()`` holds and which
``ProfilerStep#<k>`` events its Chrome trace holds. The file
is ``tests/fixtures/profiler_schedule.json``.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "profiler_schedule.json"

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


def regions(prof) -> list[str]:
    """The rows of key_averages() that are our regions or the profiler's steps."""
    names = {e.key for e in prof.key_averages()}
    return sorted(n for n in names if n.startswith(("ProfilerStep", "work")))


def trace_steps(prof) -> list[str]:
    """The ``ProfilerStep#<k>`` events of the exported Chrome trace."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        events = json.load(open(path))["traceEvents"]
    return sorted({e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")})


def run(case) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    calls = []
    steps = 3 if case is None else case[5]
    kwargs = {}
    if case is not None:
        wait, warmup, active, repeat, skip_first, _ = case
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kwargs["schedule"] = schedule(wait=wait, warmup=warmup, active=active,
                                          repeat=repeat, skip_first=skip_first)
    x = torch.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CPU],
                     on_trace_ready=lambda p: calls.append({"step": p.step_num,
                                                            "regions": regions(p),
                                                            "trace_steps": trace_steps(p)}),
                     **kwargs) as prof:
            for i in range(steps):
                with record_function(f"work{i}"):
                    x = x * 2
                if case is not None:
                    prof.step()
    actions = ([kwargs["schedule"](i).name for i in range(steps + 1)] if case is not None else [])
    return {"case": case, "steps": steps, "actions": actions, "ready": calls}


def main() -> None:
    import torch

    results = [run(case) for case in CASES]
    FIXTURE.write_text(json.dumps({"torch": torch.__version__, "cases": results}, indent=1) + "\n")
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    main()

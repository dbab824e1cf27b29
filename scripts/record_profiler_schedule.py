"""Record what ``torch.profiler`` does with a schedule, for teachgrad's profiler tests.

Run from the repository root (needs torch; teachgrad's tests never import it)::

    PYTHONPATH= /work/torchenv/bin/python scripts/record_profiler_schedule.py

It runs every case of ``scripts/profiler_schedule_cases.py`` with torch's profiler and
stores the answers in ``tests/fixtures/profiler_schedule.json``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from profiler_schedule_cases import CASES, run_case  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "profiler_schedule.json"


def main() -> None:
    import torch
    import torch.profiler

    results = [run_case(torch, torch.profiler, case) for case in CASES]
    FIXTURE.write_text(json.dumps({"torch": torch.__version__, "cases": results}, indent=1) + "\n")
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    main()

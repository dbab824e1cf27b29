"""Record how PyTorch's module hooks behave, for tests/engine/test_hooks.py to compare against.

Runs the scenarios of ``tests/engine/hook_scenarios.py`` with ``torch`` and writes their logs
to ``tests/fixtures/hooks_torch.json``. Only this script imports torch; the tests read
the JSON. Run from the repository root::

    /work/main/.venv/bin/python scripts/record_hook_fixture.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "engine"))
from hook_scenarios import SCENARIOS  # noqa: E402


def main() -> None:
    torch.manual_seed(0)
    record = {
        "torch_version": torch.__version__,
        "scenarios": {name: scenario(torch) for name, scenario in SCENARIOS.items()},
    }
    out = ROOT / "tests" / "fixtures" / "hooks_torch.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)} (torch {torch.__version__})")


if __name__ == "__main__":
    main()

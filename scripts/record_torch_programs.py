"""Record what ten PyTorch tutorial programs return, run with PyTorch itself.

Run from the repository root with a Python that has torch 2.13 (teachgrad's tests
never import torch)::

    python scripts/record_torch_programs.py

The programs are in ``scripts/torch_programs/``; each result is stored under
``<program>/<name>`` in ``tests/fixtures/torch_programs.npz`` (strings as numpy
strings, numbers with their dtype), with the torch version in ``__meta__``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from torch_programs import PROGRAMS, as_arrays  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "torch_programs.npz"


def record() -> dict[str, np.ndarray]:
    import torch

    torch.set_num_threads(1)
    arrays = {}
    for name, program in PROGRAMS.items():
        for key, value in as_arrays(program(torch)).items():
            arrays[f"{name}/{key}"] = value
    arrays["__meta__"] = np.array(json.dumps({"torch": torch.__version__, "numpy": np.__version__}))
    np.savez_compressed(FIXTURE, **arrays)
    return arrays


if __name__ == "__main__":
    recorded = record()
    print(f"recorded {len(recorded) - 1} results of {len(PROGRAMS)} programs into {FIXTURE}")

"""Record PyTorch's answers to the differential case list into a committed fixture.

Run from the repository root (needs torch; teachgrad's tests never import it)::

    /work/main/.venv/bin/python scripts/record_torch_fixtures.py

For every case in ``scripts/differential_ops.py`` and ``differential_nn.py`` it
stores, under the case's name, the inputs, torch's outputs and the gradients of
the inputs that require grad (after a backward with a fixed uneven output
gradient), or the class of the error torch raised. The file is
``tests/fixtures/torch_differential.npz``: arrays keep their dtype, and a JSON
index (``__index__``) lists each case's outputs, gradients or error.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from differential_cases import Ctx, run_case  # noqa: E402
from differential_suite import all_cases  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "torch_differential.npz"


def record() -> dict:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    ctx = Ctx(torch, "cpu")
    arrays: dict[str, np.ndarray] = {}
    index: dict[str, dict] = {}
    for case in all_cases():
        for i, x in enumerate(case.inputs):
            if isinstance(x, np.ndarray):
                arrays[f"{case.name}/in{i}"] = x
        result = run_case(ctx, case, lambda t: t.detach().cpu().numpy())
        if "error" in result:
            index[case.name] = {"error": result["error"], "message": result["message"]}
            continue
        entry = {"outputs": len(result["outputs"]), "grads": {}}
        for k, out in enumerate(result["outputs"]):
            arrays[f"{case.name}/out{k}"] = np.asarray(out)
        for i, g in result["grads"].items():
            entry["grads"][str(i)] = g is not None
            if g is not None:
                arrays[f"{case.name}/grad{i}"] = g
        index[case.name] = entry
    meta = {"torch": torch.__version__, "numpy": np.__version__, "cases": index}
    arrays["__index__"] = np.array(json.dumps(meta, sort_keys=True))
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(FIXTURE, **arrays)
    return index


if __name__ == "__main__":
    recorded = record()
    errors = sum("error" in e for e in recorded.values())
    print(f"{len(recorded)} cases ({errors} expected errors) -> {FIXTURE.relative_to(ROOT)} "
          f"({FIXTURE.stat().st_size / 1e3:.0f} kB)")

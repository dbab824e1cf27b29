"""Record what PyTorch's compiled functions do when what they assumed changes, for
tests/execution/test_jit_guards.py to compare ``tg.compile`` and ``tg.jit.trace`` against.

Each scenario runs with ``torch.compile(..., backend="eager")`` (Dynamo's guards and
recompiles, with no C++ compiler needed) or ``torch.jit.trace``, on inputs drawn here
and stored beside the results. Only this script imports torch; the tests read
``tests/fixtures/compile_guards_torch.json``. Run from the repository root::

    /work/torchenv/bin/python scripts/record_compile_guards.py
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def batchnorm_train_then_eval(rng: np.random.Generator) -> dict:
    """Three compiled training steps (running statistics move each time), then eval."""
    bn = torch.nn.BatchNorm1d(3)
    compiled = torch.compile(bn, backend="eager")
    batches = [rng.standard_normal((5, 3)).astype(np.float32) * 2 + 1 for _ in range(3)]
    outputs = [compiled(torch.from_numpy(b)).detach().numpy().tolist() for b in batches]
    stats = {"running_mean": bn.running_mean.tolist(), "running_var": bn.running_var.tolist(),
             "num_batches_tracked": int(bn.num_batches_tracked)}
    bn.eval()
    probe = rng.standard_normal((2, 3)).astype(np.float32)
    return {"batches": [b.tolist() for b in batches], "train_outputs": outputs, **stats,
            "probe": probe.tolist(), "eval_output": compiled(torch.from_numpy(probe)).detach().numpy().tolist()}


def buffer_written_in_place(rng: np.random.Generator) -> dict:
    """``buf = zeros(3); buf += x; buf *= 2`` traced on one input, called on another."""
    def f(x):
        buf = torch.zeros(3)
        buf += x
        buf *= 2.0
        return buf + 1.0
    example, other = (rng.standard_normal(3).astype(np.float32) for _ in range(2))
    traced = torch.jit.trace(f, (torch.from_numpy(example),), check_trace=False)
    return {"example": example.tolist(), "other": other.tolist(),
            "traced_on_other": traced(torch.from_numpy(other)).tolist()}


def shapes_change(rng: np.random.Generator) -> dict:
    """A size read from the input, and a tensor made in its shape, at two batch sizes."""
    mean = torch.compile(lambda x: x.sum() / x.shape[0], backend="eager")
    plus_ones = torch.compile(lambda x: x + torch.ones(x.shape), backend="eager")
    three, five, one = (rng.standard_normal(n).astype(np.float32) for n in (3, 5, 1))
    mean(torch.from_numpy(three))
    plus_ones(torch.from_numpy(three))
    return {"three": three.tolist(), "five": five.tolist(), "one": one.tolist(),
            "mean_at_five": float(mean(torch.from_numpy(five))),
            "plus_ones_at_one": plus_ones(torch.from_numpy(one)).tolist()}


def closure_and_captured_change(rng: np.random.Generator) -> dict:
    """A closure number rebound, and a captured tensor changed in place, after compiling."""
    factor = 2.0
    scale = torch.tensor([1.0, 2.0, 3.0])

    def f(x):
        return x * factor + scale.exp()
    compiled = torch.compile(f, backend="eager")
    x = rng.standard_normal(3).astype(np.float32)
    before = compiled(torch.from_numpy(x)).tolist()
    factor = 3.0  # noqa: F841 (read by f through its closure)
    after_closure = compiled(torch.from_numpy(x)).tolist()
    scale.add_(1.0)
    after_captured = compiled(torch.from_numpy(x)).tolist()
    return {"x": x.tolist(), "before": before, "after_closure": after_closure,
            "after_captured": after_captured}


def main() -> None:
    rng = np.random.default_rng(21)
    record = {"torch_version": torch.__version__,
              "batchnorm_train_then_eval": batchnorm_train_then_eval(rng),
              "buffer_written_in_place": buffer_written_in_place(rng),
              "shapes_change": shapes_change(rng),
              "closure_and_captured_change": closure_and_captured_change(rng)}
    out = ROOT / "tests" / "fixtures" / "compile_guards_torch.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)} (torch {torch.__version__})")


if __name__ == "__main__":
    main()

"""Record what PyTorch does for clip_grad_norm_'s unusual orders, add_histogram's bins and
DataLoader(batch_size=None), into ``tests/fixtures/torch_rough_edges.json`` (the tests
never import torch).

    /work/torchenv/bin/python scripts/record_rough_edges.py [path/to/site-packages]

``torch.utils.tensorboard`` needs the ``tensorboard`` package for its message types;
when the PyTorch environment lacks it, pass a site-packages directory that has it (it
is appended to ``sys.path``, so PyTorch's own packages still come first).
"""
from __future__ import annotations

import json
import math
import os
import sys
import tempfile

import numpy as np
import torch

if len(sys.argv) > 1:
    sys.path.append(sys.argv[1])
from torch.utils.data import DataLoader  # noqa: E402
from torch.utils.tensorboard import SummaryWriter  # noqa: E402
from torch.utils.tensorboard.summary import histogram  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "engine"))
from sample_description import describe as describe_sample, samples  # noqa: E402
OUT = os.path.join(ROOT, "tests", "fixtures", "torch_rough_edges.json")
rng = np.random.default_rng(21)


def number(x: float) -> float | str:
    """A float JSON can hold (inf and nan as strings)."""
    return x if math.isfinite(x) else str(x)


# -- clip_grad_norm_ -----------------------------------------------------------------
def clip_cases() -> list[dict]:
    grads = [rng.standard_normal((3, 4)), np.array([0.0, 2.0, 0.0]), np.zeros((2, 2)),
             rng.standard_normal(5) * 1e-3]
    grads[0][0, :2] = 0.0
    cases = []
    for norm_type in (0, 0.0, 0.5, 1, 2, 3.5, -1, -2.5, "inf", "-inf"):
        for max_norm in (0.5, 100.0):
            params = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
            for p, g in zip(params, grads):
                p.grad = torch.tensor(g)
            order = float(norm_type) if isinstance(norm_type, str) else norm_type
            total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=order)
            cases.append({"norm_type": norm_type, "max_norm": max_norm,
                          "grads": [g.tolist() for g in grads],
                          "total": number(float(total)),
                          "clipped": [p.grad.tolist() for p in params]})
    return cases


# -- add_histogram ---------------------------------------------------------------------
def histogram_cases() -> list[dict]:
    with tempfile.TemporaryDirectory() as log_dir:
        writer = SummaryWriter(log_dir)
        tensorflow_bins = writer.default_bins
        writer.close()
    arrays = {
        "normal": rng.standard_normal(1000),
        "positive": np.abs(rng.standard_normal(50)) * 30.0,
        "tiny and huge": np.array([-1e19, -3.0, -1e-13, 0.0, 0.0, 2e-12, 5.0, 1e19]),
        "one value": np.full(7, 0.25),
        "zeros": np.zeros(4),
        "integers": rng.integers(-5, 6, size=40).astype(np.float64),
    }
    cases = []
    for name, values in arrays.items():
        for bins in ("tensorflow", "auto", 10):
            proto = histogram(name, torch.tensor(values),
                              tensorflow_bins if bins == "tensorflow" else bins).value[0].histo
            cases.append({"name": name, "bins": bins, "values": values.tolist(),
                          "min": proto.min, "max": proto.max, "num": proto.num, "sum": proto.sum,
                          "sum_squares": proto.sum_squares,
                          "bucket_limit": list(proto.bucket_limit), "bucket": list(proto.bucket)})
    return cases


# -- DataLoader(batch_size=None) --------------------------------------------------------
def describe(value) -> dict:
    return describe_sample(value, torch.Tensor, lambda t: str(t.dtype).replace("torch.", ""))


def loader_cases() -> dict:
    data = samples()
    plain = [describe(v) for v in DataLoader(data, batch_size=None)]
    custom = [describe(v) for v in DataLoader(data, batch_size=None,
                                              collate_fn=lambda s: ("one", s))]
    return {"default_convert": plain, "collate_fn_per_sample": custom,
            "torch_version": torch.__version__}


def main() -> None:
    fixture = {"torch_version": torch.__version__, "clip_grad_norm": clip_cases(),
               "histogram": histogram_cases(), "dataloader_no_batching": loader_cases()}
    with open(OUT, "w") as f:
        json.dump(fixture, f, indent=1)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()

"""Record PyTorch's float16/bfloat16 arithmetic, autocast and GradScaler into a fixture.

Run from the repository root (needs torch; teachgrad's tests never import it)::

    PYTHONPATH= /work/torchenv/bin/python scripts/record_lowprec.py

The file is ``tests/fixtures/lowprec.npz``. 16-bit results are stored as their bit
patterns (uint16), so a test compares them bit for bit; inputs are stored in float32
(every 16-bit value is exactly a float32). A JSON index (``__index__``) holds the
dtypes PyTorch chose (promotion, autocast) and GradScaler's scale after each step.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "lowprec.npz"
LOW = ("float16", "bfloat16")


def bits(t) -> np.ndarray:
    """The bit patterns of a 16-bit tensor."""
    import torch
    return t.detach().contiguous().view(torch.int16).numpy().view(np.uint16)


def low_inputs(torch, rng, dtype, shapes):
    """Random float32 arrays rounded to ``dtype``: the torch tensors and their float32 values."""
    tensors = [torch.tensor(rng.standard_normal(s).astype(np.float32)).to(dtype)
               .requires_grad_() for s in shapes]
    return tensors, [t.detach().float().numpy() for t in tensors]


def op_cases(torch):
    """name -> (input shapes, function of the inputs); a target for cross_entropy is fixed."""
    F = torch.nn.functional
    target = torch.tensor([0, 3, 1, 2, 3, 0])
    return {
        "add": ([(6, 8), (6, 8)], lambda a, b: a + b),
        "mul": ([(6, 8), (6, 8)], lambda a, b: a * b),
        "matmul": ([(6, 40), (40, 5)], lambda a, b: a @ b),
        "sum": ([(6, 300)], lambda a: a.sum(dim=1)),
        "sum_all": ([(6, 8)], lambda a: a.sum()),
        "mean": ([(6, 300)], lambda a: a.mean(dim=1)),
        "softmax": ([(6, 8)], lambda a: F.softmax(a, dim=1)),
        "exp": ([(6, 8)], lambda a: a.exp()),
        "relu": ([(6, 8)], lambda a: F.relu(a)),
        "linear": ([(6, 40), (5, 40), (5,)], lambda x, w, b: F.linear(x, w, b)),
        "layer_norm": ([(6, 8), (8,), (8,)], lambda x, w, b: F.layer_norm(x, (8,), w, b)),
        "cross_entropy": ([(6, 4)], lambda a: F.cross_entropy(a, target)),
    }


def record_ops(torch, arrays, index):
    """Each op in float16 and bfloat16: its output and its inputs' gradients, as bits."""
    for dtype_name in LOW:
        dtype = getattr(torch, dtype_name)
        for name, (shapes, fn) in op_cases(torch).items():
            rng = np.random.default_rng([LOW.index(dtype_name), sum(map(ord, name))])
            tensors, values = low_inputs(torch, rng, dtype, shapes)
            out = fn(*tensors)
            seed = rng.standard_normal(tuple(out.shape)).astype(np.float32)
            grad_out = torch.tensor(seed).to(dtype)
            out.backward(grad_out)
            key = f"ops/{dtype_name}/{name}"
            for i, v in enumerate(values):
                arrays[f"{key}/in{i}"] = v
                arrays[f"{key}/grad{i}"] = bits(tensors[i].grad)
            arrays[f"{key}/grad_out"] = grad_out.float().numpy()
            arrays[f"{key}/out"] = bits(out)
            index["ops"][f"{dtype_name}/{name}"] = {"inputs": len(values),
                                                     "dtype": str(out.dtype).split(".")[1]}


def autocast_cases(torch):
    F = torch.nn.functional
    target = torch.tensor([0, 3, 1, 2, 3, 0])
    return {
        "matmul": ([(6, 8), (8, 4)], lambda a, b: a @ b),
        "mm": ([(6, 8), (8, 4)], lambda a, b: torch.mm(a, b)),
        "bmm": ([(2, 6, 8), (2, 8, 4)], lambda a, b: torch.bmm(a, b)),
        "linear": ([(6, 8), (4, 8), (4,)], lambda x, w, b: F.linear(x, w, b)),
        "conv2d": ([(1, 2, 5, 5), (3, 2, 3, 3)], lambda x, w: F.conv2d(x, w)),
        "softmax": ([(6, 4)], lambda a: F.softmax(a, dim=1)),
        "log_softmax": ([(6, 4)], lambda a: F.log_softmax(a, dim=1)),
        "exp": ([(6, 4)], lambda a: a.exp()),
        "log": ([(6, 4)], lambda a: a.abs().log()),
        "pow": ([(6, 4)], lambda a: a ** 2),
        "sum": ([(6, 4)], lambda a: a.sum()),
        "relu": ([(6, 4)], lambda a: F.relu(a)),
        "add_mixed": ([(6, 4), (6, 4)], lambda a, b: a + b.bfloat16()),
        "cat_mixed": ([(6, 4), (6, 4)], lambda a, b: torch.cat([a, b.bfloat16()])),
        "cross_entropy": ([(6, 4)], lambda a: F.cross_entropy(a, target)),
        "mse_loss": ([(6, 4), (6, 4)], lambda a, b: F.mse_loss(a, b)),
        "l1_loss": ([(6, 4), (6, 4)], lambda a, b: F.l1_loss(a, b)),
        "nll_loss": ([(6, 4)], lambda a: F.nll_loss(a, target)),
        "layer_norm": ([(6, 4)], lambda a: F.layer_norm(a, (4,))),
        "norm": ([(6, 4)], lambda a: torch.norm(a)),
        # a bfloat16 input to an op of the float32 list is widened
        "cross_entropy_of_linear": ([(6, 8), (4, 8)],
                                    lambda x, w: F.cross_entropy(F.linear(x, w), target)),
        "softmax_of_matmul": ([(6, 8), (8, 4)], lambda a, b: F.softmax(a @ b, dim=1)),
    }


def record_autocast(torch, arrays, index):
    """Each op on float32 inputs inside ``torch.autocast("cpu", dtype=bfloat16)``."""
    for name, (shapes, fn) in autocast_cases(torch).items():
        rng = np.random.default_rng([7, sum(map(ord, name))])
        values = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        tensors = [torch.tensor(v, requires_grad=True) for v in values]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = fn(*tensors)
        out.float().sum().backward()
        key = f"autocast/{name}"
        for i, v in enumerate(values):
            arrays[f"{key}/in{i}"] = v
            arrays[f"{key}/grad{i}"] = tensors[i].grad.numpy()
        arrays[f"{key}/out"] = out.detach().float().numpy()
        index["autocast"][name] = {"inputs": len(values), "dtype": str(out.dtype).split(".")[1],
                                   "grad_dtypes": [str(t.grad.dtype).split(".")[1] for t in tensors]}


def record_promotion(torch, index):
    names = ["bool", "int64", "float16", "bfloat16", "float32", "float64"]
    dt = {n: getattr(torch, n) for n in names}
    index["promote_types"] = {f"{a}+{b}": str(torch.promote_types(dt[a], dt[b])).split(".")[1]
                              for a in names for b in names}
    cases = {}
    for a in names:
        for b in names:
            vec = torch.zeros(3, dtype=dt[a])
            zero_d = torch.zeros((), dtype=dt[b])
            cases[f"vec:{a}+0d:{b}"] = str(torch.result_type(vec, zero_d)).split(".")[1]
        cases[f"vec:{a}+float"] = str(torch.result_type(torch.zeros(3, dtype=dt[a]), 2.5)).split(".")[1]
        cases[f"vec:{a}+int"] = str(torch.result_type(torch.zeros(3, dtype=dt[a]), 2)).split(".")[1]
    index["result_type"] = cases


def scaler_run(torch, init_scale, growth_interval, inf_steps, clip=None):
    """SGD on two parameters with a GradScaler; ``inf_steps`` get an inf in the loss's grads."""
    w = torch.tensor([0.5, -1.25, 2.0], requires_grad=True)
    b = torch.tensor([0.25], requires_grad=True)
    opt = torch.optim.SGD([w, b], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    x = torch.tensor([1.0, 2.0, -0.5])
    scales, trackers, params, clipped = [], [], [], []
    for step in range(10):
        opt.zero_grad()
        loss = ((w * x).sum() + b).pow(2).sum()
        if step in inf_steps:
            loss = loss * torch.tensor(float("inf"))
        scaler.scale(loss).backward()
        if clip is not None:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_([w, b], max_norm=clip)
            clipped.append(torch.cat([w.grad, b.grad]).tolist())
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        trackers.append(scaler.state_dict()["_growth_tracker"])
        params.append(torch.cat([w, b]).tolist())
    return {"scales": scales, "trackers": trackers, "params": params, "clipped": clipped,
            "state_dict": scaler.state_dict()}


def record_scaler(torch, index):
    index["scaler"] = {
        "grow": scaler_run(torch, 2.0 ** 4, 3, set()),
        "backoff": scaler_run(torch, 2.0 ** 16, 2, {1, 2, 5}),
        "clip": scaler_run(torch, 2.0 ** 10, 4, {3}, clip=0.5),
        "overflow_to_inf_scale": scaler_run(torch, 2.0 ** 126, 1, set()),
    }


def record() -> dict:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    arrays: dict[str, np.ndarray] = {}
    index: dict = {"ops": {}, "autocast": {}}
    record_ops(torch, arrays, index)
    record_autocast(torch, arrays, index)
    record_promotion(torch, index)
    record_scaler(torch, index)
    index["torch"] = torch.__version__
    arrays["__index__"] = np.array(json.dumps(index, sort_keys=True))
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(FIXTURE, **arrays)
    return index


if __name__ == "__main__":
    recorded = record()
    print(f"{len(recorded['ops'])} ops, {len(recorded['autocast'])} autocast cases -> "
          f"{FIXTURE.relative_to(ROOT)} ({FIXTURE.stat().st_size / 1e3:.0f} kB)")
    print(json.dumps({k: v["dtype"] for k, v in recorded["autocast"].items()}))
    print(json.dumps(recorded["scaler"]["backoff"]["scales"]))

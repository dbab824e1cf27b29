"""Record PyTorch's outputs and gradients for the layers, clipping and LR schedules teachgrad
copies, into fixtures the tests compare against (the tests never import torch).

    /work/main/.venv/bin/python scripts/record_torch_layers.py

writes ``tests/fixtures/torch_layers.json`` (the cases: which function, which
options, which arrays) and ``tests/fixtures/torch_layers.npz`` (the arrays:
inputs drawn here from a fixed seed, PyTorch's outputs and gradients), and
``tests/fixtures/torch_lr_scheduler.json`` (learning-rate sequences).
"""
from __future__ import annotations

import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures")
rng = np.random.default_rng(2026)
arrays: dict[str, np.ndarray] = {}
cases: list[dict] = []


def draw(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def record(name: str, fn: str, options: dict, inputs: dict[str, np.ndarray],
           run) -> None:
    """Run ``run(**tensors)`` in torch (float64), backprop a fixed random upstream gradient,
    and store inputs, output and every input's gradient under ``name/...``."""
    tensors = {k: torch.tensor(v, requires_grad=v.dtype == np.float64) for k, v in inputs.items()}
    out = run(**tensors)
    upstream = draw(*out.shape)
    out.backward(torch.tensor(upstream))
    for k, v in inputs.items():
        arrays[f"{name}/{k}"] = v
        if tensors[k].grad is not None:
            arrays[f"{name}/grad_{k}"] = tensors[k].grad.numpy()
    arrays[f"{name}/upstream"] = upstream
    arrays[f"{name}/output"] = out.detach().numpy()
    cases.append({"name": name, "fn": fn, "options": options, "inputs": list(inputs)})


def conv_cases() -> None:
    specs = [
        ("plain", (2, 3, 6, 7), (4, 3, 3, 3), True, {}),
        ("strided_padded_dilated", (2, 2, 7, 8), (3, 2, 2, 3), True,
         {"stride": [2, 1], "padding": [1, 2], "dilation": [1, 2]}),
        ("groups", (1, 4, 5, 5), (6, 2, 3, 3), True, {"groups": 2, "padding": 1}),
        ("same_even_kernel", (1, 2, 5, 6), (2, 2, 2, 4), False, {"padding": "same"}),
        ("same_dilated", (1, 1, 6, 6), (2, 1, 3, 3), True, {"padding": "same", "dilation": 2}),
        ("unbatched", (3, 5, 5), (2, 3, 3, 3), True, {"stride": 2}),
        ("depthwise", (2, 3, 4, 4), (3, 1, 2, 2), True, {"groups": 3}),
    ]
    for name, x_shape, w_shape, bias, options in specs:
        inputs = {"input": draw(*x_shape), "weight": draw(*w_shape)}
        if bias:
            inputs["bias"] = draw(w_shape[0])
        record(f"conv2d/{name}", "conv2d", options, inputs,
               lambda input, weight, bias=None: F.conv2d(input, weight, bias, **options))


def pool_cases() -> None:
    ties = rng.integers(0, 3, size=(1, 2, 5, 5)).astype(np.float64)  # many equal maxima
    specs = [
        ("max_pool2d", "k2", draw(2, 3, 6, 6), {"kernel_size": 2}),
        ("max_pool2d", "k3_s2_p1", draw(1, 2, 7, 6), {"kernel_size": 3, "stride": 2, "padding": 1}),
        ("max_pool2d", "dilated", draw(1, 1, 7, 8),
         {"kernel_size": [2, 3], "stride": [1, 2], "dilation": 2}),
        ("max_pool2d", "ties", ties, {"kernel_size": 2, "stride": 1}),
        ("max_pool2d", "unbatched", draw(2, 5, 5), {"kernel_size": 2}),
        ("avg_pool2d", "k2", draw(2, 3, 6, 6), {"kernel_size": 2}),
        ("avg_pool2d", "k3_s2_p1", draw(1, 2, 7, 6), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ]
    for fn, name, x, options in specs:
        torch_fn = getattr(F, fn)
        record(f"{fn}/{name}", fn, options, {"input": x},
               lambda input: torch_fn(input, **options))


def norm_cases() -> None:
    ln_specs = [
        ("last_dim", (4, 5), [5], True),
        ("last_two", (2, 3, 4), [3, 4], True),
        ("no_affine", (3, 6), [6], False),
    ]
    for name, x_shape, shape, affine in ln_specs:
        inputs = {"input": draw(*x_shape) * 3 + 1}
        if affine:
            inputs["weight"], inputs["bias"] = draw(*shape), draw(*shape)
        record(f"layer_norm/{name}", "layer_norm", {"normalized_shape": shape}, inputs,
               lambda input, weight=None, bias=None: F.layer_norm(input, shape, weight, bias))
    # batch norm in training (batch statistics), on the functional form
    for name, x_shape in (("bn1d_2d", (6, 3)), ("bn1d_3d", (4, 3, 5)), ("bn2d", (3, 2, 4, 5))):
        channels = x_shape[1]
        inputs = {"input": draw(*x_shape) * 2 + 0.5, "weight": draw(channels), "bias": draw(channels)}
        record(f"batch_norm/{name}", "batch_norm", {"training": True}, inputs,
               lambda input, weight, bias: F.batch_norm(input, None, None, weight, bias, True))


def batchnorm_module_cases() -> None:
    """Running statistics over several training steps, then evaluation, for each option."""
    specs = [
        ("bn1d_default", "BatchNorm1d", (5, 3), {}),
        ("bn1d_3d_momentum", "BatchNorm1d", (4, 3, 6), {"momentum": 0.3}),
        ("bn1d_cumulative", "BatchNorm1d", (5, 2), {"momentum": None}),
        ("bn2d_default", "BatchNorm2d", (3, 2, 4, 4), {}),
        ("bn2d_no_affine", "BatchNorm2d", (2, 3, 3, 3), {"affine": False}),
        ("bn2d_untracked", "BatchNorm2d", (2, 2, 3, 3), {"track_running_stats": False}),
    ]
    for name, cls, x_shape, options in specs:
        layer = getattr(torch.nn, cls)(x_shape[1], dtype=torch.float64, **options)
        case = {"name": f"bn_module/{name}", "fn": "bn_module", "class": cls, "options": options,
                "steps": 3}
        for step in range(3):
            x = draw(*x_shape) * (step + 1) + step
            arrays[f"bn_module/{name}/train_input_{step}"] = x
            arrays[f"bn_module/{name}/train_output_{step}"] = layer(torch.tensor(x)).detach().numpy()
            for key, value in layer.state_dict().items():
                arrays[f"bn_module/{name}/state_{step}/{key}"] = value.clone().numpy()  # buffers change in place
        layer.eval()
        x = draw(*x_shape)
        arrays[f"bn_module/{name}/eval_input"] = x
        arrays[f"bn_module/{name}/eval_output"] = layer(torch.tensor(x)).detach().numpy()
        cases.append(case)


def embedding_cases() -> None:
    specs = [("plain", None, [[0, 2, 2], [4, 1, 0]]), ("padding", 1, [[1, 3, 1, 0], [2, 1, 4, 4]]),
             ("negative_padding", -1, [4, 0, 4, 2])]
    for name, padding_idx, indices in specs:
        inputs = {"weight": draw(5, 3), "indices": np.array(indices, dtype=np.int64)}
        record(f"embedding/{name}", "embedding", {"padding_idx": padding_idx}, inputs,
               lambda weight, indices: F.embedding(indices, weight, padding_idx=padding_idx))


def clip_cases() -> None:
    grads = [draw(3, 4), draw(5), draw(2, 2) * 10]
    for norm_type in (2.0, 1.0, 3.0, "inf"):
        for max_norm in (0.5, 100.0):
            name = f"clip_grad_norm/{norm_type}_{max_norm}"
            params = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
            for p, g in zip(params, grads):
                p.grad = torch.tensor(g)
            total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=float(norm_type))
            arrays[f"{name}/total"] = total.numpy()
            for i, (p, g) in enumerate(zip(params, grads)):
                arrays[f"{name}/grad_{i}"] = g
                arrays[f"{name}/clipped_{i}"] = p.grad.numpy()
            cases.append({"name": name, "fn": "clip_grad_norm_", "grads": len(grads),
                          "options": {"max_norm": max_norm, "norm_type": norm_type}})
    params = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = torch.tensor(g)
    torch.nn.utils.clip_grad_value_(params, 0.7)
    for i, (p, g) in enumerate(zip(params, grads)):
        arrays[f"clip_grad_value/grad_{i}"] = g
        arrays[f"clip_grad_value/clipped_{i}"] = p.grad.numpy()
    cases.append({"name": "clip_grad_value", "fn": "clip_grad_value_", "grads": len(grads),
                  "options": {"clip_value": 0.7}})


def lr_sequences() -> list[dict]:
    """``get_last_lr()`` after each of 25 steps, two parameter groups (lr 0.1 and 0.02)."""
    from torch.optim import lr_scheduler as S

    def warmup(epoch: int) -> float:
        return min(1.0, (epoch + 1) / 5) * 0.95 ** epoch

    specs = [
        ("StepLR", {"step_size": 7}), ("StepLR", {"step_size": 3, "gamma": 0.5}),
        ("MultiStepLR", {"milestones": [3, 8, 8, 15], "gamma": 0.3}),
        ("ExponentialLR", {"gamma": 0.9}),
        ("CosineAnnealingLR", {"T_max": 10}), ("CosineAnnealingLR", {"T_max": 6, "eta_min": 0.001}),
        ("LambdaLR", {"lr_lambda": "warmup"}),
    ]
    sequences = []
    for cls, options in specs:
        params = [torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)]
        opt = torch.optim.SGD([{"params": [params[0]]}, {"params": [params[1]], "lr": 0.02}], lr=0.1)
        kwargs = dict(options, lr_lambda=warmup) if cls == "LambdaLR" else options
        scheduler = getattr(S, cls)(opt, **kwargs)
        lrs = [scheduler.get_last_lr()]
        for _ in range(25):
            opt.step()
            scheduler.step()
            lrs.append(scheduler.get_last_lr())
        sequences.append({"class": cls, "options": options, "lrs": lrs})
    return sequences


def main() -> None:
    torch.set_default_dtype(torch.float64)
    conv_cases()
    pool_cases()
    norm_cases()
    batchnorm_module_cases()
    embedding_cases()
    clip_cases()
    os.makedirs(OUT, exist_ok=True)
    meta = {"torch": torch.__version__, "cases": cases}
    with open(os.path.join(OUT, "torch_layers.json"), "w") as f:
        json.dump(meta, f, indent=1)
    np.savez_compressed(os.path.join(OUT, "torch_layers.npz"), **arrays)
    with open(os.path.join(OUT, "torch_lr_scheduler.json"), "w") as f:
        json.dump({"torch": torch.__version__, "groups_lr": [0.1, 0.02], "sequences": lr_sequences()},
                  f, indent=1)
    print(f"{len(cases)} layer cases, {len(arrays)} arrays; torch {torch.__version__}")
    assert math.isfinite(sum(float(np.sum(a)) for a in arrays.values() if a.dtype.kind == "f"))


if __name__ == "__main__":
    main()

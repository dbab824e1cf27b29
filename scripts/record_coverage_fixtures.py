"""Record PyTorch's numbers and error messages for the activations ``hardtanh``, ``relu6``,
``selu``, ``mish``, ``hardswish``, ``hardsigmoid``, ``logsigmoid``, the losses ``binary_cross_entropy`` and
``binary_cross_entropy_with_logits``, ``conv1d``, and the singular-value matrix norms
(``'nuc'``, ±2, through ``linalg.matrix_norm``, ``linalg.norm`` and ``Tensor.norm``) and
``linalg.svdvals``, into
fixtures the tests compare against (the tests never import torch).

    PYTHONPATH= /work/torchenv/bin/python scripts/record_coverage_fixtures.py

writes ``tests/fixtures/coverage_ops.json`` (the cases: which function, its options, which
arrays; and for each bad call, PyTorch's exception class and message) and
``tests/fixtures/coverage_ops.npz`` (float64 arrays drawn here from a fixed seed: the inputs,
PyTorch's output, a drawn upstream gradient and the gradient of every input; and, under
``float32/``, the activations' float32 outputs and gradients on a grid).
"""
from __future__ import annotations

import json
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures")
rng = np.random.default_rng(2213)
arrays: dict[str, np.ndarray] = {}
cases: list[dict] = []

# every kink of every activation (bounds, ±3, 0, 6), with random values between
KINKS = [-3.0, -1.0, 0.0, 1.0, 3.0, 6.0, -2.0, 2.0, 4.0, 25.0, -25.0]


def record(name: str, kind: str, options: dict, inputs: dict[str, np.ndarray]) -> None:
    """Run one case with gradients on every input, backprop a drawn upstream gradient of
    the output and store everything under ``name/``."""
    tensors = {k: torch.tensor(v, requires_grad=differentiable(kind, k)) for k, v in inputs.items()}
    out = run(kind, tensors, options)
    arrays[f"{name}/upstream"] = upstream = rng.standard_normal(out.shape)
    arrays[f"{name}/output"] = out.detach().numpy()
    (out * torch.tensor(upstream)).sum().backward()
    for k, v in inputs.items():
        arrays[f"{name}/{k}"] = v
        if differentiable(kind, k):
            arrays[f"{name}/grad_{k}"] = tensors[k].grad.numpy()
    cases.append({"name": name, "kind": kind, "options": options, "inputs": list(inputs)})


def differentiable(kind: str, input_name: str) -> bool:
    """Every input but the losses' weights (PyTorch has no gradient for them)."""
    return input_name not in ("weight", "pos_weight") or kind == "conv1d"


def run(kind: str, t: dict, options: dict) -> torch.Tensor:
    if kind == "activation":
        function = getattr(F, options["function"])
        return function(t["input"], **options.get("arguments", {}))
    if kind == "bce":
        return F.binary_cross_entropy(t["input"], t["target"], weight=t.get("weight"), **options)
    if kind == "bce_logits":
        return F.binary_cross_entropy_with_logits(t["input"], t["target"], weight=t.get("weight"),
                                                  pos_weight=t.get("pos_weight"), **options)
    if kind == "matrix_norm":
        return torch.linalg.matrix_norm(t["input"], **options)
    if kind == "linalg_norm":
        return torch.linalg.norm(t["input"], **options)
    if kind == "tensor_norm":
        return t["input"].norm(**options)
    if kind == "svdvals":
        return torch.linalg.svdvals(t["input"])
    return F.conv1d(t["input"], t["weight"], t.get("bias"), **options)


def activation_cases() -> None:
    values = np.concatenate([KINKS, rng.uniform(-7, 7, 13)]).reshape(4, 6)
    for function, arguments in [("hardtanh", {}), ("hardtanh", {"min_val": -2.0, "max_val": 3.0}),
                                ("relu6", {}), ("selu", {}), ("mish", {}), ("hardswish", {}),
                                ("hardsigmoid", {}), ("logsigmoid", {})]:
        label = function + "".join(f"_{k}{v}" for k, v in arguments.items())
        record(f"activation/{label}", "activation",
               {"function": function, "arguments": arguments}, {"input": values})


def float32_activation_cases() -> None:
    """Every activation on a fine float32 grid, its gradient for an upstream of ones: the
    hard ones match PyTorch's bits, the others its rounding (within an ulp or two)."""
    grid = np.linspace(-8, 8, 4001, dtype=np.float32)
    arrays["float32/input"] = grid
    for function in FLOAT32_FUNCTIONS:
        x = torch.tensor(grid, requires_grad=True)
        out = getattr(F, function)(x)
        out.sum().backward()
        arrays[f"float32/{function}/output"] = out.detach().numpy()
        arrays[f"float32/{function}/grad"] = x.grad.numpy()


FLOAT32_FUNCTIONS = ("hardtanh", "relu6", "hardswish", "hardsigmoid", "selu", "mish", "logsigmoid")


def bce_cases() -> None:
    probabilities = rng.uniform(0.02, 0.98, (3, 4))
    probabilities[0, :2] = [0.0, 1.0]  # log clamped at -100 on one side each
    target = rng.uniform(0, 1, (3, 4))
    target[0, :2] = [1.0, 0.0]
    for reduction in ("mean", "sum", "none"):
        record(f"bce/{reduction}", "bce", {"reduction": reduction},
               {"input": probabilities, "target": target})
    record("bce/weight_per_element", "bce", {"reduction": "mean"},
           {"input": probabilities, "target": target, "weight": rng.uniform(0.5, 2, (3, 4))})
    record("bce/weight_per_column", "bce", {"reduction": "none"},
           {"input": probabilities, "target": target, "weight": rng.uniform(0.5, 2, (4,))})


def bce_logits_cases() -> None:
    logits = rng.standard_normal((3, 4)) * 3
    logits[0, :3] = [60.0, -60.0, 800.0]  # where sigmoid rounds to 0 or 1: still finite
    target = (rng.uniform(0, 1, (3, 4)) > 0.5).astype(float)
    target[1] = rng.uniform(0, 1, 4)  # soft labels
    for reduction in ("mean", "sum", "none"):
        record(f"bce_logits/{reduction}", "bce_logits", {"reduction": reduction},
               {"input": logits, "target": target})
    record("bce_logits/weight_and_pos_weight", "bce_logits", {"reduction": "mean"},
           {"input": logits, "target": target, "weight": rng.uniform(0.5, 2, (3, 1)),
            "pos_weight": rng.uniform(0.5, 3, (4,))})
    record("bce_logits/pos_weight_sum", "bce_logits", {"reduction": "sum"},
           {"input": logits, "target": target, "pos_weight": rng.uniform(0.5, 3, (4,))})


def conv1d_cases() -> None:
    for name, options, shapes in [
        ("plain", {}, ((2, 4, 9), (3, 4, 3), True)),
        ("stride_padding", {"stride": 2, "padding": 2}, ((2, 4, 9), (3, 4, 3), True)),
        ("same_even_kernel_dilated", {"padding": "same", "dilation": 2}, ((2, 4, 9), (3, 4, 4), True)),
        ("valid_no_bias", {"padding": "valid"}, ((2, 4, 9), (3, 4, 2), False)),
        ("groups", {"groups": 2, "padding": 1, "dilation": 2}, ((2, 4, 9), (6, 2, 3), True)),
        ("unbatched", {"stride": 3}, ((4, 9), (3, 4, 3), True)),
    ]:
        signal, weight, has_bias = shapes
        inputs = {"input": rng.standard_normal(signal), "weight": 0.5 * rng.standard_normal(weight)}
        if has_bias:
            inputs["bias"] = rng.standard_normal(weight[0])
        record(f"conv1d/{name}", "conv1d", options, inputs)


def matrix_norm_cases() -> None:
    tall, batch = rng.standard_normal((4, 3)), rng.standard_normal((2, 3, 5))
    repeated = np.diag([2.0, 2.0, 0.5])  # a tie for the largest: the gradient is shared
    for ord_ in ("nuc", 2, -2):
        record(f"matrix_norm/{ord_}_tall", "matrix_norm", {"ord": ord_}, {"input": tall})
        record(f"matrix_norm/{ord_}_batch_dims_0_2_keepdim", "matrix_norm",
               {"ord": ord_, "dim": [0, 2], "keepdim": True}, {"input": batch})
        record(f"linalg_norm/{ord_}", "linalg_norm", {"ord": ord_}, {"input": tall})
    record("matrix_norm/2_repeated", "matrix_norm", {"ord": 2}, {"input": repeated})
    record("matrix_norm/nuc_batch", "matrix_norm", {"ord": "nuc"}, {"input": batch})
    record("tensor_norm/nuc", "tensor_norm", {"p": "nuc"}, {"input": tall})
    record("svdvals/batch", "svdvals", {}, {"input": batch})


# -- bad calls: PyTorch's exception class and message ---------------------------------------

ERRORS = {
    "bce_outside_0_1": lambda: F.binary_cross_entropy(torch.tensor([1.5, 0.5]), torch.ones(2)),
    "bce_sizes": lambda: F.binary_cross_entropy(torch.tensor([0.5, 0.2]), torch.ones(1)),
    "bce_logits_sizes": lambda: F.binary_cross_entropy_with_logits(torch.zeros(2), torch.ones(1)),
    "bce_weight_requires_grad": lambda: F.binary_cross_entropy(
        torch.full((2,), 0.5), torch.ones(2), weight=torch.ones(2, requires_grad=True)),
    "bce_logits_pos_weight_requires_grad": lambda: F.binary_cross_entropy_with_logits(
        torch.zeros(2), torch.ones(2), pos_weight=torch.ones(2, requires_grad=True)),
    "hardtanh_bounds": lambda: F.hardtanh(torch.zeros(2), 2.0, 1.0),
    "Hardtanh_bounds": lambda: nn.Hardtanh(2.0, 1.0),
    "hardtanh_bool": lambda: F.hardtanh(torch.tensor([True])),
    "relu6_bool": lambda: F.relu6(torch.tensor([True])),
    "selu_list": lambda: F.selu([1.0]),
    "mish_list": lambda: F.mish([1.0]),
    "conv1d_4d_input": lambda: F.conv1d(torch.zeros(2, 3, 4, 5), torch.zeros(4, 3, 2)),
    "conv1d_channels": lambda: F.conv1d(torch.zeros(2, 3, 5), torch.zeros(4, 2, 2)),
    "conv1d_weight_dims": lambda: F.conv1d(torch.zeros(2, 3, 5), torch.zeros(4, 3, 2, 2)),
    "conv1d_kernel_too_long": lambda: F.conv1d(torch.zeros(2, 3, 5), torch.zeros(4, 3, 7)),
    "conv1d_dilated_too_long": lambda: F.conv1d(torch.zeros(2, 3, 5), torch.zeros(4, 3, 3),
                                                padding=1, dilation=4),
    "conv1d_same_strided": lambda: F.conv1d(torch.zeros(2, 3, 5), torch.zeros(4, 3, 2),
                                            stride=2, padding="same"),
    "conv1d_padding_string": lambda: F.conv1d(torch.zeros(2, 3, 5), torch.zeros(4, 3, 2),
                                              padding="full"),
    "conv1d_bias": lambda: F.conv1d(torch.zeros(2, 3, 5), torch.zeros(4, 3, 2), torch.zeros(3)),
    "matrix_norm_non_finite": lambda: torch.linalg.matrix_norm(
        torch.tensor([[float("nan"), 1.0], [1.0, 1.0]]), 2),
    "Conv1d_groups": lambda: nn.Conv1d(3, 4, 2, groups=2),
    "Conv1d_same_strided": lambda: nn.Conv1d(3, 4, 2, padding="same", stride=2),
}


def error_messages() -> dict:
    found = {}
    for name, call in ERRORS.items():
        try:
            call()
        except Exception as error:  # noqa: BLE001  (recording whatever PyTorch raises)
            found[name] = {"type": type(error).__name__, "message": str(error)}
        else:
            raise AssertionError(f"{name}: PyTorch accepted it")
    return found


REPRS = {
    "Hardtanh()": nn.Hardtanh(), "Hardtanh(-2, 3, True)": nn.Hardtanh(-2, 3, True),
    "ReLU6()": nn.ReLU6(), "ReLU6(True)": nn.ReLU6(True), "SELU()": nn.SELU(),
    "SELU(True)": nn.SELU(True), "Mish()": nn.Mish(), "Mish(True)": nn.Mish(True),
    "LogSigmoid()": nn.LogSigmoid(),
    "Hardswish(True)": nn.Hardswish(True), "Hardsigmoid(True)": nn.Hardsigmoid(True),
    "BCELoss()": nn.BCELoss(), "BCEWithLogitsLoss(reduction='sum')": nn.BCEWithLogitsLoss(reduction="sum"),
    "Conv1d(3, 4, 3)": nn.Conv1d(3, 4, 3),
    "Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2, bias=False)":
        nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2, bias=False),
    "Conv1d(3, 4, 3, padding='same')": nn.Conv1d(3, 4, 3, padding="same"),
    "Conv1d(3, 4, 3, padding='valid')": nn.Conv1d(3, 4, 3, padding="valid"),
}


def main() -> None:
    activation_cases()
    float32_activation_cases()
    bce_cases()
    bce_logits_cases()
    conv1d_cases()
    matrix_norm_cases()
    record_file = {"torch_version": torch.__version__, "cases": cases, "errors": error_messages(),
                   "reprs": {call: repr(module) for call, module in REPRS.items()}}
    with open(os.path.join(OUT, "coverage_ops.json"), "w") as f:
        json.dump(record_file, f, indent=1, sort_keys=True)
        f.write("\n")
    np.savez_compressed(os.path.join(OUT, "coverage_ops.npz"), **arrays)
    print(f"{len(cases)} cases, {len(record_file['errors'])} error messages, {len(arrays)} arrays")


if __name__ == "__main__":
    main()

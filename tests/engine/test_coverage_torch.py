"""Hardtanh, ReLU6, SELU, Mish, Hardswish, Hardsigmoid, LogSigmoid, binary cross-entropy (from
probabilities and from logits), conv1d and the singular-value matrix norms against PyTorch's own numbers: outputs and the
gradient of every input (at every kink of the activations), error messages and module
reprs, recorded by scripts/record_coverage_fixtures.py into tests/fixtures (torch is
not imported)."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import json
import os

import numpy as np
import pytest

from teachgrad import nn
from teachgrad.nn import functional as F

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
with open(os.path.join(FIXTURES, "coverage_ops.json")) as _f:
    RECORDED = json.load(_f)
CASES = {case["name"]: case for case in RECORDED["cases"]}
ARRAYS = np.load(os.path.join(FIXTURES, "coverage_ops.npz"), allow_pickle=False)
NOT_DIFFERENTIABLE = ("weight", "pos_weight")  # the losses' weights (PyTorch has no gradient)


def _run(case: dict, t: dict) -> tg.Tensor:
    kind, options = case["kind"], case["options"]
    if kind == "activation":
        return getattr(F, options["function"])(t["input"], **options["arguments"])
    if kind == "bce":
        return F.binary_cross_entropy(t["input"], t["target"], weight=t.get("weight"), **options)
    if kind == "bce_logits":
        return F.binary_cross_entropy_with_logits(t["input"], t["target"], weight=t.get("weight"),
                                                  pos_weight=t.get("pos_weight"), **options)
    if kind == "matrix_norm":
        return tg.linalg.matrix_norm(t["input"], **options)
    if kind == "linalg_norm":
        return tg.linalg.norm(t["input"], **options)
    if kind == "tensor_norm":
        return t["input"].norm(**options)
    if kind == "svdvals":
        return tg.linalg.svdvals(t["input"])
    return F.conv1d(t["input"], t["weight"], t.get("bias"), **options)


def _differentiable(case: dict, name: str) -> bool:
    return case["kind"] == "conv1d" or name not in NOT_DIFFERENTIABLE


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_and_gradients_match_pytorch(name, device):
    case = CASES[name]
    t = {k: tg.tensor(ARRAYS[f"{name}/{k}"], device=device,
                      requires_grad=_differentiable(case, k)) for k in case["inputs"]}
    out = _run(case, t)
    expected = ARRAYS[f"{name}/output"]
    assert tuple(out.shape) == expected.shape and out.device.type == device
    np.testing.assert_allclose(out.detach().cpu().numpy(), expected, rtol=1e-12, atol=1e-12)
    (out * tg.tensor(ARRAYS[f"{name}/upstream"], device=device)).sum().backward()
    for k in case["inputs"]:
        if _differentiable(case, k):
            np.testing.assert_allclose(t[k].grad.cpu().numpy(), ARRAYS[f"{name}/grad_{k}"],
                                       rtol=1e-12, atol=1e-12, err_msg=f"gradient of {k}")


def test_every_kind_of_case_was_recorded():
    kinds = {case["kind"] for case in CASES.values()}
    functions = {case["options"]["function"] for case in CASES.values() if case["kind"] == "activation"}
    assert kinds == {"activation", "bce", "bce_logits", "conv1d", "matrix_norm", "linalg_norm",
                     "tensor_norm", "svdvals"}
    assert functions == {"hardtanh", "relu6", "selu", "mish", "hardswish", "hardsigmoid",
                         "logsigmoid"}


BAD_CALLS = {
    "bce_outside_0_1": lambda: F.binary_cross_entropy(tg.tensor([1.5, 0.5]), tg.ones(2)),
    "bce_sizes": lambda: F.binary_cross_entropy(tg.tensor([0.5, 0.2]), tg.ones(1)),
    "bce_logits_sizes": lambda: F.binary_cross_entropy_with_logits(tg.zeros(2), tg.ones(1)),
    "bce_weight_requires_grad": lambda: F.binary_cross_entropy(
        tg.full((2,), 0.5), tg.ones(2), weight=tg.ones(2, requires_grad=True)),
    "bce_logits_pos_weight_requires_grad": lambda: F.binary_cross_entropy_with_logits(
        tg.zeros(2), tg.ones(2), pos_weight=tg.ones(2, requires_grad=True)),
    "hardtanh_bounds": lambda: F.hardtanh(tg.zeros(2), 2.0, 1.0),
    "Hardtanh_bounds": lambda: nn.Hardtanh(2.0, 1.0),
    "hardtanh_bool": lambda: F.hardtanh(tg.tensor([True])),
    "relu6_bool": lambda: F.relu6(tg.tensor([True])),
    "selu_list": lambda: F.selu([1.0]),
    "mish_list": lambda: F.mish([1.0]),
    "conv1d_4d_input": lambda: F.conv1d(tg.zeros(2, 3, 4, 5), tg.zeros(4, 3, 2)),
    "conv1d_channels": lambda: F.conv1d(tg.zeros(2, 3, 5), tg.zeros(4, 2, 2)),
    "conv1d_weight_dims": lambda: F.conv1d(tg.zeros(2, 3, 5), tg.zeros(4, 3, 2, 2)),
    "conv1d_kernel_too_long": lambda: F.conv1d(tg.zeros(2, 3, 5), tg.zeros(4, 3, 7)),
    "conv1d_dilated_too_long": lambda: F.conv1d(tg.zeros(2, 3, 5), tg.zeros(4, 3, 3),
                                                padding=1, dilation=4),
    "conv1d_same_strided": lambda: F.conv1d(tg.zeros(2, 3, 5), tg.zeros(4, 3, 2), stride=2,
                                            padding="same"),
    "conv1d_padding_string": lambda: F.conv1d(tg.zeros(2, 3, 5), tg.zeros(4, 3, 2), padding="full"),
    "conv1d_bias": lambda: F.conv1d(tg.zeros(2, 3, 5), tg.zeros(4, 3, 2), tg.zeros(3)),
    "matrix_norm_non_finite": lambda: tg.linalg.matrix_norm(
        tg.tensor([[float("nan"), 1.0], [1.0, 1.0]]), 2),
    "Conv1d_groups": lambda: nn.Conv1d(3, 4, 2, groups=2),
    "Conv1d_same_strided": lambda: nn.Conv1d(3, 4, 2, padding="same", stride=2),
}
# PyTorch's layer asserts its bounds; a library should not rely on assert (python -O drops it).
# torch.linalg.LinAlgError is PyTorch's own subclass of RuntimeError.
TYPE_INSTEAD = {"AssertionError": "ValueError", "_LinAlgError": "RuntimeError"}


@pytest.mark.parametrize("name", sorted(RECORDED["errors"]))
def test_bad_calls_are_refused_with_pytorch_s_error(name):
    recorded = RECORDED["errors"][name]
    with pytest.raises(Exception) as caught:
        BAD_CALLS[name]()
    assert type(caught.value).__name__ == TYPE_INSTEAD.get(recorded["type"], recorded["type"])
    assert recorded["message"].replace("torch.", "teachgrad.") in str(caught.value)


def test_every_bad_call_was_recorded():
    assert set(BAD_CALLS) == set(RECORDED["errors"])


@pytest.mark.parametrize("call", sorted(RECORDED["reprs"]))
def test_modules_print_as_pytorch_s(call):
    module = eval(call, {}, {k: getattr(nn, k) for k in dir(nn) if k[0].isupper()})  # our own text
    assert repr(module) == RECORDED["reprs"][call]


# float32 on a grid of 4001 points in [-8, 8]: the hard activations are comparisons, adds and
# one multiply or divide, so they give PyTorch's bits; the others call exp/log1p/tanh, whose
# last bit differs between libraries (and mish's gradient cancels near its zero at -1.19)
FLOAT32_BITS = ("hardtanh", "relu6", "hardswish", "hardsigmoid")
FLOAT32_ROUNDED = ("selu", "mish", "logsigmoid")


@pytest.mark.parametrize("function", FLOAT32_BITS + FLOAT32_ROUNDED)
def test_float32_activations_match_pytorch_s_rounding(function, device):
    grid = ARRAYS["float32/input"]
    x = tg.tensor(grid[::40] if device == "cuda" else grid, device=device, requires_grad=True)
    out = getattr(F, function)(x)
    out.sum().backward()
    expected = ARRAYS[f"float32/{function}/output"], ARRAYS[f"float32/{function}/grad"]
    if device == "cuda":
        expected = tuple(e[::40] for e in expected)
    for actual, wanted in zip((out.detach().cpu().numpy(), x.grad.cpu().numpy()), expected):
        assert actual.dtype == np.float32
        if function in FLOAT32_BITS:
            np.testing.assert_array_equal(actual, wanted)
        else:
            np.testing.assert_allclose(actual, wanted, rtol=1e-6, atol=2e-6)

"""``tg.autocast``: each operation's output dtype and values against PyTorch's on cpu.

PyTorch's answers inside ``torch.autocast("cpu", dtype=torch.bfloat16)`` are recorded by
``scripts/record_lowprec.py``: the output dtype of every op, its value and the float32
inputs' gradients.
"""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
import teachgrad.nn.functional as F
from teachgrad.amp import policy
from teachgrad.autograd import function
from lowprec_fixture import load

TARGET = [0, 3, 1, 2, 3, 0]
OPS = {
    "matmul": lambda a, b: a @ b,
    "mm": lambda a, b: tg.mm(a, b),
    "bmm": lambda a, b: tg.bmm(a, b),
    "linear": lambda x, w, b: F.linear(x, w, b),
    "conv2d": lambda x, w: F.conv2d(x, w),
    "softmax": lambda a: F.softmax(a, dim=1),
    "log_softmax": lambda a: F.log_softmax(a, dim=1),
    "exp": lambda a: a.exp(),
    "log": lambda a: a.abs().log(),
    "pow": lambda a: a ** 2,
    "sum": lambda a: a.sum(),
    "relu": lambda a: F.relu(a),
    "add_mixed": lambda a, b: a + b.bfloat16(),
    "cat_mixed": lambda a, b: tg.cat([a, b.bfloat16()]),
    "cross_entropy": lambda a: F.cross_entropy(a, tg.tensor(TARGET)),
    "mse_loss": lambda a, b: F.mse_loss(a, b),
    "l1_loss": lambda a, b: F.l1_loss(a, b),
    "nll_loss": lambda a: F.nll_loss(a, tg.tensor(TARGET)),
    "layer_norm": lambda a: F.layer_norm(a, (4,)),
    "norm": lambda a: tg.norm(a),
    "cross_entropy_of_linear": lambda x, w: F.cross_entropy(F.linear(x, w), tg.tensor(TARGET)),
    "softmax_of_matmul": lambda a, b: F.softmax(a @ b, dim=1),
}
#: conv2d sums its 18 products in another order than PyTorch's (im2col then a matrix
#: product): the bfloat16 results may land one rounding apart. Others are exact.
ONE_ROUNDING = {"conv2d"}


def _run(name):
    arrays, index = load()
    meta = index["autocast"][name]
    inputs = [tg.tensor(arrays[f"autocast/{name}/in{i}"], requires_grad=True)
              for i in range(meta["inputs"])]
    with tg.autocast("cpu", dtype=tg.bfloat16):
        out = OPS[name](*inputs)
    out.float().sum().backward()
    return arrays, meta, inputs, out


def _cases():
    return sorted(load()[1]["autocast"])


@pytest.mark.parametrize("name", _cases())
def test_output_dtype_and_value_match_pytorch(name):
    arrays, meta, _, out = _run(name)
    assert out.dtype.name == meta["dtype"]
    want = arrays[f"autocast/{name}/out"]
    got = out.detach().float().numpy()
    if name in ONE_ROUNDING:
        np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=2 ** -7 * np.abs(want).max())
    elif meta["dtype"] == "bfloat16":
        np.testing.assert_array_equal(got, want)  # bit for bit
    else:  # float32 results: teachgrad's float32 kernels and PyTorch's differ in the last bits
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", _cases())
def test_gradients_arrive_in_float32_as_pytorchs(name):
    arrays, meta, inputs, _ = _run(name)
    for i, t in enumerate(inputs):
        assert t.grad.dtype.name == meta["grad_dtypes"][i] == "float32"
        want = arrays[f"autocast/{name}/grad{i}"]
        # the backward of a bfloat16 op rounds its gradients to bfloat16 before they
        # reach float32: allow one bfloat16 rounding of the largest one
        np.testing.assert_allclose(t.grad.numpy(), want, rtol=0,
                                   atol=2 ** -7 * np.abs(want).max() + 1e-6)


def test_nesting_and_enabled_false_restore_the_outer_state():
    a = tg.randn(2, 3)
    b = tg.randn(3, 2)
    assert not tg.is_autocast_enabled("cpu")
    with tg.autocast("cpu"):
        assert tg.is_autocast_enabled("cpu") and not tg.is_autocast_enabled()  # (cuda)
        assert (a @ b).dtype is tg.bfloat16
        with tg.autocast("cpu", enabled=False):
            assert not tg.is_autocast_enabled("cpu")
            assert (a @ b).dtype is tg.float32
        with tg.autocast("cpu", dtype=tg.float16):
            assert (a @ b).dtype is tg.float16
            assert tg.amp.get_autocast_dtype("cpu") is tg.float16
        assert (a @ b).dtype is tg.bfloat16
    assert not tg.is_autocast_enabled("cpu")
    assert function.cast_policy is None  # off again: the engine's seam is unset


def test_an_error_inside_leaves_autocast_off():
    with pytest.raises(ZeroDivisionError):
        with tg.autocast("cpu"):
            1 / 0
    assert not tg.is_autocast_enabled("cpu") and function.cast_policy is None


def test_as_a_decorator():
    @tg.autocast("cpu", dtype=tg.bfloat16)
    def forward(x, w):
        return F.linear(x, w)

    assert forward(tg.randn(2, 3), tg.randn(4, 3)).dtype is tg.bfloat16
    assert not tg.is_autocast_enabled("cpu")


def test_only_the_named_device_is_cast():
    a = tg.randn(2, 3, device="cuda")
    b = tg.randn(3, 2, device="cuda")
    with tg.autocast("cpu"):
        assert (a @ b).dtype is tg.float32
    with tg.autocast("cuda"):  # float16 by default on cuda, as in PyTorch
        assert (a @ b).dtype is tg.float16
        assert F.softmax(a @ b, dim=1).dtype is tg.float32  # cuda's list: softmax in float32


def test_float64_and_integers_are_never_cast():
    with tg.autocast("cpu"):
        assert (tg.randn(2, 2, dtype=tg.float64) @ tg.randn(2, 2, dtype=tg.float64)).dtype \
            is tg.float64
        assert (tg.ones(2, 2, dtype=tg.int64) @ tg.ones(2, 2, dtype=tg.int64)).dtype is tg.int64


def test_a_model_trains_under_autocast_with_float32_parameters():
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.ReLU(), tg.nn.Linear(8, 3))
    x, y = tg.randn(16, 4), tg.randint(0, 3, (16,))
    with tg.autocast("cpu"):
        loss = F.cross_entropy(model(x), y)
    assert loss.dtype is tg.float32
    loss.backward()
    assert all(p.grad.dtype is tg.float32 for p in model.parameters())


def test_the_tables_are_pytorchs_lists():
    assert policy.rule_for("cpu", "linear") == policy.LOWER
    assert policy.rule_for("cpu", "softmax") is None  # on cpu softmax keeps its input dtype
    assert policy.rule_for("cuda", "softmax") == policy.FLOAT32
    assert policy.rule_for("cpu", "cross_entropy") == policy.FLOAT32
    assert policy.rule_for("cpu", "cat") == policy.PROMOTE
    assert set(policy.FUNCTION_NAMES.values()) <= set(policy.POLICY["cuda"]) | {"linear"}


@pytest.mark.parametrize("call, message", [
    (lambda: tg.autocast("tpu"), "device_type must be 'cpu' or 'cuda'"),
    (lambda: tg.autocast("cpu", dtype=tg.float64), "dtype must be tg.float16 or tg.bfloat16"),
    (lambda: tg.autocast("cpu", dtype="bf16"), "dtype must be tg.float16 or tg.bfloat16"),
    (lambda: tg.autocast("cpu", enabled="yes"), "enabled must be True or False"),
    (lambda: tg.autocast("cuda", dtype=tg.bfloat16), "cuda device has no bfloat16"),
    (lambda: tg.is_autocast_enabled("gpu"), "device_type must be 'cpu' or 'cuda'"),
])
def test_bad_arguments_are_refused_before_anything_changes(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()
    assert function.cast_policy is None


def test_a_compiled_function_inside_autocast_gives_eagers_answer():
    w = tg.randn(3, 4)

    def f(x):
        return F.softmax(F.linear(x, w), dim=1)

    compiled = tg.compile(f)
    x = tg.randn(2, 4)
    outside = compiled(x)  # compiled here, outside autocast
    with tg.autocast("cpu"):
        inside = compiled(x)  # runs eagerly: autocast casts each operation
        assert inside.dtype is f(x).dtype is tg.bfloat16
        np.testing.assert_array_equal(inside.float().numpy(), f(x).float().numpy())
    assert compiled(x).dtype is tg.float32
    np.testing.assert_array_equal(compiled(x).numpy(), outside.numpy())

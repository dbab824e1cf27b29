"""Elementwise kernels against numpy, in the simulator, on sizes that fit no block evenly."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import math

import numpy as np
import pytest

from teachgrad.backends.base import BINARY_OPS, COMPARISONS, UNARY_OPS
from teachgrad.kernels import elementwise
from teachgrad.kernels.strided import broadcast_view, new_array
from teachgrad.kernels.transfer import download, upload

NUMPY_UNARY = {
    "neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "abs": np.abs,
    "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "sign": np.sign,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0),
    "step": lambda x: (x > 0).astype(x.dtype),
    "erf": np.vectorize(math.erf), "log1p": np.log1p, "expm1": np.expm1,
}
NUMPY_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "eq": np.equal, "ne": np.not_equal,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
}
RAGGED = (5, 7)  # 35 elements: 2 blocks of 8 threads take 3 passes, the last one partial
CONFIG = (2, 8)
rng = np.random.default_rng(0)


def tolerance(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


def sample(dtype, op=""):
    x = rng.standard_normal(RAGGED).astype(dtype)
    if op in ("log", "sqrt", "log1p"):
        x = np.abs(x) + np.asarray(0.1, dtype)
    return x


def test_every_base_op_has_a_kernel():
    assert set(UNARY_OPS) <= set(NUMPY_UNARY)
    assert set(BINARY_OPS) <= set(NUMPY_BINARY)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", UNARY_OPS)
def test_unary_matches_numpy_on_a_transposed_input(op, dtype):
    x = sample(dtype, op)
    view = upload(x.T.copy())
    transposed = view.view(RAGGED, view.strides[::-1], 0)  # x again, read through swapped strides
    assert not transposed.is_contiguous()
    out = new_array(RAGGED, dtype)
    elementwise.unary(op, out, transposed, config=CONFIG)
    np.testing.assert_allclose(download(out), NUMPY_UNARY[op](x).astype(dtype), **tolerance(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", BINARY_OPS)
def test_binary_matches_numpy_with_broadcasting(op, dtype):
    a = sample(dtype)
    b = rng.standard_normal((1, RAGGED[1])).astype(dtype)  # a row, broadcast down the columns
    if op == "pow":
        a = np.abs(a) + np.asarray(0.5, dtype)
    b[0, 2] = a[3, 2]  # one equal pair for the comparisons
    expected = NUMPY_BINARY[op](a, b)
    out = new_array(RAGGED, expected.dtype)
    elementwise.binary(op, out, upload(a), broadcast_view(upload(b), RAGGED), config=CONFIG)
    assert download(out).dtype == (np.bool_ if op in COMPARISONS else dtype)
    np.testing.assert_allclose(download(out), expected, **tolerance(dtype))


@pytest.mark.parametrize("op", ["sub", "div", "pow", "lt"])
def test_binary_with_a_scalar_on_either_side(op):
    a = np.abs(sample(np.float32)) + np.float32(0.5)
    for left, right in ((a, 1.5), (1.5, a)):
        expected = NUMPY_BINARY[op](left, right)
        out = new_array(RAGGED, expected.dtype)
        elementwise.binary(op, out, *(upload(v) if isinstance(v, np.ndarray) else v
                                      for v in (left, right)), config=CONFIG)
        np.testing.assert_allclose(download(out), expected, rtol=1e-5)


def test_integer_array_compared_with_a_fraction_keeps_the_fraction():
    a = np.arange(-3, 4, dtype=np.int64)
    out = new_array(a.shape, np.bool_)
    elementwise.binary("lt", out, upload(a), 0.5, config=CONFIG)
    np.testing.assert_array_equal(download(out), a < 0.5)


def test_numpy_edge_values():
    x = np.array([0.0, -1.0, np.nan, 1000.0, -np.inf], dtype=np.float64)
    for op in ("log", "sqrt", "exp", "sign", "relu", "sigmoid"):
        out = new_array(x.shape, x.dtype)
        elementwise.unary(op, out, upload(x), config=CONFIG)
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(download(out), NUMPY_UNARY[op](x), equal_nan=True, err_msg=op)
    out = new_array(x.shape, x.dtype)
    elementwise.binary("maximum", out, upload(x), 0.0, config=CONFIG)
    np.testing.assert_array_equal(download(out), np.maximum(x, 0.0))


def test_where_with_array_and_scalar_branches():
    a = sample(np.float64)
    cond = a > 0
    out = new_array(RAGGED, np.float64)
    elementwise.where(out, upload(cond), upload(a), -2.0, config=CONFIG)
    np.testing.assert_array_equal(download(out), np.where(cond, a, -2.0))


def test_copy_into_a_strided_destination_converts_dtype():
    dst = upload(np.zeros((4, 6), dtype=np.int64))
    every_other_column = dst.view((4, 3), (6, 2), 1)  # dst[:, 1::2]
    src = np.arange(12, dtype=np.float32).reshape(4, 3) + np.float32(0.75)
    elementwise.copy(every_other_column, upload(src), config=CONFIG)
    expected = np.zeros((4, 6), dtype=np.int64)
    expected[:, 1::2] = src
    np.testing.assert_array_equal(download(dst), expected)


def test_fill_with_a_scalar():
    out = new_array((3, 5), np.float32)
    elementwise.copy(out, 2.5, config=CONFIG)
    np.testing.assert_array_equal(download(out), np.full((3, 5), 2.5, np.float32))


def test_grid_bigger_than_the_data_leaves_threads_idle_but_is_correct():
    x = sample(np.float32)
    out = new_array(RAGGED, np.float32)
    elementwise.unary("neg", out, upload(x), config=(3, 32))  # 96 threads for 35 elements
    np.testing.assert_array_equal(download(out), -x)


def test_output_must_be_fresh_and_contiguous():
    out = upload(np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match="fresh contiguous output"):
        elementwise.unary("neg", out.view((4, 4), (1, 4), 0), out)

"""sum's and mean's backward run on numpy arrays (``formula_on_arrays``), with the bits the
tensor formula gives: ``expand`` is the backend's broadcast view either way."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.ops.reduce import Mean, Sum

CASES = [dict(), dict(dim=0), dict(dim=1, keepdim=True), dict(dim=(0, 2)), dict(dim=-1)]


def _gradient(reduce, dtype, case, seed):
    rng = np.random.default_rng(seed)
    x = tg.tensor(rng.standard_normal((3, 4, 5)), dtype=dtype, requires_grad=True)
    out = getattr(x, reduce)(**case)
    upstream = tg.tensor(rng.standard_normal(tuple(out.shape)) * 3.0, dtype=dtype)
    ((out * upstream).tanh() * 1.5).sum().backward()
    return out.grad_fn.on_arrays, x.grad.numpy()


@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_formula_on_arrays_gives_the_tensor_formulas_bits(reduce, dtype, case, monkeypatch):
    on_arrays, fast = _gradient(reduce, dtype, CASES[case], case)
    assert on_arrays  # the shortcut ran
    monkeypatch.setattr(Sum if reduce == "sum" else Mean, "formula_on_arrays", False)
    on_arrays, readable = _gradient(reduce, dtype, CASES[case], case)
    assert not on_arrays
    assert fast.tobytes() == readable.tobytes()


def test_a_leaf_summed_alone_gets_its_own_gradient_array():
    x = tg.ones(2, 3, requires_grad=True)
    x.sum().backward()
    x.mean().backward()
    grad = x.grad._array
    assert grad.flags.writeable and grad.flags.c_contiguous and grad.strides == (12, 4)
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 1 + 1 / 6, dtype=np.float32))


@pytest.mark.parametrize("shape", [(), (4,), (2, 3), (0, 3), (2, 1, 5)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int64])
def test_a_scalars_broadcast_view_is_numpys(shape, dtype):
    from teachgrad.backends.numpy_backend import NumpyBackend
    x = np.array(-2.5).astype(dtype)
    got, want = NumpyBackend().broadcast_to(x, shape), np.broadcast_to(x, shape)
    assert type(got) is np.ndarray and got.shape == want.shape and got.dtype == want.dtype
    assert got.strides == want.strides and not got.flags.writeable
    np.testing.assert_array_equal(got, want)
    x[()] = 7  # a view of x, as numpy's is
    np.testing.assert_array_equal(got, np.broadcast_to(x, shape))


def test_a_numpy_scalars_broadcast_view_is_numpys():
    from teachgrad.backends.numpy_backend import NumpyBackend
    x = np.float32(-1.5)  # (what a 0-d array divided by a number gives)
    got, want = NumpyBackend().broadcast_to(x, (2, 3)), np.broadcast_to(x, (2, 3))
    assert got.dtype == want.dtype and got.strides == want.strides and not got.flags.writeable
    np.testing.assert_array_equal(got, want)

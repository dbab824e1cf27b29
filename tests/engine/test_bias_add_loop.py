"""A layer's bias added to its output, and its gradient summed over the rows: the numpy
backend's compiled passes (``pointwise_loops.add_rows`` and ``sum_rows``) give numpy's bits,
and run only where they may."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.backends import pointwise_loops


def _counted(monkeypatch, name: str) -> list:
    """The shapes of the first array handed to ``pointwise_loops.<name>``, call by call."""
    calls = []
    real = getattr(pointwise_loops, name)
    monkeypatch.setattr(pointwise_loops, name,
                        lambda x, other: calls.append(x.shape) or real(x, other))
    return calls


@pytest.fixture
def loop_calls(monkeypatch):
    return _counted(monkeypatch, "add_rows")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_plus_a_row_has_numpys_bits(dtype, loop_calls):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((300, 7, 37)) * 1e3).astype(dtype)
    row = rng.standard_normal(37).astype(dtype)
    x[0, 0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    row[4:6] = [-0.0, np.inf]
    expected = x + row
    backend = tg.tensor([1.0])._backend
    backend.binary_inplace("add", x, row)
    assert loop_calls == [(2100, 37)]
    assert x.tobytes() == expected.tobytes()


def test_linear_takes_the_pass_and_keeps_its_numbers(loop_calls):
    tg.manual_seed(0)
    layer = tg.nn.Linear(16, 48)
    x = tg.randn(4, 100, 16)
    out = layer(x)
    assert loop_calls == [(400, 48)]
    expected = x.numpy().reshape(-1, 16) @ layer.weight.detach().numpy().T
    expected += layer.bias.detach().numpy()
    assert out.detach().numpy().reshape(-1, 48).tobytes() == expected.tobytes()


def test_other_operands_take_numpy(loop_calls):
    backend = tg.tensor([1.0])._backend
    big = np.ones((400, 64), np.float32)
    backend.binary_inplace("add", np.ones((4, 8), np.float32), np.ones(8, np.float32))  # small
    backend.binary_inplace("add", big, np.ones(64, np.float64))  # another dtype
    backend.binary_inplace("add", big, np.ones(128, np.float32)[::2])  # a strided row
    backend.binary_inplace("add", big[:, :32], np.ones(32, np.float32))  # strided rows
    backend.binary_inplace("add", big, big[0])  # a row of x itself
    backend.binary_inplace("mul", big, np.ones(64, np.float32))  # not an addition
    assert loop_calls == []
    # 1, then +1 (float64 row), +1 (strided row), +1 on the first 32 columns, then doubled
    np.testing.assert_array_equal(big[1], np.repeat(np.float32([8, 6]), 32))


@pytest.fixture
def sum_calls(monkeypatch):
    return _counted(monkeypatch, "sum_rows")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1024, 37), (6000, 3), (40, 8, 60), (1, 20000)])
def test_sum_over_rows_has_numpys_bits(dtype, shape, sum_calls):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 1e4).astype(dtype)
    x[..., 0] = -0.0  # numpy adds from 0: a column of -0.0 sums to +0.0
    width = x.size // shape[0]
    spots = [i for i in range(x.size) if i % width][:3]  # (not in the -0.0 column)
    x.reshape(-1)[spots] = [np.inf, -np.inf, np.nan]
    backend = tg.tensor([1.0])._backend
    for keepdims in (False, True):
        got = backend.reduce("sum", x, (0,), keepdims)
        want = np.add.reduce(x, axis=0, keepdims=keepdims)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert got.tobytes() == want.tobytes()
    assert sum_calls == [(shape[0], int(np.prod(shape[1:])))] * 2


def test_linear_bias_gradient_takes_the_pass(sum_calls):
    tg.manual_seed(1)
    layer = tg.nn.Linear(8, 300)
    x = tg.randn(2, 64, 8)
    grad = tg.randn(2, 64, 300)
    layer(x).backward(grad)
    assert sum_calls == [(128, 300)]
    want = np.add.reduce(grad.numpy().reshape(-1, 300), axis=0)
    assert layer.bias.grad.numpy().tobytes() == want.tobytes()


def test_other_sums_take_numpy(sum_calls):
    backend = tg.tensor([1.0])._backend
    big = np.ones((400, 64), np.float32)
    backend.reduce("sum", big, (1,), False)  # another axis
    backend.reduce("sum", big, (0, 1), False)  # every axis
    backend.reduce("sum", big[:, ::2], (0,), False)  # strided
    backend.reduce("sum", np.ones((4, 8), np.float32), (0,), False)  # small
    backend.reduce("sum", np.ones((400, 64), np.int64), (0,), False)  # integers
    backend.reduce("max", big, (0,), False)  # not a sum
    assert sum_calls == []

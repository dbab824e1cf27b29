"""Shared-memory tree reductions against numpy, on rows that fit no block evenly."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import numpy as np
import pytest

from teachgrad.kernels import reduce
from teachgrad.kernels.transfer import to_device

rng = np.random.default_rng(1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("shape", [(3, 1), (4, 37), (1, 150)])
def test_reduce_rows_matches_numpy(op, dtype, shape):
    x = rng.standard_normal(shape).astype(dtype)
    got = reduce.reduce_rows(op, to_device(x), threads=16).copy_to_host()
    expected = getattr(x, op)(axis=1)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_a_long_row_is_split_over_blocks_and_finished_in_a_second_pass(monkeypatch):
    monkeypatch.setattr(reduce, "MAX_BLOCKS_PER_ROW", 3)
    x = rng.standard_normal((2, 100))
    got = reduce.reduce_rows("sum", to_device(x), threads=8).copy_to_host()
    np.testing.assert_allclose(got, x.sum(axis=1))


def test_integer_max_uses_the_lowest_integer_as_identity():
    x = np.array([[-5, -9, -7]], dtype=np.int64)
    assert reduce.reduce_rows("max", to_device(x), threads=4).copy_to_host().tolist() == [-5]


def test_nan_propagates_like_numpy():
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]])
    got = reduce.reduce_rows("max", to_device(x), threads=4).copy_to_host()
    np.testing.assert_array_equal(got, [np.nan, 3.0])


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduce_rows_returns_the_first_position_on_ties(op):
    x = rng.integers(0, 4, size=(5, 29)).astype(np.float32)  # many ties
    got = reduce.arg_reduce_rows(op, to_device(x), threads=8).copy_to_host()
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, getattr(x, op)(axis=1))


def test_argmax_finds_nan_first_like_numpy():
    x = np.array([[1.0, 5.0, np.nan, 7.0, np.nan]])
    assert reduce.arg_reduce_rows("argmax", to_device(x), threads=4).copy_to_host().tolist() == [2]


def test_threads_must_be_a_power_of_two_for_the_tree():
    with pytest.raises(ValueError, match="threads per block must be a power of two .e.g. 32 or 256., got 24"):
        reduce.reduce_rows("sum", to_device(np.ones((2, 5))), threads=24)

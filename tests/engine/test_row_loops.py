"""The compiled ``out[rows[k]] += values[k]`` (an embedding's and an integer index's
backward): each row's additions in the order of k, bit for bit; within rounding of the
sort-and-reduceat way and of float64 sums; negative and repeated rows; an index out of
range refused instead of written past the array."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.backends import numpy_backend
from teachgrad.backends.row_loops import add_rows


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("count,n,k", [(7, 5, 40), (1, 3, 9), (62, 64, 1024), (5, 1, 3)])
def test_the_loop_adds_in_order_and_agrees_with_sort_and_reduceat(dtype, count, n, k):
    rng = np.random.default_rng(count * k)
    rows = rng.integers(-count, count, k)
    values = (rng.standard_normal((k, n)) * 10.0 ** rng.integers(-3, 4, (k, 1))).astype(dtype)
    looped, sorted_ = np.zeros((count, n), dtype), np.zeros((count, n), dtype)
    add_rows(looped, rows, values)
    in_order = np.zeros((count, n), dtype)
    for r, v in zip(rows, values):  # (one row at a time, in the order of k)
        in_order[r] = in_order[r] + v
    np.testing.assert_array_equal(looped, in_order)
    numpy_backend.add_rows_sorted(sorted_, rows, values)
    exact = np.zeros((count, n))
    np.add.at(exact, rows, values.astype(np.float64))
    tol = dict(rtol=1e-4, atol=1e-3) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(looped, exact, **tol)
    np.testing.assert_allclose(sorted_, exact, **tol)


def test_a_row_out_of_range_is_refused():
    with pytest.raises(IndexError, match="out of range"):
        add_rows(np.zeros((3, 2)), np.array([0, 3]), np.ones((2, 2)))
    with pytest.raises(IndexError, match="out of range"):
        add_rows(np.zeros((3, 2)), np.array([-4]), np.ones((1, 2)))


def test_embedding_backward_takes_the_loop_and_matches_one_hot_products():
    rng = np.random.default_rng(3)
    emb = tg.nn.Embedding(6, 4)
    ids = rng.integers(0, 6, (3, 5))
    grad = rng.standard_normal((3, 5, 4)).astype(np.float32)
    emb(tg.tensor(ids)).backward(tg.tensor(grad))
    one_hot = np.eye(6, dtype=np.float64)[ids.reshape(-1)]
    np.testing.assert_allclose(emb.weight.grad.numpy(), one_hot.T @ grad.reshape(-1, 4), rtol=1e-5,
                               atol=1e-6)

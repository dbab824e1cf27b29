"""Sorting, gather/scatter, masked ops, matrix parts, scans and splitting: bad input is
refused before any work, with PyTorch's error class and a message that names the
problem (and, where there is one, the fix); in-place forms leave the tensor unchanged.
What they return (named tuples, dtypes) is checked here too; values and gradients are
checked against PyTorch in the differential test.
"""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg


def m() -> tg.Tensor:
    return tg.arange(12, dtype=tg.float32).reshape(3, 4)


@pytest.mark.parametrize("call, kind, words", [
    (lambda x: x.topk(5), RuntimeError, "k out of range"),
    (lambda x: x.topk(2.0), TypeError, "'k' must be int"),
    (lambda x: x.sort(descending=1), TypeError, "'descending' must be bool"),
    (lambda x: x.sort(dim=2), IndexError, "Dimension out of range"),
    (lambda x: x.gather(1, tg.tensor([[0, 4]])), RuntimeError, "index 4 is out of bounds for dimension 1 with size 4"),
    (lambda x: x.gather(1, tg.tensor([[0.0]])), RuntimeError, "Fix: convert it with .long()"),
    (lambda x: x.gather(1, [[0]]), TypeError, "must be a tensor"),
    (lambda x: x.gather(1, tg.tensor([0])), RuntimeError, "same number of dimensions"),
    (lambda x: x.scatter(1, tg.tensor([[0]]), tg.ones(1, 1, dtype=tg.float64)), RuntimeError, "Fix: convert src"),
    (lambda x: x.scatter(1, tg.tensor([[0]])), TypeError, "exactly one of `src`"),
    (lambda x: x.scatter(1, tg.tensor([[0]]), 1.0, reduce="add"), NotImplementedError, "scatter_add"),
    (lambda x: x.clone().scatter_(1, tg.tensor([[0]]), 1.0, reduce="multiply"), NotImplementedError, "reduce="),
    (lambda x: x.gather(1, tg.tensor([[0]]), sparse_grad=True), NotImplementedError, "no sparse"),
    (lambda x: x.scatter_add(1, tg.tensor([[0, 1]]), tg.ones(1, 1)), RuntimeError, "no larger size than src [1, 1]"),
    (lambda x: x.index_select(0, tg.tensor([[0]])), IndexError, "supposed to be a vector"),
    (lambda x: x.index_select(0, tg.tensor([3])), IndexError, "index out of range"),
    (lambda x: x.index_add(0, tg.tensor([0]), tg.ones(2, 4)), RuntimeError, "Number of indices (1)"),
    (lambda x: x.index_add(0, tg.tensor([0]), tg.ones(1, 3)), RuntimeError, "same slice shapes"),
    (lambda x: x.masked_fill(x, 0.0), RuntimeError, "only supports boolean masks"),
    (lambda x: x.masked_fill(tg.tensor([True, False]), 0.0), RuntimeError, "[3, 4] and [2]"),
    (lambda x: x.masked_fill(x > 0, tg.ones(2)), RuntimeError, "0-dimensional value tensor"),
    (lambda x: x.masked_fill(x > 0, "a"), TypeError, "'value' must be a number"),
    (lambda x: x.masked_select(tg.tensor([1, 0, 1, 0])), RuntimeError, "expected BoolTensor"),
    (lambda x: x[0].tril(), RuntimeError, "at least 2 dimensions"),
    (lambda x: x.triu(1.5), TypeError, "'diagonal' must be int"),
    (lambda x: x[0].trace(), RuntimeError, "expected a matrix"),
    (lambda x: (x > 0).trace(), NotImplementedError, ".long()"),
    (lambda x: x[None].diag(), RuntimeError, "Supports 1D or 2D"),
    (lambda x: x.diagonal(dim1=1, dim2=-1), RuntimeError, "cannot be identical"),
    (lambda x: x.cumsum(2), IndexError, "Dimension out of range"),
    (lambda x: x.cumprod(dim=0.5), TypeError, "dim must be an int"),
    (lambda x: x.split([1, 1]), RuntimeError, "sum exactly to 3"),
    (lambda x: x.split(0), RuntimeError, "split_size can only be 0"),
    (lambda x: x.split("2"), TypeError, "split_size must be an int"),
    (lambda x: x.chunk(0), RuntimeError, "greater than 0"),
    (lambda x: x[0, 0].unbind(), IndexError, "no dimensions"),
    (lambda x: x[range(4)], IndexError, "index 3 is out of bounds"),
])
def test_bad_input_is_refused_with_a_clear_error(call, kind, words):
    with pytest.raises(kind) as caught:
        call(m())
    assert words in str(caught.value)


@pytest.mark.parametrize("change", [
    lambda y: y.scatter_(1, tg.tensor([[0, 9]]), 1.0),
    lambda y: y.scatter_add_(1, tg.tensor([[0]]), tg.ones(1, 1, dtype=tg.float64)),
    lambda y: y.index_add_(0, tg.tensor([0, 1]), tg.ones(3, 4)),
    lambda y: y.masked_fill_(tg.ones(2, 3, 4, dtype=tg.bool), 0.0),
    lambda y: y.masked_fill_(y > 3, tg.ones(3)),
])
def test_a_refused_in_place_change_leaves_the_tensor_as_it_was(change):
    y = m()
    version = y._version
    with pytest.raises(RuntimeError):
        change(y)
    np.testing.assert_array_equal(y.numpy(), m().numpy())
    assert y._version == version


def test_in_place_forms_on_a_leaf_that_requires_grad_are_refused():
    w = m().requires_grad_()
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w.masked_fill_(w > 2, 0.0)
    with tg.no_grad():
        w.masked_fill_(w > 2, 0.0)  # allowed where PyTorch allows it
    assert w.sum().item() == 3.0


def test_sort_and_topk_return_named_tuples_with_int64_indices():
    x = tg.tensor([[3.0, 1.0, 3.0, 2.0]])
    result = x.sort(descending=True)
    assert type(result).__name__ == "sort" and result._fields == ("values", "indices")
    values, indices = result
    assert indices.dtype is tg.int64 and not indices.requires_grad
    assert indices.tolist() == [[0, 2, 3, 1]]  # stable: equal values keep their order
    top = tg.topk(x, 2)
    assert type(top).__name__ == "topk" and top.indices.tolist() == [[0, 2]]
    assert tg.argsort(x).tolist() == [[1, 3, 0, 2]]


def test_result_dtypes_follow_pytorch():
    ints = tg.tensor([[1, 2], [3, 4]])
    assert ints.cumsum(0).dtype is tg.int64 and (ints > 1).cumsum(1).dtype is tg.int64
    assert ints.cumprod(1, dtype=tg.float64).dtype is tg.float64
    assert ints.trace().dtype is tg.int64 and ints.trace().item() == 5
    assert ints.masked_fill(ints > 2, 0.9).tolist() == [[1, 2], [0, 0]]  # the value in int64
    assert (ints > 2).tril().dtype is tg.bool


def test_pieces_of_split_are_views_whose_gradients_add_up():
    x = m().requires_grad_()
    q, k, v = x.split(1, dim=0)
    assert tg.cat([v, q]).shape == (2, 4)
    (q * 1 + k * 2 + v * 3).sum().backward()
    assert x.grad.tolist() == [[1.0] * 4, [2.0] * 4, [3.0] * 4]
    assert [p.shape[1] for p in x.chunk(3, dim=1)] == [2, 2]  # fewer pieces, as in PyTorch

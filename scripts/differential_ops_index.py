"""Differential cases, part 3: sorting, gathering and scattering, running totals, parts of
matrices and splitting (see ``differential_cases.py``).

Ties (sort is stable on both sides; topk's choice among equal values is left open by
PyTorch, so those cases compare values only), negative dims, empty and 0-d tensors,
integer and bool dtypes, zeros in cumprod's input, in-place forms, and bad input.
"""
from __future__ import annotations

import numpy as np

from differential_cases import CaseList, normal_arrays

f32, f64, i64 = np.float32, np.float64, np.int64
r = normal_arrays(2213)  # r(2, 3): a float32 array of normals


M = r(3, 4)
A3 = r(2, 3, 4)
TIES = np.array([[3., 1., 3., 2.], [2., 2., 0., 2.], [-1., -1., -1., -1.]], f32)
WITH_NAN = np.array([1., np.nan, -2., 0.5, np.nan], f32)
ZEROS_IN = np.array([[2., 0., 3., 0.5], [0., 1.5, -2., 1.], [1.5, -1., 0.5, 2.]], f32)
INTS = np.array([[3, -1, 0, 7], [-6, 2, 2, 1]], i64)
EMPTY = np.zeros((0, 3), f32)
SCALAR = np.array(2.5, f32)
SQUARE = r(4, 4)

CASES = CaseList()

# -- sort, argsort, topk -----------------------------------------------------------------------
CASES.table("sort", {
    "last_dim": lambda C, x: x.sort(),
    "dim0_descending": lambda C, x: C.T.sort(x, dim=0, descending=True),
    "negative_dim": lambda C, x: x.sort(dim=-2),
    "stable": lambda C, x: x.sort(stable=True, descending=True),
    "argsort": lambda C, x: x.argsort(dim=1, descending=True),
    "argsort_fn": lambda C, x: C.T.argsort(x, 0),
    "values_field": lambda C, x: x.sort(1).values * 2,
    "indices_field": lambda C, x: x.sort(1).indices,
}, (TIES,), grad=(0,))
CASES.table("sort/more", {
    "3d_middle": lambda C, x: x.sort(1),
    "3d_topk_middle": lambda C, x: x.topk(2, dim=1),
}, (A3,), grad=(0,))
CASES.table("sort/nan", {
    "ascending": lambda C, x: x.sort(),
    "descending": lambda C, x: x.sort(descending=True),
    "topk_nan_first": lambda C, x: x.topk(3),
}, (WITH_NAN,))
CASES.table("sort/ints", {
    "sort": lambda C, x: x.sort(1),
    "argsort": lambda C, x: C.T.argsort(x, descending=True),
    "topk": lambda C, x: x.topk(2).values,
    "bool": lambda C, x: (x > 0).sort(1),
}, (INTS,))
CASES.table("topk", {
    "largest": lambda C, x: x.topk(2),
    "smallest": lambda C, x: C.T.topk(x, 3, largest=False),
    "dim0": lambda C, x: x.topk(1, dim=0),
    "k0": lambda C, x: x.topk(0),
    "k_all": lambda C, x: x.topk(4, dim=-1),
    "unsorted_flag": lambda C, x: x.topk(2, sorted=True),
}, (M,), grad=(0,))
CASES.table("topk/ties", {  # which of equal values PyTorch picks is not promised: values only
    "values": lambda C, x: x.topk(2).values,
    "smallest_values": lambda C, x: x.topk(2, largest=False).values,
}, (TIES,))  # (and no gradient: it goes to the picked ones)
CASES.table("sort/edge", {
    "0d_sort": lambda C, x: x.sort(),
    "0d_topk": lambda C, x: x.topk(1),
    "0d_argsort": lambda C, x: x.argsort(dim=0),
}, (SCALAR,), grad=(0,))
CASES.table("sort/empty", {
    "sort": lambda C, x: x.sort(0),
    "topk0": lambda C, x: x.topk(0, dim=0),
}, (EMPTY,), grad=(0,))
CASES.table("sort/error", {
    "dim_out_of_range": lambda C, x: x.sort(dim=2),
    "k_too_big": lambda C, x: x.topk(5),
    "k_negative": lambda C, x: x.topk(-1),
    "0d_dim1": lambda C, x: x[0, 0].sort(dim=1),
}, (M,))

# -- gather, scatter, index_select, index_add ----------------------------------------------------
IDX_ROWS = np.array([[0, 0, 3], [1, 2, 1], [3, 3, 3]], i64)
CASES.table("gather", {
    "dim1": lambda C, x: x.gather(1, C.tensor(IDX_ROWS)),
    "dim0": lambda C, x: C.T.gather(x, 0, C.tensor([[2, 0, 1, 1], [0, 0, 0, 2]])),
    "negative_dim": lambda C, x: x.gather(-1, C.tensor([[1], [0], [3]])),
    "smaller_index": lambda C, x: x.gather(1, C.tensor([[2, 2]])),
    "empty_index": lambda C, x: x.gather(1, C.tensor(np.zeros((3, 0), i64))),
    "0d": lambda C, x: x[1, 1].gather(0, C.tensor(0)),
}, (M,), grad=(0,))
CASES.table("gather/error", {
    "out_of_range": lambda C, x: x.gather(1, C.tensor([[0, 4]])),
    "negative_index": lambda C, x: x.gather(1, C.tensor([[-1]])),
    "ndim": lambda C, x: x.gather(1, C.tensor([0, 1])),
    "too_big": lambda C, x: x.gather(1, C.tensor(np.zeros((4, 1), i64))),
    "float_index": lambda C, x: x.gather(1, C.tensor([[0.]])),
    "bad_dim": lambda C, x: x.gather(2, C.tensor([[0]])),
}, (M,))
SRC = r(3, 4)
CASES.table("scatter", {
    "src": lambda C, x, s: x.scatter(1, C.tensor([[0, 1], [3, 2], [1, 0]]), s[:, :2]),
    "value": lambda C, x, s: x.scatter(0, C.tensor([[2, 0, 1, 0]]), -1.5) + s,
    "fn": lambda C, x, s: C.T.scatter(x, 1, C.tensor([[3], [2], [1]]), s[:, 1:2]),
    "add": lambda C, x, s: x.scatter_add(1, C.tensor([[0, 0, 1], [3, 3, 3], [2, 1, 0]]), s[:, :3]),
    "add_fn_dim0": lambda C, x, s: C.T.scatter_add(x, 0, C.tensor([[1, 1, 1, 1], [1, 0, 2, 2]]), s[1:]),
    "add_negative_dim": lambda C, x, s: x.scatter_add(-1, C.tensor([[1], [1], [0]]), s[:, :1]),
    "add_empty": lambda C, x, s: x.scatter_add(1, C.tensor(np.zeros((3, 0), i64)), s[:, :0]),
    "larger_src_no_grad": lambda C, x, s: x.scatter_add(1, C.tensor([[2], [0], [0]]), s.detach()),
}, (M, SRC), grad=(0, 1))


def _scatter_inplace(C, x, s):
    y = x * 1
    y.scatter_(1, C.tensor([[1], [0], [3]]), s[:, :1])
    y.scatter_add_(0, C.tensor([[2, 2, 0, 1]]), s[2:] * 3)
    return y


def _scatter_value_inplace(C, x, s):
    y = x.clone()
    return y.scatter_(0, C.tensor([[1, 0, 2, 2]]), 7.0) * s


CASES.table("scatter/inplace", {
    "src_then_add": _scatter_inplace,
    "value": _scatter_value_inplace,
}, (M, SRC), grad=(0, 1))
CASES.table("scatter/ints", {
    "add": lambda C: C.tensor([[1, 2], [3, 4]]).scatter_add(1, C.tensor([[1, 1]]), C.tensor([[5, 6]])),
    "value": lambda C: C.tensor([1, 2, 3]).scatter(0, C.tensor([2]), 9),
    "bool_value": lambda C: C.tensor([True, False]).scatter(0, C.tensor([1]), True),
})
CASES.table("scatter/error", {
    "out_of_range": lambda C, x, s: x.scatter(1, C.tensor([[0, 4]]), s),
    "src_too_small": lambda C, x, s: x.scatter_add(1, C.tensor([[0, 1]]), s[:1, :1]),
    "dtype": lambda C, x, s: x.scatter(1, C.tensor([[0]]), s.double()),
    "ndim": lambda C, x, s: x.scatter_add(1, C.tensor([0]), s),
    "inplace_leaf": lambda C, x, s: x.scatter_(1, C.tensor([[0]]), s),
}, (M, SRC), grad=(0,))
CASES.table("index_select", {
    "dim0": lambda C, x: x.index_select(0, C.tensor([2, 0, 2])),
    "dim1_fn": lambda C, x: C.T.index_select(x, 1, C.tensor([3, 1])),
    "negative_dim": lambda C, x: x.index_select(-1, C.tensor([0])),
    "0d_index": lambda C, x: x.index_select(0, C.tensor(1)),
    "empty": lambda C, x: x.index_select(1, C.tensor(np.zeros(0, i64))),
}, (M,), grad=(0,))
CASES.table("index_select/error", {
    "out_of_range": lambda C, x: x.index_select(1, C.tensor([4])),
    "out_of_range_dim0": lambda C, x: x.index_select(0, C.tensor([-1])),
    "2d_index": lambda C, x: x.index_select(1, C.tensor([[0]])),
    "float_index": lambda C, x: x.index_select(1, C.tensor([0.])),
}, (M,))
SOURCE = r(2, 4)
CASES.table("index_add", {
    "dim0": lambda C, x, s: x.index_add(0, C.tensor([2, 0]), s),
    "repeated_alpha": lambda C, x, s: C.T.index_add(x, 0, C.tensor([1, 1]), s, alpha=-2.0),
    "dim1": lambda C, x, s: x[:2].index_add(1, C.tensor([3, 0, 3]), s[:, :3]),
}, (M, SOURCE), grad=(0, 1))


def _index_add_inplace(C, x, s):
    y = x + 0
    y.index_add_(0, C.tensor([1, 2]), s, alpha=0.5)
    return y


CASES.case("index_add/inplace", (M, SOURCE), grad=(0, 1))(_index_add_inplace)
CASES.case("index_add/ints")(lambda C: C.tensor([1, 2, 3]).index_add_(0, C.tensor([0, 0]),
                                                                     C.tensor([10, 20])))
CASES.table("index_add/error", {
    "count": lambda C, x, s: x.index_add(0, C.tensor([0, 1, 2]), s),
    "slice_shape": lambda C, x, s: x.index_add(1, C.tensor([0, 1]), s),
    "dtype": lambda C, x, s: x.index_add(0, C.tensor([0, 1]), s.double()),
    "out_of_range": lambda C, x, s: x.index_add(0, C.tensor([0, 3]), s),
}, (M, SOURCE))

# -- masked_fill, masked_select -------------------------------------------------------------------
CASES.table("masked", {
    "fill_scalar": lambda C, x: x.masked_fill(x > 0, 0.0),
    "fill_neg_inf_then_softmax": lambda C, x: C.T.softmax(
        x.masked_fill(C.T.tril(C.T.ones(3, 4, device=C.dev)) == 0, float("-inf")), dim=-1),
    "fill_broadcast_row": lambda C, x: x.masked_fill(C.tensor([True, False, False, True]), -1.0),
    "fill_mask_widens": lambda C, x: x[0].masked_fill(C.tensor([[True], [False]]), 3.0),
    "fill_fn": lambda C, x: C.T.masked_fill(x, x < -0.5, 1.0),
    "select": lambda C, x: x.masked_select(x > 0),
    "select_broadcast": lambda C, x: C.T.masked_select(x, C.tensor([False, True, True, False])),
    "select_none": lambda C, x: x.masked_select(x > 100),
}, (M,), grad=(0,))


def _fill_inplace(C, x, v):
    y = x * 2
    y.masked_fill_(y < 0, v)
    return y


CASES.case("masked/fill_inplace_tensor_value", (M, np.array(0.5, f32)), grad=(0, 1))(_fill_inplace)
CASES.case("masked/fill_value_grad", (M, np.array(1.5, f32)), grad=(0, 1))(
    lambda C, x, v: x.masked_fill(x > 0, v))
CASES.table("masked/ints", {
    "fill_int_with_float": lambda C: C.tensor([1, 2, 3]).masked_fill(C.tensor([True, False, True]), 2.7),
    "fill_bool": lambda C: C.tensor([True, False]).masked_fill(C.tensor([False, True]), True),
    "select_int": lambda C: C.tensor([[1, 2], [3, 4]]).masked_select(C.tensor([[True], [False]])),
    "fill_0d": lambda C: C.tensor(3.0).masked_fill(C.tensor(True), 0.5),
})
CASES.table("masked/error", {
    "int_mask": lambda C, x: x.masked_fill(C.tensor([1, 0, 1, 0]), 0.0),
    "shape": lambda C, x: x.masked_fill(C.tensor([True, False]), 0.0),
    "value_1d": lambda C, x: x.masked_fill(x > 0, C.tensor([1.0])),
    "inplace_widens": lambda C, x: x[0].clone().masked_fill_(C.tensor([[True], [False]]), 3.0),
    "select_int_mask": lambda C, x: x.masked_select(C.tensor([1, 0, 1, 0])),
}, (M,))

# -- tril, triu, diagonal, diag, trace -------------------------------------------------------------
CASES.table("tri", {
    "tril": lambda C, x: x.tril(),
    "tril_up1": lambda C, x: C.T.tril(x, 1),
    "tril_down2": lambda C, x: x.tril(diagonal=-2),
    "triu": lambda C, x: x.triu(),
    "triu_fn_neg": lambda C, x: C.T.triu(x, -1),
    "triu_far": lambda C, x: x.triu(9),
}, (M,), grad=(0,))
CASES.table("tri/batched", {
    "tril": lambda C, x: x.tril(-1),
    "triu": lambda C, x: x.triu(2),
    "diagonal_dims": lambda C, x: x.diagonal(offset=1, dim1=1, dim2=2),
    "diagonal_neg_dims": lambda C, x: C.T.diagonal(x, -1, -1, 0),
}, (A3,), grad=(0,))
CASES.table("diag", {
    "diagonal": lambda C, x: x.diagonal(),
    "diagonal_offset": lambda C, x: x.diagonal(2),
    "diagonal_below": lambda C, x: x.diagonal(-1),
    "diagonal_off_the_end": lambda C, x: x.diagonal(5),
    "diag_of_matrix": lambda C, x: C.T.diag(x, 1),
    "diag_of_vector": lambda C, x: C.T.diag(x[0]),
    "diag_of_vector_offset": lambda C, x: x[1].diag(-2),
    "trace": lambda C, x: x.trace(),
    "trace_fn": lambda C, x: C.T.trace(x[:, :2]),
}, (M,), grad=(0,))
CASES.table("diag/ints", {
    "tril_int": lambda C: C.tensor([[1, 2], [3, 4]]).tril(),
    "triu_bool": lambda C: C.tensor([[True, True], [True, True]]).triu(1),
    "trace_int": lambda C: C.tensor([[1, 2], [3, 4]]).trace(),
    "trace_bool": lambda C: C.tensor([[True, False], [True, True]]).trace(),
    "diag_int_vector": lambda C: C.T.diag(C.tensor([1, 2]), 1),
    "diagonal_empty": lambda C: C.T.zeros(0, 3, device=C.dev).diagonal(),
})
CASES.table("diag/error", {
    "tril_1d": lambda C, x: x[0].tril(),
    "trace_1d": lambda C, x: x[0].trace(),
    "trace_3d": lambda C, x: x[None].trace(),
    "diag_3d": lambda C, x: x[None].diag(),
    "diagonal_same_dims": lambda C, x: x.diagonal(dim1=0, dim2=0),
    "diagonal_bad_dim": lambda C, x: x.diagonal(dim1=0, dim2=2),
}, (M,))

# -- cumsum, cumprod ------------------------------------------------------------------------------
CASES.table("cum", {
    "sum_dim1": lambda C, x: x.cumsum(1),
    "sum_dim0_fn": lambda C, x: C.T.cumsum(x, dim=0),
    "sum_negative_dim": lambda C, x: x.cumsum(-1),
    "prod_dim1": lambda C, x: x.cumprod(1),
    "prod_dim0_fn": lambda C, x: C.T.cumprod(x, 0),
    "sum_dtype": lambda C, x: x.cumsum(1, dtype=C.T.float64),
}, (M,), grad=(0,))
CASES.table("cum/zeros", {  # cumprod's gradient where the input has zeros (one or two per row)
    "prod": lambda C, x: x.cumprod(1),
    "prod_dim0": lambda C, x: x.cumprod(0),
    "prod_two_zeros": lambda C, x: C.T.cat([x[1:2], x[0:1] * x[1:2]]).cumprod(1),
}, (ZEROS_IN,), grad=(0,))
LONG = r(37)
CASES.table("cum/long", {  # more than one doubling step of the scan, uneven length
    "sum": lambda C, x: x.cumsum(0),
    "prod": lambda C, x: (x * 0.2 + 1).cumprod(0),
}, (LONG,), grad=(0,))
CASES.table("cum/edge", {
    "sum_int": lambda C: C.tensor([[1, 2, 3], [4, 5, 6]]).cumsum(1),
    "prod_int": lambda C: C.tensor([2, -3, 4, 0, 5]).cumprod(0),
    "sum_bool": lambda C: C.tensor([True, False, True]).cumsum(0),
    "prod_bool": lambda C: C.tensor([True, True, False]).cumprod(0),
    "sum_int_to_float": lambda C: C.tensor([1, 2]).cumsum(0, dtype=C.T.float32),
    "sum_0d": lambda C: C.tensor(2.5).cumsum(0),
    "prod_0d_neg_dim": lambda C: C.tensor(2.5).cumprod(-1),
    "sum_empty": lambda C: C.T.zeros(0, 3, device=C.dev).cumsum(0),
    "prod_empty_dim1": lambda C: C.T.zeros(2, 0, device=C.dev).cumprod(1),
})
CASES.table("inplace_more", {
    "tril_": lambda C, x: (x * 1).tril_(1),
    "triu_": lambda C, x: (x * 2).triu_(-1) + 1,
    "cumsum_": lambda C, x: (x + 0).cumsum_(1),
    "cumprod_": lambda C, x: (x * 1).cumprod_(0),
    "cumsum_int": lambda C, x: C.tensor([1, 2, 3]).cumsum_(0),
}, (M,), grad=(0,))

CASES.table("cum/error", {
    "dim_out_of_range": lambda C, x: x.cumsum(2),
    "prod_dim": lambda C, x: x.cumprod(-3),
    "0d_dim1": lambda C, x: x[0, 0].cumsum(1),
}, (M,))

# -- split, chunk, unbind, x[range] ---------------------------------------------------------------
CASES.table("split", {
    "int": lambda C, x: x.split(2),
    "int_dim1": lambda C, x: C.T.split(x, 3, dim=1),
    "sizes": lambda C, x: x.split([1, 3], dim=-1),
    "sizes_with_zero": lambda C, x: x.split([0, 2, 1]),
    "bigger_than_dim": lambda C, x: x.split(10),
    "qkv": lambda C, x: tuple(p * (i + 1) for i, p in enumerate(x.split(1, dim=1))),
    "chunk": lambda C, x: x.chunk(2),
    "chunk_uneven": lambda C, x: C.T.chunk(x, 3, dim=1),
    "chunk_more_than_size": lambda C, x: x.chunk(5, 0),
    "unbind": lambda C, x: x.unbind(),
    "unbind_dim": lambda C, x: C.T.unbind(x, dim=-1),
    "range_index": lambda C, x: x[range(2)],
    "range_step": lambda C, x: x[:, range(3, 0, -2)],
    "range_empty": lambda C, x: x[range(0)],
}, (M,), grad=(0,))
CASES.table("split/edge", {
    "empty_chunk": lambda C: C.T.zeros(0, device=C.dev).chunk(2),
    "empty_split": lambda C: C.T.zeros(0, 2, device=C.dev).split(2),
    "unbind_empty": lambda C: C.T.zeros(0, 2, device=C.dev).unbind(),
    "int_chunk": lambda C: C.tensor([1, 2, 3, 4, 5]).chunk(2),
})
CASES.table("split/error", {
    "sizes_sum": lambda C, x: x.split([1, 1]),
    "negative_size": lambda C, x: x.split(-1),
    "zero_size": lambda C, x: x.split(0),
    "negative_sizes": lambda C, x: x.split([4, -1]),
    "chunk_zero": lambda C, x: x.chunk(0),
    "unbind_0d": lambda C, x: x[0, 0].unbind(),
    "unbind_dim": lambda C, x: x.unbind(2),
    "range_out_of_bounds": lambda C, x: x[range(4)],
}, (M,))

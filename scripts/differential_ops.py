"""Differential cases, part 1: tensor operations (see ``differential_cases.py``).

Indexing, type promotion, 0-d and empty tensors, ties, extreme values, in-place
changes through views, forward values and gradients, and bad input.
"""
from __future__ import annotations

import numpy as np

from differential_cases import CPU_ONLY, CaseList, normal_arrays

f32, f64, i64 = np.float32, np.float64, np.int64
r = normal_arrays(1234)  # r(2, 3): a float32 array of normals


V = np.array([1., -2., 3., -4., 0., 2.5], f32)
M = np.arange(12, dtype=f32).reshape(3, 4) - 5.5
A3 = r(2, 3, 4)
TIES = np.array([[3., 1., 3.], [2., 2., 0.], [-1., -1., -1.]], f32)
EXTREME = np.array([0., -0., 1e-38, 1e38, -1e38, 88.7, -88.7, 1e-7], f32)
INTS = np.array([3, -1, 0, 7, -6], i64)
BOOLS = np.array([True, False, True, True, False])

CASES = CaseList()

# -- indexing: masks, repeated / negative / out-of-range indices, assignment -------------------
CASES.table("index/get", {
    "mask_1d": lambda C, x: x[x > 0],
    "mask_2d": lambda C, x: x[x > 0],
    "mask_rows": lambda C, x: x[C.tensor([True, False, True])],
    "mask_cols_after_slice": lambda C, x: x[:, C.tensor([True, False, False, True])],
    "mask_all_false": lambda C, x: x[x > 100],
    "repeated": lambda C, x: x[C.tensor([0, 0, 2, 0])],
    "negative": lambda C, x: x[C.tensor([-1, -3])],
    "two_arrays": lambda C, x: x[C.tensor([0, 2, 2]), C.tensor([3, -4, 1])],
    "array_slice": lambda C, x: x[C.tensor([2, 0]), 1:3],
    "slice_array": lambda C, x: x[1:, C.tensor([3, 3, 0])],
    "ellipsis_array": lambda C, x: x[..., C.tensor([1, -1])],
    "none_array": lambda C, x: x[None, C.tensor([1])],
    "list_index": lambda C, x: x[[2, 0, 2]],
    "list_of_bools": lambda C, x: x[[True, False, True]],
    "empty_list": lambda C, x: x[[]],
    "zero_d_index": lambda C, x: x[C.tensor(1)],
    "int_and_array": lambda C, x: x[1, C.tensor([0, 3])],
    "2d_index_array": lambda C, x: x[C.tensor([[0, 1], [2, 2]])],
    "step_slice": lambda C, x: x[::2, ::-1] if C.T.__name__ != "torch" else x[::2].flip(1),
    "true_index": lambda C, x: x[True],
}, (M,), grad=(0,))
CASES.table("index/error", {
    "out_of_range_list": lambda C, x: x[:2][:, [4]],
    "out_of_range_tensor": lambda C, x: x[C.tensor([3])],
    "negative_out_of_range": lambda C, x: x[C.tensor([-4])],
    "out_of_range_int": lambda C, x: x[5],
    "too_many": lambda C, x: x[0, 0, 0],
    "mask_shape": lambda C, x: x[C.tensor([True, False])],
    "float_index": lambda C, x: x[C.tensor([1.0])],
}, (M,))


def _assign(index_fn, value_fn):
    def run(C, x):
        y = x.clone()
        y[index_fn(C, y)] = value_fn(C)
        return y
    return run


CASES.table("index/set", {
    "mask_scalar": _assign(lambda C, y: y < 0, lambda C: 0.0),
    "mask_tensor": _assign(lambda C, y: y > 3, lambda C: C.tensor([10., 20., 30.])),
    "rows_mask": _assign(lambda C, y: C.tensor([True, False, True]), lambda C: C.tensor([1., 2., 3., 4.])),
    "int_array": _assign(lambda C, y: C.tensor([2, 0]), lambda C: -1.0),
    "negative_array": _assign(lambda C, y: (slice(None), C.tensor([-1, 1])), lambda C: C.tensor([7., 8.])),
    "two_arrays": _assign(lambda C, y: (C.tensor([0, 2]), C.tensor([1, 3])), lambda C: C.tensor([5., 6.])),
    "slice_broadcast": _assign(lambda C, y: (slice(1, None), slice(None, 2)), lambda C: C.tensor([9., 8.])),
    "int_row": _assign(lambda C, y: 1, lambda C: 4.5),
    "out_of_range": _assign(lambda C, y: C.tensor([3]), lambda C: 1.0),
    "bad_value_shape": _assign(lambda C, y: C.tensor([0, 1]), lambda C: C.tensor([1., 2., 3.])),
}, (M,))

# -- type promotion ----------------------------------------------------------------------------
CASES.table("promote", {
    "int_plus_float_scalar": lambda C: C.tensor([1, 2]) + 2.5,
    "int_times_int_scalar": lambda C: C.tensor([1, 2]) * 3,
    "bool_plus_int_scalar": lambda C: C.tensor([True, False]) + 1,
    "bool_times_bool": lambda C: C.tensor([True, False]) * C.tensor([True, True]),
    "int_div_int": lambda C: C.tensor([3, 4]) / C.tensor([2, 8]),
    "int_plus_float_tensor": lambda C: C.tensor([1, 2]) + C.tensor([0.5, 0.25]),
    "f32_plus_f64": lambda C: C.tensor([1.], dtype=C.T.float32) + C.tensor([1.], dtype=C.T.float64),
    "f32_vec_plus_f64_0d": lambda C: C.tensor([1., 2.]) + C.tensor(1.5, dtype=C.T.float64),
    "int_vec_plus_f64_0d": lambda C: C.tensor([1, 2]) + C.tensor(1.5, dtype=C.T.float64),
    "int_vec_plus_f32_0d": lambda C: C.tensor([1, 2]) * C.tensor(0.5),
    "bool_vec_plus_int_0d": lambda C: C.tensor([True, False]) + C.tensor(3),
    "int_vec_plus_bool_0d": lambda C: C.tensor([1, 2]) + C.tensor(True),
    "f64_0d_plus_f32_0d": lambda C: C.tensor(1., dtype=C.T.float64) + C.tensor(2.),
    "int_0d_plus_float_scalar": lambda C: C.tensor(2) * 1.5,
    "f32_vec_times_f64_vec1": lambda C: C.tensor([1., 2.]) * C.tensor([3.], dtype=C.T.float64),
    "compare_int_float": lambda C: C.tensor([1, 2, 3]) < C.tensor([1.5, 1.5, 3.5]),
    "compare_with_scalar": lambda C: C.tensor([1, 2, 3]) >= 2.0,
    "where_mixed": lambda C: C.T.where(C.tensor([True, False]), C.tensor([1, 2]), C.tensor([0.5, 0.5])),
    "where_scalar": lambda C: C.T.where(C.tensor([True, False]), C.tensor([1., 2.]), 0.0),
    "maximum_mixed": lambda C: C.T.maximum(C.tensor([1, 5]), C.tensor([2.5, 2.5])),
    "clamp_int_float_bound": lambda C: C.tensor([1, 2, 3]).clamp(min=1.5),
    "clamp_int_int_bound": lambda C: C.tensor([1, 2, 3]).clamp(2, 2),
    "pow_int_float": lambda C: C.tensor([1, 2, 3]) ** 0.5,
    "pow_int_int": lambda C: C.tensor([1, 2, 3]) ** 2,
    "sum_bool": lambda C: C.tensor([True, True, False]).sum(),
    "sum_int": lambda C: C.tensor([[1, 2], [3, 4]]).sum(0),
    "neg_int": lambda C: -C.tensor([1, -2]),
    "abs_int": lambda C: C.tensor([1, -2]).abs(),
    "exp_int": lambda C: C.tensor([0, 1]).exp(),
    "matmul_int": lambda C: C.tensor([[1, 2]]) @ C.tensor([[3], [4]]),
    "cat_mixed": lambda C: C.T.cat([C.tensor([1, 2]), C.tensor([0.5])]),
    "float_into_int_inplace": lambda C: C.tensor([1, 2]).add_(0.5),
    "int_into_float_inplace": lambda C: C.tensor([1., 2.]).add_(C.tensor([1, 1])),
    "mean_int": lambda C: C.tensor([1, 2]).mean(),
    "bool_add_true_inplace": lambda C: C.tensor([True, False]).add_(True),
    "bool_times_false": lambda C: C.tensor([True, False]) * False,
    "bool_sign": lambda C: C.tensor([True, False]).sign(),
    "bool_neg_error": lambda C: -C.tensor([True, False]),
})

# -- 0-d and empty tensors ---------------------------------------------------------------------
CASES.table("zero_d", {
    "sum": lambda C, x: x.sum(),
    "mean": lambda C, x: x.mean(),
    "max": lambda C, x: x.max(),
    "max_dim0": lambda C, x: x.max(0),
    "argmax": lambda C, x: x.argmax(),
    "exp": lambda C, x: x.exp(),
    "reshape": lambda C, x: x.reshape(1, 1),
    "unsqueeze": lambda C, x: x.unsqueeze(0),
    "mul_vector": lambda C, x: x * C.tensor([1., 2.]),
    "item_index": lambda C, x: x[None],
    "softmax": lambda C, x: x.softmax(0),
    "stack": lambda C, x: C.T.stack([x, x * 2]),
    "cat_error": lambda C, x: C.T.cat([x, x]),
    "len_error": lambda C, x: len(x),
}, (np.array(1.5, f32),), grad=(0,))
CASES.table("empty", {
    "sum": lambda C, x: x.sum(),
    "sum_dim0": lambda C, x: x.sum(0),
    "sum_dim1": lambda C, x: x.sum(1),
    "mean": lambda C, x: x.mean(),
    "max_dim1": lambda C, x: x.max(1),
    "argmax_dim1": lambda C, x: x.argmax(1),
    "amax_dim1": lambda C, x: x.amax(1),
    "max_error": lambda C, x: x.max(),
    "max_dim0_error": lambda C, x: x.max(0),
    "argmax_error": lambda C, x: x.argmax(),
    "matmul": lambda C, x: x @ C.tensor(np.ones((3, 2), np.float32)),
    "matmul_inner_empty": lambda C, x: x.t() @ x,
    "cat": lambda C, x: C.T.cat([x, C.tensor(np.ones((1, 3), np.float32))]),
    "reshape": lambda C, x: x.reshape(3, 0),
    "exp": lambda C, x: x.exp(),
    "softmax": lambda C, x: x.softmax(1),
    "mask": lambda C, x: x[x > 0],
    "inplace_add": lambda C, x: x.clone().add_(1.0),
    "setitem": lambda C, x: _assign(lambda C, y: y > 0, lambda C: 1.0)(C, x),
    "copy_": lambda C, x: C.T.zeros(0, 3, device=C.dev).copy_(x),
}, (np.zeros((0, 3), f32),), grad=(0,))

# -- ties --------------------------------------------------------------------------------------
CASES.table("ties", {
    "max": lambda C, x: x.max(),
    "min": lambda C, x: x.min(),
    "max_dim1": lambda C, x: x.max(1),
    "min_dim0": lambda C, x: x.min(0),
    "max_dim1_keepdim": lambda C, x: x.max(1, keepdim=True),
    "argmax": lambda C, x: x.argmax(),
    "argmax_dim1": lambda C, x: x.argmax(1),
    "argmin_dim0": lambda C, x: x.argmin(0),
    "amax_dim1": lambda C, x: x.amax(1),
    "amin_dims": lambda C, x: x.amin((0, 1)),
    "maximum_reversed": lambda C, x: C.T.maximum(x, x[:, [2, 1, 0]]),
    "maximum_scalar_tie": lambda C, x: C.T.maximum(x, C.tensor(2.)),
    "relu_at_zero": lambda C, x: (x - 2).relu(),
    "abs_at_zero": lambda C, x: (x - 2).abs(),
    "clamp_at_bound": lambda C, x: x.clamp(min=2., max=3.),
    "sort_free_median": lambda C, x: (x.max(1).values + x.min(1).values) / 2,
}, (TIES,), grad=(0,))

# -- extreme values ----------------------------------------------------------------------------
CASES.table("extreme", {
    "exp": lambda C, x: x.exp(),
    "log_abs": lambda C, x: x.abs().log(),
    "sqrt_abs": lambda C, x: x.abs().sqrt(),
    "sigmoid": lambda C, x: x.sigmoid(),
    "tanh": lambda C, x: x.tanh(),
    "softmax": lambda C, x: x.softmax(0),
    "log_softmax": lambda C, x: x.log_softmax(0),
    "square": lambda C, x: x * x,
    "reciprocal": lambda C, x: 1 / x,
    "div_by_self": lambda C, x: x / x,
    "relu": lambda C, x: x.relu(),
    "sum": lambda C, x: x.sum(),
    "mean": lambda C, x: x.mean(),
    "max": lambda C, x: x.max(),
    "pow_half": lambda C, x: x.abs() ** 0.5,
    "clamp": lambda C, x: x.clamp(-1e30, 1e30),
}, (EXTREME,), grad=(0,))
CASES.table("nan", {
    "max_with_nan": lambda C, x: x.max(),
    "max_dim_with_nan": lambda C, x: x.reshape(2, 2).max(1),
    "argmax_with_nan": lambda C, x: x.argmax(),
    "maximum_with_nan": lambda C, x: C.T.maximum(x, C.tensor([0., 0., 0., 0.])),
    "sum_with_nan": lambda C, x: x.sum(),
    "relu_nan": lambda C, x: x.relu(),
    "eq_nan": lambda C, x: x == x,
}, (np.array([1., float("nan"), 3., -1.], f32),))
CASES.table("pow_edges", {
    "zero_base_tensor_exp": lambda C, a, e: a ** e,
    "zero_base_scalar": lambda C, a, e: 0.0 ** e,
    "negative_scalar_base": lambda C, a, e: (-2.0) ** e,
    "tensor_zero_exp": lambda C, a, e: a ** 0,
    "div_tiny": lambda C, a, e: (a + 1e-30) / (e * 0 + 1e-23),
}, (np.zeros(3, f32), np.array([2., 0., -1.], f32)), grad=(0, 1))

# -- in-place through views --------------------------------------------------------------------


def _inplace(steps):
    def run(C, x):
        y = x.clone()
        steps(C, y)
        return y
    return run


CASES.table("inplace_view", {
    "slice_add": _inplace(lambda C, y: y[1:].add_(1.0)),
    "row_fill": _inplace(lambda C, y: y[0].fill_(3.0)),
    "column_mul": _inplace(lambda C, y: y[:, 1].mul_(-2.0)),
    "transpose_sub": _inplace(lambda C, y: y.t().sub_(C.tensor([1., 2., 3.]))),
    "view_setitem": _inplace(lambda C, y: y.view(-1).__setitem__(5, 100.0)),
    "reshape_view_div": _inplace(lambda C, y: y.reshape(4, 3).div_(2.0)),
    "chain": _inplace(lambda C, y: y[1:, 1:][0].add_(10.0)),
    "step_slice": _inplace(lambda C, y: y[::2].mul_(0.0)),
    "iadd_view": _inplace(lambda C, y: y[:, :2].__iadd__(C.tensor([1., 2.]))),
    "zero_": _inplace(lambda C, y: y[2].zero_()),
    "clamp_": _inplace(lambda C, y: y[:2].clamp_(-1.0, 1.0)),
    "copy_broadcast": _inplace(lambda C, y: y[1].copy_(C.tensor([7.]))),
    "copy_int_source": _inplace(lambda C, y: y[0].copy_(C.tensor([1, 2, 3, 4]))),
    "expanded_error": _inplace(lambda C, y: y[:1].expand(3, 4).add_(1.0)),
    "view_non_contiguous_error": _inplace(lambda C, y: y.t().view(12)),
    "view_compatible": _inplace(lambda C, y: y[:, :2].view(3, 2, 1).mul_(3.0)),
}, (M,))


@CASES.case("inplace_view/saved_then_modified_error", (V,), grad=(0,))
def _saved_then_modified(C, x):
    y = x * 1.0
    z = y.exp()
    y.add_(1.0)
    return z * y


@CASES.case("inplace_view/leaf_error", (V,), grad=(0,))
def _leaf_inplace(C, x):
    return x.add_(1.0)


# -- forward values and gradients ---------------------------------------------------------------
X, Y = r(3, 4), r(3, 4)
CASES.table("binary", {
    "add": lambda C, a, b: a + b, "sub": lambda C, a, b: a - b, "mul": lambda C, a, b: a * b,
    "div": lambda C, a, b: a / b, "pow_abs": lambda C, a, b: a.abs() ** b,
    "maximum": lambda C, a, b: C.T.maximum(a, b), "minimum": lambda C, a, b: C.T.minimum(a, b),
    "add_alpha": lambda C, a, b: C.T.add(a, b, alpha=-2.5), "sub_alpha": lambda C, a, b: C.T.sub(a, b, alpha=3),
    "broadcast_row": lambda C, a, b: a * b[0], "broadcast_col": lambda C, a, b: a + b[:, :1],
    "where": lambda C, a, b: C.T.where(a > b, a, b),
    "clamp_tensor_bounds": lambda C, a, b: a.clamp(min=b, max=b + 0.5),
    "clamp_min_tensor": lambda C, a, b: a.clamp(min=b),
    "matmul": lambda C, a, b: a @ b.t(),
}, (X, Y), grad=(0, 1))
CASES.table("unary", {
    "exp": lambda C, x: x.exp(), "log_abs": lambda C, x: x.abs().log(), "sqrt_abs": lambda C, x: x.abs().sqrt(),
    "sin": lambda C, x: x.sin(), "cos": lambda C, x: x.cos(), "tanh": lambda C, x: x.tanh(),
    "sigmoid": lambda C, x: x.sigmoid(), "relu": lambda C, x: x.relu(), "neg": lambda C, x: -x,
    "abs": lambda C, x: x.abs(), "sign": lambda C, x: x.sign(), "square": lambda C, x: x ** 2,
    "cube": lambda C, x: x ** 3, "rsub": lambda C, x: 1 - x, "rdiv": lambda C, x: 2 / (x.abs() + 1),
    "rpow": lambda C, x: 2 ** x, "clamp": lambda C, x: x.clamp(-0.5, 0.5),
    "clamp_min": lambda C, x: x.clamp(min=0.1), "clamp_inverted": lambda C, x: x.clamp(1.0, -1.0),
}, (r(2, 5),), grad=(0,))
CASES.table("reduce", {
    "sum": lambda C, x: x.sum(), "sum_dim": lambda C, x: x.sum(1), "sum_dims": lambda C, x: x.sum((0, 2)),
    "sum_keepdim": lambda C, x: x.sum(-1, keepdim=True), "mean": lambda C, x: x.mean(),
    "mean_dim": lambda C, x: x.mean(0), "max": lambda C, x: x.max(), "max_dim": lambda C, x: x.max(2),
    "min_dim_keep": lambda C, x: x.min(1, keepdim=True), "amax": lambda C, x: x.amax((1, 2)),
    "argmax_dim": lambda C, x: x.argmax(1), "argmin": lambda C, x: x.argmin(),
    "softmax": lambda C, x: x.softmax(-1), "log_softmax": lambda C, x: x.log_softmax(1),
    "any": lambda C, x: (x > 1).any(), "all": lambda C, x: (x > -3).all(),
    "dim_error": lambda C, x: x.sum(3), "dim_float_error": lambda C, x: x.sum(1.5),
}, (A3,), grad=(0,))
CASES.table("shape", {
    "reshape": lambda C, x: x.reshape(4, -1), "view": lambda C, x: x.view(2, 12),
    "permute": lambda C, x: x.permute(2, 0, 1), "transpose": lambda C, x: x.transpose(0, 2),
    "mT": lambda C, x: x.mT, "flatten": lambda C, x: x.flatten(1), "unsqueeze": lambda C, x: x.unsqueeze(-1),
    "squeeze": lambda C, x: x[:1].squeeze(0), "expand": lambda C, x: x[:, :1].expand(2, 5, 4),
    "cat": lambda C, x: C.T.cat([x, x * 2], 1), "stack": lambda C, x: C.T.stack([x, -x], -1),
    "contiguous_after_t": lambda C, x: x.transpose(1, 2).contiguous().view(-1),
    "reshape_error": lambda C, x: x.reshape(5, 5), "reshape_two_inferred": lambda C, x: x.reshape(-1, -1),
    "reshape_negative": lambda C, x: x.reshape(-2, 12), "permute_error": lambda C, x: x.permute(0, 1),
    "expand_error": lambda C, x: x.expand(3, 3, 4), "squeeze_dim_error": lambda C, x: x.squeeze(3),
    "cat_shape_error": lambda C, x: C.T.cat([x, x[:, :2]], 2),
    "repeat": lambda C, x: x.repeat(2, 1, 3), "repeat_more_dims": lambda C, x: x[0].repeat(2, 1, 2),
    "repeat_zero": lambda C, x: x.repeat(1, 0, 1), "repeat_as_tg": lambda C, x: x[:, 0].repeat(3, 2),
    "repeat_too_few": lambda C, x: x.repeat(2, 2), "repeat_negative": lambda C, x: x.repeat(1, -1, 1),
}, (A3,), grad=(0,))
CASES.table("logical", {
    "and": lambda C, x, y: (x > 0) & (y > 0), "or": lambda C, x, y: (x > 0) | (y[0] > 0),
    "xor": lambda C, x, y: (x > 0) ^ (y > 0), "invert": lambda C, x, y: ~(x > 0),
    "and_python_bool": lambda C, x, y: (x > 0) & True, "ror_python_bool": lambda C, x, y: False | (x > 0),
    "logical_and_floats": lambda C, x, y: C.T.logical_and(x, y), "logical_or_method": lambda C, x, y: x.logical_or(y * 0),
    "logical_xor_ints": lambda C, x, y: C.T.logical_xor(x.long(), y.long()),
    "logical_not": lambda C, x, y: C.T.logical_not(x), "logical_not_method": lambda C, x, y: (x > 0).logical_not(),
}, (np.array([[1., 0., -2.], [0.5, 0., 3.]], f32), np.array([[0., 0., 1.], [-1., 2., 0.]], f32)))
CASES.table("finite", {
    "isnan": lambda C, x: C.T.isnan(x), "isinf": lambda C, x: x.isinf(),
    "isfinite": lambda C, x: C.T.isfinite(x), "isfinite_int": lambda C, x: C.T.isfinite(C.tensor([1, -2, 3])),
    "isinf_bool": lambda C, x: C.T.isinf(x > 0), "isnan_method": lambda C, x: (x * 0).isnan(),
}, (np.array([1., np.nan, np.inf, -np.inf, 0., -0., 3e38], f32),))
CASES.table("matmul", {
    "batched_broadcast": lambda C, a, b: a @ b[0],
    "vector_matrix": lambda C, a, b: a[0, 0] @ b[0],
    "matrix_vector": lambda C, a, b: b[0].t() @ a[0, 0],
    "batch_times_batch": lambda C, a, b: a @ b,
    "shape_error": lambda C, a, b: a @ a,
    "dtype_error": lambda C, a, b: a @ b.double(),
}, (r(2, 3, 4), r(2, 4, 5)), grad=(0, 1))
CASES.table("errors", {
    "broadcast": lambda C: C.tensor([1., 2.]) + C.tensor([1., 2., 3.]),
    "backward_non_scalar": lambda C: C.tensor([1., 2.], requires_grad=True).exp().backward(),
    "requires_grad_int": lambda C: C.tensor([1, 2], requires_grad=True),
    "arange_direction": lambda C: C.T.arange(5, 0),
    "arange_zero_step": lambda C: C.T.arange(0, 5, 0),
    "clamp_no_bounds": lambda C: C.tensor([1.]).clamp(),
    "float_into_int_inplace": lambda C: C.tensor([1, 2]).mul_(C.tensor([0.5, 0.5])),
    "int_negative_power": lambda C: C.tensor([2, 3]) ** -1,
    "tensor_from_string": lambda C: C.tensor("abc"),
    "ragged": lambda C: C.tensor([[1, 2], [3]]),
    "huge_int": lambda C: C.tensor([1, 2**70]),
    "none_in_data": lambda C: C.tensor([1.0, None]),
    "item_many": lambda C: C.tensor([1., 2.]).item(),
    "bool_many": lambda C: bool(C.tensor([1., 2.])),
    "numpy_requires_grad": lambda C: C.tensor([1.], requires_grad=True).numpy(),
    "negative_size": lambda C: C.T.zeros(-1),
    "cat_empty_list": lambda C: C.T.cat([]),
    "eq_none": lambda C: C.tensor([1., 2.]) == None,  # noqa: E711
    "zeros_from_tensor_size": lambda C: C.T.zeros(C.T.tensor(3)),
    "retain_grad_no_grad": lambda C: C.tensor([1.]).retain_grad(),
    "where_float_condition": lambda C: C.T.where(C.tensor([1., 0.]), C.tensor([1., 2.]), 0.0),
    "index_with_string": lambda C: C.tensor([1., 2.])["a"],
    "index_with_float": lambda C: C.tensor([1., 2.])[1.5],
    "float_of_vector": lambda C: float(C.tensor([1., 2.])),
    "int_of_vector": lambda C: int(C.tensor([1, 2])),
    "full_with_string": lambda C: C.T.full((2,), "a"),
    "eye_negative": lambda C: C.T.eye(-1),
    "linspace_negative_steps": lambda C: C.T.linspace(0, 1, -1),
    "cross_entropy_float_target": lambda C: C.F.cross_entropy(C.tensor([[1., 2.]]), C.tensor([0.])),
    "cross_entropy_target_shape": lambda C: C.F.cross_entropy(C.tensor([[1., 2.]]), C.tensor([[0]])),
    "transpose_out_of_range": lambda C: C.tensor([[1., 2.]]).transpose(0, 3),
    "flatten_reversed_dims": lambda C: C.tensor([[1., 2.]]).flatten(1, 0),
    "t_of_3d": lambda C: C.T.zeros(1, 2, 3).t(),
    "stack_shapes": lambda C: C.T.stack([C.tensor([1., 2.]), C.tensor([1.])]),
    "randint_empty_range": lambda C: C.T.randint(5, 2, (3,)),
    "mean_int_dim": lambda C: C.tensor([[1, 2]]).mean(0),
}, devices=CPU_ONLY + ("cuda",))


def _assign_in_graph(index_fn, value_fn):
    """Assignment into a tensor autograd is recording (PyTorch's index_put backward)."""
    def run(C, x, v):
        y = x * 2
        y[index_fn(C, y)] = value_fn(C, v)
        return y * y
    return run


CASES.table("index/set_grad", {
    "mask_scalar": _assign_in_graph(lambda C, y: y > 0, lambda C, v: 0.5),
    "row_from_value": _assign_in_graph(lambda C, y: 1, lambda C, v: v * 3),
    "columns_broadcast": _assign_in_graph(lambda C, y: (slice(None), C.tensor([0, 2])), lambda C, v: v[1]),
    "mask_from_value": _assign_in_graph(lambda C, y: y < -4, lambda C, v: v[:2] - 1),
    "slice_from_value": _assign_in_graph(lambda C, y: (slice(1, None), slice(None, None, 2)),
                                         lambda C, v: v[:2]),
    "into_leaf_error": lambda C, x, v: x.__setitem__(0, 1.0),
}, (M, np.array([1., 2., 3., 4.], f32)), grad=(0, 1))


@CASES.case("index/set_grad/into_plain_tensor", (M, np.array([1., 2., 3., 4.], f32)), grad=(1,))
def _into_plain(C, x, v):
    z = C.T.zeros(3, 4, device=C.dev)
    z[0] = v * 2
    return z * z + x


def _in_graph(steps):
    """In-place changes of a tensor autograd records (PyTorch rebases it in the graph)."""
    def run(C, x, v):
        y = x * 2
        steps(C, y, v)
        return y * y
    return run


CASES.table("inplace_graph", {
    "add_tensor": _in_graph(lambda C, y, v: y.add_(v)),
    "mul_then_div": _in_graph(lambda C, y, v: y.mul_(v).div_(3.0)),
    "sub_alpha": _in_graph(lambda C, y, v: y.sub_(v, alpha=2)),
    "iadd_scalar": _in_graph(lambda C, y, v: y.__iadd__(1.5)),
    "clamp_": _in_graph(lambda C, y, v: y.clamp_(-2.0, 3.0)),
    "copy_from_value": _in_graph(lambda C, y, v: y.copy_(v * 4)),
    "fill_": _in_graph(lambda C, y, v: y.fill_(0.25)),
    "zero_then_add": _in_graph(lambda C, y, v: y.zero_().add_(v)),
}, (M, np.array([1., 2., 3., 4.], f32)), grad=(0, 1))


@CASES.case("inplace_graph/plain_joins_graph", (M, np.array([1., 2., 3., 4.], f32)), grad=(1,))
def _plain_joins(C, x, v):
    t = C.T.zeros(3, 4, device=C.dev)
    t += v
    t.mul_(v)
    return t.sum(0)

"""Differential cases, part 3: statistics, norms, einsum, counting, comparing, sampling's
errors, format specs and inference mode (see ``differential_cases.py``).

Random draws are not compared here (teachgrad's generator is not PyTorch's): their
distributions are tested statistically in ``tests/engine/test_ops_math.py``. What
sampling functions refuse is deterministic, and is compared.
"""
from __future__ import annotations

import math

import numpy as np

from differential_cases import CPU_ONLY, CaseList, normal_arrays

f32, f64, i64 = np.float32, np.float64, np.int64
r = normal_arrays(2213)  # r(2, 3): a float32 array of normals


X = r(3, 4)
A3 = r(2, 3, 4)
TIES = np.array([[3., -3., 1.], [2., 2., 0.], [0., 0., 0.]], f32)
INF = np.array([[-np.inf, -np.inf, -np.inf], [np.inf, 1., 0.], [0., -np.inf, 2.], [np.nan, 1., 0.]], f32)
INTS = np.array([3, 1, 2, 3, 1, 1, 0, 5], i64)

CASES = CaseList()

# -- var, std, logsumexp -----------------------------------------------------------------------
CASES.table("math/stats", {
    "var": lambda C, x: x.var(),
    "var_dim": lambda C, x: x.var(1),
    "var_dims_keepdim": lambda C, x: x.var((0, 2), keepdim=True),
    "var_unbiased_false": lambda C, x: x.var(1, unbiased=False),
    "var_correction0": lambda C, x: C.T.var(x, dim=-1, correction=0),
    "var_correction2": lambda C, x: x.var(dim=2, correction=2),
    "var_bool_positional": lambda C, x: C.T.var(x, False),
    "std": lambda C, x: x.std(),
    "std_dim": lambda C, x: x.std(0),
    "std_keepdim": lambda C, x: C.T.std(x, dim=(1, 2), keepdim=True),
    "std_unbiased_false": lambda C, x: x.std(-1, False),
    "std_correction0": lambda C, x: x.std(dim=1, correction=0),
    "std_of_constant": lambda C, x: (x * 0 + 2).std(1),
    "std_of_constant_leaf": lambda C, x: x[:, :1].expand(2, 3, 4).std(2),
    "logsumexp": lambda C, x: x.logsumexp(1),
    "logsumexp_dims": lambda C, x: C.T.logsumexp(x, (0, 2)),
    "logsumexp_keepdim": lambda C, x: x.logsumexp(-1, keepdim=True),
    "logsumexp_large": lambda C, x: (x * 1000).logsumexp(2),
    "var_dim_error": lambda C, x: x.var(3),
}, (A3,), grad=(0,))
CASES.table("math/stats_edges", {
    "logsumexp_inf": lambda C, x: x.logsumexp(1),
    "logsumexp_inf_dim0": lambda C, x: x.logsumexp(0),
    "var_with_inf": lambda C, x: x[1:3].var(1),
}, (INF,))
CASES.table("math/stats_errors", {
    "var_int": lambda C: C.tensor([1, 2, 3]).var(),
    "std_int": lambda C: C.T.std(C.tensor([1, 2, 3])),
    "logsumexp_int": lambda C: C.tensor([1, 2, 3]).logsumexp(0),
    "logsumexp_bool": lambda C: C.tensor([True, False]).logsumexp(0),
    "var_one_element": lambda C: C.tensor([2.5]).var(),
    "std_0d": lambda C: C.tensor(2.5).std(correction=0),
    "logsumexp_empty": lambda C: C.T.zeros(0, 3, device=C.dev).logsumexp(0),
    "logsumexp_empty_keepdim": lambda C: C.T.zeros(2, 0, device=C.dev).logsumexp(1, keepdim=True),
    "var_empty": lambda C: C.T.zeros(0, device=C.dev).var(),
})

# -- norms -------------------------------------------------------------------------------------
CASES.table("math/norm", {
    "default": lambda C, x: x.norm(),
    "p1": lambda C, x: x.norm(1),
    "p_inf": lambda C, x: x.norm(float("inf")),
    "p_neg_inf_dim": lambda C, x: x.norm(float("-inf"), dim=1),
    "p0_dim": lambda C, x: x.norm(0, dim=0),
    "p3_dim": lambda C, x: C.T.norm(x, 3, dim=1),
    "p_half": lambda C, x: x.norm(0.5, dim=1),
    "p_one_and_half": lambda C, x: x.norm(1.5),
    "dim_keepdim": lambda C, x: x.norm(dim=1, keepdim=True),
    "fro_dims": lambda C, x: x.norm("fro", dim=(0, 1)),
    "p2_dim_tuple": lambda C, x: C.T.norm(x, p=2, dim=(0, 1)),
    "vector_norm": lambda C, x: C.T.linalg.vector_norm(x),
    "vector_norm_ord1_dim": lambda C, x: C.T.linalg.vector_norm(x, 1, dim=-1),
    "vector_norm_inf_keepdim": lambda C, x: C.T.linalg.vector_norm(x, float("inf"), 0, True),
    "vector_norm_dtype": lambda C, x: C.T.linalg.vector_norm(x, dtype=C.T.float64),
    "matrix_norm_fro": lambda C, x: C.T.linalg.matrix_norm(x),
    "matrix_norm_1": lambda C, x: C.T.linalg.matrix_norm(x, 1),
    "matrix_norm_neg1": lambda C, x: C.T.linalg.matrix_norm(x, -1),
    "matrix_norm_inf": lambda C, x: C.T.linalg.matrix_norm(x, float("inf")),
    "matrix_norm_neg_inf_keepdim": lambda C, x: C.T.linalg.matrix_norm(x, -math.inf, keepdim=True),
    "matrix_norm_dims_reversed": lambda C, x: C.T.linalg.matrix_norm(x, 1, dim=(1, 0)),
    "linalg_norm": lambda C, x: C.T.linalg.norm(x),
    "linalg_norm_ord_inf_2d": lambda C, x: C.T.linalg.norm(x, float("inf")),
    "linalg_norm_dim": lambda C, x: C.T.linalg.norm(x, 3, dim=0),
    "matrix_norm_1d_error": lambda C, x: C.T.linalg.matrix_norm(x[0]),
    "matrix_norm_ord_error": lambda C, x: C.T.linalg.matrix_norm(x, 3),
    "vector_norm_empty_inf_error": lambda C, x: C.T.linalg.vector_norm(x[:0], float("inf")),
    "vector_norm_int_error": lambda C, x: C.T.linalg.vector_norm(x.long()),
    "norm_dim_error": lambda C, x: x.norm(dim=2),
}, (X,), grad=(0,))
CASES.table("math/norm_batched", {
    "matrix_norm_fro": lambda C, x: C.T.linalg.matrix_norm(x),
    "matrix_norm_inf": lambda C, x: C.T.linalg.matrix_norm(x, float("inf")),
    "matrix_norm_1_dims": lambda C, x: C.T.linalg.matrix_norm(x, 1, dim=(0, 2)),
    "vector_norm_dims": lambda C, x: C.T.linalg.vector_norm(x, 3, dim=(0, 2)),
}, (A3,), grad=(0,))
CASES.table("math/norm_at_zero", {
    "p2": lambda C, x: (x * 0).norm(),
    "p2_dim": lambda C, x: (x * 0).norm(dim=1),
    "p1": lambda C, x: (x * 0).norm(1),
    "p3": lambda C, x: (x * 0).norm(3),
    "p_half": lambda C, x: (x * 0).norm(0.5),
    "inf_ties": lambda C, x: x.norm(float("inf"), dim=1),
    "inf_all": lambda C, x: x.norm(float("inf")),
    "neg_inf_ties": lambda C, x: x.norm(float("-inf"), dim=0),
    "p2_row_of_zeros": lambda C, x: x.norm(dim=1),
}, (TIES,), grad=(0,))

# -- cdist -------------------------------------------------------------------------------------
CASES.table("math/cdist", {
    "p2": lambda C, a, b: C.T.cdist(a, b),
    "p1": lambda C, a, b: C.T.cdist(a, b, p=1),
    "p_inf": lambda C, a, b: C.T.cdist(a, b, p=float("inf")),
    "p3": lambda C, a, b: C.T.cdist(a, b, 3.0),
    "p0": lambda C, a, b: C.T.cdist(a, b, 0),
    "same_rows": lambda C, a, b: C.T.cdist(a, a),
    "same_rows_p1": lambda C, a, b: C.T.cdist(a, a, 1),
    "batched": lambda C, a, b: C.T.cdist(a.reshape(1, 3, 4), b.reshape(1, 5, 4)),
    "batch_broadcast": lambda C, a, b: C.T.cdist(a.reshape(1, 3, 4), C.T.stack([b, b * 2])),
    "one_d_error": lambda C, a, b: C.T.cdist(a[0], b),
    "columns_error": lambda C, a, b: C.T.cdist(a, b[:, :3]),
    "negative_p_error": lambda C, a, b: C.T.cdist(a, b, -1),
    "int_error": lambda C, a, b: C.T.cdist(a.long(), b.long()),
    "compute_mode": lambda C, a, b: C.T.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist"),
    "compute_mode_error": lambda C, a, b: C.T.cdist(a, b, compute_mode="fast"),
}, (X, r(5, 4)), grad=(0, 1))

# -- einsum ------------------------------------------------------------------------------------
E2 = (r(2, 3), r(3, 4))
CASES.table("math/einsum2", {
    "matmul": lambda C, a, b: C.T.einsum("ij,jk->ik", a, b),
    "matmul_implicit": lambda C, a, b: C.T.einsum("ij,jk", a, b),
    "matmul_list": lambda C, a, b: C.T.einsum("ij,jk->ik", [a, b]),
    "spaces": lambda C, a, b: C.T.einsum("i j , j k -> k i", a, b),
    "outer": lambda C, a, b: C.T.einsum("i,j->ij", a[0], b[0]),
    "dot": lambda C, a, b: C.T.einsum("i,i", a[0], b[:, 0]),
    "sum_all": lambda C, a, b: C.T.einsum("ij,jk->", a, b),
    "keep_left": lambda C, a, b: C.T.einsum("ij,jk->ij", a, b),
    "hadamard": lambda C, a, b: C.T.einsum("ij,ij->ij", a, b[:2, :3]),
    "implicit_sorted": lambda C, a, b: C.T.einsum("ba,ac", a.t(), a),
    "broadcast_size1": lambda C, a, b: C.T.einsum("ij,ij->i", a, b[:1, :3]),
    "three_operands": lambda C, a, b: C.T.einsum("ij,jk,kl->il", a, b, b.t()),
    "count_error": lambda C, a, b: C.T.einsum("ij,jk->ik", a),
    "bad_subscript_error": lambda C, a, b: C.T.einsum("i1,jk", a, b),
    "ndim_error": lambda C, a, b: C.T.einsum("ijk,jk", a, b),
    "output_unknown_error": lambda C, a, b: C.T.einsum("ij,jk->iz", a, b),
    "output_twice_error": lambda C, a, b: C.T.einsum("ij,jk->ii", a, b),
    "size_error": lambda C, a, b: C.T.einsum("ij,ij->i", a, b),
    "dtype_error": lambda C, a, b: C.T.einsum("ij,jk", a, b.double()),
}, E2, grad=(0, 1))
CASES.table("math/einsum1", {
    "transpose": lambda C, x: C.T.einsum("ij->ji", x[0]),
    "diagonal": lambda C, x: C.T.einsum("ii->i", x[0, :, :3]),
    "trace": lambda C, x: C.T.einsum("ii", x[0, :, :3]),
    "trace_explicit": lambda C, x: C.T.einsum("ii->", x[1, :, 1:]),
    "batch_diagonal": lambda C, x: C.T.einsum("ijj->ij", x[..., :3]),
    "diagonal_then_sum": lambda C, x: C.T.einsum("iij->j", x[:, :2]),
    "sum_dim": lambda C, x: C.T.einsum("ijk->ik", x),
    "permute": lambda C, x: C.T.einsum("ijk->kij", x),
    "ellipsis_sum_last": lambda C, x: C.T.einsum("...k->...", x),
    "ellipsis_front": lambda C, x: C.T.einsum("i...->...i", x),
    "ellipsis_implicit": lambda C, x: C.T.einsum("...ji", x),
    "ellipsis_dropped": lambda C, x: C.T.einsum("...ij->ij", x),
    "repeat_size_error": lambda C, x: C.T.einsum("ii->i", x[0]),
}, (A3,), grad=(0,))
CASES.table("math/einsum_batched", {
    "bmm": lambda C, a, b: C.T.einsum("bij,bjk->bik", a, b),
    "attention_scores": lambda C, a, b: C.T.einsum("bqd,bkd->bqk", a, b.transpose(1, 2)),
    "ellipsis_matmul": lambda C, a, b: C.T.einsum("...ij,...jk->...ik", a, b),
    "ellipsis_broadcast": lambda C, a, b: C.T.einsum("...ij,...jk->...ik", a, b[:1]),
    "ellipsis_against_plain": lambda C, a, b: C.T.einsum("...ij,jk->...ik", a, b[0]),
    "batch_sum": lambda C, a, b: C.T.einsum("bij,bjk->ik", a, b),
    "bilinear": lambda C, a, b: C.T.einsum("bi,bij,bj->b", a[:, 0], a.transpose(1, 2) @ a, a[:, 1]),
}, (r(2, 3, 4), r(2, 4, 5)), grad=(0, 1))

# -- unique, nonzero, bincount, mode --------------------------------------------------------------
CASES.table("math/unique", {
    "values": lambda C, x: C.T.unique(x),
    "method": lambda C, x: x.unique(),
    "inverse": lambda C, x: C.T.unique(x, return_inverse=True),
    "counts": lambda C, x: C.T.unique(x, return_counts=True),
    "both": lambda C, x: x.unique(sorted=True, return_inverse=True, return_counts=True),
    "2d_inverse": lambda C, x: C.T.unique(x.reshape(2, 4), return_inverse=True),
    "dim0": lambda C, x: C.T.unique(C.T.stack([x[:4], x[:4], x[4:]]), dim=0, return_inverse=True,
                                    return_counts=True),
    "dim1": lambda C, x: C.T.unique(C.T.stack([x[:4], x[:4]], 1), dim=1),
    "float": lambda C, x: C.T.unique(x.float() / 2, return_counts=True),
    "bool": lambda C, x: C.T.unique(x > 1),
    "empty": lambda C, x: C.T.unique(x[:0], return_inverse=True, return_counts=True),
}, (INTS,))
CASES.table("math/nonzero", {
    "1d": lambda C, x: x.nonzero(),
    "2d": lambda C, x: C.T.nonzero(x.reshape(2, 4)),
    "as_tuple": lambda C, x: C.T.nonzero(x.reshape(2, 4), as_tuple=True),
    "method_as_tuple": lambda C, x: (x > 2).nonzero(as_tuple=True),
    "bool": lambda C, x: (x.reshape(2, 2, 2) > 1).nonzero(),
    "none": lambda C, x: (x > 100).nonzero(),
    "0d": lambda C, x: x[0].nonzero(),
    "0d_as_tuple": lambda C, x: x[0].nonzero(as_tuple=True),
    "float": lambda C, x: (x.float() - 1).nonzero(),
    "index_with_it": lambda C, x: x[(x > 1).nonzero(as_tuple=True)],
}, (INTS,))
CASES.table("math/bincount", {
    "counts": lambda C, x: x.bincount(),
    "minlength": lambda C, x: C.T.bincount(x, minlength=10),
    "minlength_smaller": lambda C, x: C.T.bincount(x, minlength=2),
    "weights_f32": lambda C, x: C.T.bincount(x, weights=C.tensor(np.linspace(0, 1, 8, dtype=f32))),
    "weights_f64": lambda C, x: x.bincount(C.tensor(np.linspace(0, 1, 8))),
    "weights_int": lambda C, x: x.bincount(C.tensor(np.arange(8))),
    "empty": lambda C, x: C.T.bincount(x[:0]),
    "empty_minlength": lambda C, x: C.T.bincount(x[:0], minlength=3),
    "negative_error": lambda C, x: C.T.bincount(x - 1),
    "2d_error": lambda C, x: C.T.bincount(x.reshape(2, 4)),
    "float_error": lambda C, x: C.T.bincount(x.float()),
    "weights_length_error": lambda C, x: C.T.bincount(x, weights=C.tensor([1., 2.])),
    "minlength_error": lambda C, x: C.T.bincount(x, minlength=-1),
}, (INTS,))
MODE = np.array([[1., 2., 2., 3., 1.], [5., 5., 1., 1., 0.], [4., 4., 4., 4., 4.]], f32)
CASES.table("math/mode", {
    "last_dim": lambda C, x: x.mode(),
    "dim0": lambda C, x: C.T.mode(x, 0),
    "keepdim": lambda C, x: x.mode(1, keepdim=True),
    "function": lambda C, x: C.T.mode(x, dim=-1),
    "1d": lambda C, x: x[0].mode(),
    "0d": lambda C, x: x[0, 0].mode(),
    "int": lambda C, x: x.long().mode(1),
    "empty_error": lambda C, x: x[:, :0].mode(1),
}, (MODE,), grad=(0,))

# -- comparing whole tensors, one_hot ------------------------------------------------------------
NEAR = (np.array([1., 1e10, np.inf, -np.inf, np.nan, 0., 1e-9, 2.], f32),
        np.array([1. + 1e-6, 1.00001e10, np.inf, np.inf, np.nan, 1e-9, 0., 2.1], f32))
CASES.table("math/close", {
    "isclose": lambda C, a, b: C.T.isclose(a, b),
    "isclose_method": lambda C, a, b: a.isclose(b),
    "isclose_equal_nan": lambda C, a, b: C.T.isclose(a, b, equal_nan=True),
    "isclose_loose": lambda C, a, b: C.T.isclose(a, b, rtol=0.1, atol=0.01),
    "isclose_tight": lambda C, a, b: C.T.isclose(a, b, rtol=0, atol=0),
    "isclose_broadcast": lambda C, a, b: C.T.isclose(a.reshape(8, 1), b),
    "isclose_int": lambda C, a, b: C.T.isclose(C.tensor([1, 2, 3]), C.tensor([1, 3, 3])),
    "isclose_int_rtol": lambda C, a, b: C.T.isclose(C.tensor([100, 2]), C.tensor([101, 2]), rtol=0.02),
    "isclose_bool": lambda C, a, b: C.T.isclose(a > 0, b > 0),
    "allclose": lambda C, a, b: C.T.allclose(a[:2], b[:2]),
    "allclose_false": lambda C, a, b: C.T.allclose(a, b),
    "allclose_nan": lambda C, a, b: a[4:5].allclose(b[4:5], equal_nan=True),
    "equal": lambda C, a, b: C.T.equal(a[:3], a[:3].clone()),
    "equal_method_false": lambda C, a, b: a.equal(b),
    "equal_shape": lambda C, a, b: C.T.equal(a[:2], a[:3]),
    "equal_nan": lambda C, a, b: C.T.equal(a[4:5], a[4:5]),
    "equal_int_float": lambda C, a, b: C.T.equal(C.tensor([1., 2.]), C.tensor([1, 2])),
    "isclose_dtype_error": lambda C, a, b: C.T.isclose(a, b.double()),
    "isclose_rtol_error": lambda C, a, b: C.T.isclose(a, b, rtol=-1.0),
}, NEAR)
CASES.table("math/one_hot", {
    "inferred": lambda C, x: C.F.one_hot(x),
    "classes": lambda C, x: C.F.one_hot(x, 8),
    "2d": lambda C, x: C.F.one_hot(x.reshape(2, 4), num_classes=6),
    "0d": lambda C, x: C.F.one_hot(x[0], 4),
    "empty": lambda C, x: C.F.one_hot(x[:0], 3),
    "too_small_error": lambda C, x: C.F.one_hot(x, 4),
    "negative_error": lambda C, x: C.F.one_hot(x - 1),
    "float_error": lambda C, x: C.F.one_hot(x.float()),
    "empty_inferred_error": lambda C, x: C.F.one_hot(x[:0]),
}, (INTS,))

# -- sampling: what is refused (the draws themselves are tested statistically) ---------------------
CASES.table("math/sampling_errors", {
    "multinomial_int": lambda C: C.T.multinomial(C.tensor([1, 2]), 1),
    "multinomial_3d": lambda C: C.T.multinomial(C.T.ones(2, 2, 2, device=C.dev), 1),
    "multinomial_zero_samples": lambda C: C.T.multinomial(C.tensor([0.5, 0.5]), 0),
    "multinomial_too_many": lambda C: C.T.multinomial(C.tensor([0.5, 0.5]), 3),
    "multinomial_negative": lambda C: C.T.multinomial(C.tensor([0.5, -0.5]), 1),
    "multinomial_nan": lambda C: C.tensor([0.5, float("nan")]).multinomial(1, True),
    "multinomial_zero_sum": lambda C: C.T.multinomial(C.tensor([[0., 0.], [1., 1.]]), 1),
    "bernoulli_p_out_of_range": lambda C: C.T.bernoulli(C.tensor([0.5, 1.5])),
    "bernoulli_scalar_p": lambda C: C.T.zeros(3, device=C.dev).bernoulli_(2.0),
    "randint_empty_range": lambda C: C.T.randint(3, 3, (2,)),
    "randperm_negative": lambda C: C.T.randperm(-1),
    "normal_negative_std": lambda C: C.T.zeros(3, device=C.dev).normal_(0, -1),
    "uniform_reversed": lambda C: C.T.zeros(3, device=C.dev).uniform_(1, 0),
    "uniform_int": lambda C: C.tensor([1, 2]).uniform_(),
    "shapes_and_dtypes": lambda C: [t.shape[-1] for t in (
        C.T.multinomial(C.tensor([[0.2, 0.8], [1., 0.]]), 2),
        C.T.randint(0, 5, (2, 3)), C.T.randperm(4), C.T.randint(high=5, size=(2, 7)),
        C.T.randint(5, (2, 1)))] + [
        str(C.T.bernoulli(C.tensor([0.5], dtype=C.T.float64)).dtype).split(".")[-1],
        str(C.T.randint(5, (2,)).dtype).split(".")[-1]],
    "certain_outcomes": lambda C: (C.T.bernoulli(C.tensor([0., 1., 1., 0.])),
                                   C.T.multinomial(C.tensor([[0., 1.], [1., 0.]]), 1),
                                   C.T.multinomial(C.tensor([0., 0., 3.]), 2, replacement=True)),
})

# -- format specs, inference mode ------------------------------------------------------------------
CASES.table("math/python", {
    "format_0d": lambda C, x: f"{x.sum():.4f}",
    "format_0d_grad": lambda C, x: f"{(x * x).sum():8.2e}",
    "format_0d_int": lambda C, x: f"{x.argmax():03d}",
    "format_empty_spec": lambda C, x: f"{x[0, 0]}" == str(x[0, 0]),
    "format_vector_error": lambda C, x: f"{x[0]:.2f}",
    "format_one_element_error": lambda C, x: f"{x[:1, 0]:.2f}",
    "inference_mode": lambda C, x: _inference(C, x),
    "inference_mode_off": lambda C, x: _inference(C, x, False),
}, (X,), grad=(0,), devices=CPU_ONLY)


def _inference(C, x, mode=True):
    with C.T.inference_mode(mode):
        y = x * 2
        inside = C.T.is_inference_mode_enabled()
    return y.requires_grad, inside, C.T.is_inference_mode_enabled(), C.T.is_grad_enabled()

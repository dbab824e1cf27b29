"""Layer norm's passes over the activation as compiled loops, for numpy arrays on the CPU.

Written with whole-array numpy operations (:class:`teachgrad.ops.normalization.LayerNorm`),
layer norm's forward takes two reductions and seven passes over the activation, and its
backward (written with tensor operations) about ten more, each a numpy call that reads,
and most of them write, a whole array. The loops below walk each row (the ``n``
normalised values of one position) three times forward while it is in the cache (its
sum, its squares, its output) and twice backward (its two sums, then its gradient); a
third walk backward adds the weight's and bias's gradients up.

Arrays are ``(rows, n)``: every leading dimension folded into rows. Sums accumulate in
float64; the row statistics' sums in any order (``fastmath={"reassoc"}`` lets the
compiler split them into vector lanes): no worse than numpy's pairwise float32 sums,
within rounding of them, and bit-identical to nothing. The elementwise passes do the
whole-array code's operations in its order, with no fused multiply-add.
"""
from __future__ import annotations

import numpy as np
from numba import njit

_SUMS = dict(cache=True, error_model="numpy", fastmath={"reassoc"})
_PASSES = dict(cache=True, error_model="numpy")


@njit(**_SUMS)
def normalize_rows(x, eps, one, weight, bias, mean, inv_std, normalized, out):
    """Row by row: its mean and ``1 / sqrt(var + eps)`` (the biased variance of the centred
    values, as the whole-array code computes it), then ``normalized = (x - mean) * inv_std``
    and ``out = normalized * weight + bias``.

    One row's three walks run one after the other while the row is still in the cache
    (about a third faster than a walk over all rows for the statistics, then another
    for the outputs). ``fastmath={"reassoc"}`` lets the compiler split the two sums into
    vector lanes; the elementwise walk has nothing to reassociate (each output is one
    subtraction, one product, one product and one sum, in the whole-array code's order).
    """
    rows, n = x.shape
    for r in range(rows):
        row, x_hat, result = x[r], normalized[r], out[r]
        total = 0.0
        for k in range(n):
            total += np.float64(row[k])
        mean[r] = total / n
        m = mean[r]  # (in the array's dtype, as the centring below uses it)
        squares = 0.0
        for k in range(n):
            d = row[k] - m
            squares += np.float64(d * d)
        inv_std[r] = squares / n  # the variance, rounded to the array's dtype first
        inv_std[r] = one / np.sqrt(inv_std[r] + eps)
        s = inv_std[r]
        for k in range(n):
            value = (row[k] - m) * s
            x_hat[k] = value
            result[k] = value * weight[k] + bias[k]


@njit(**_SUMS)
def row_gradient_means(grad, normalized, weight, mean_g, mean_g_normalized):
    """Each row's ``mean(g)`` and ``mean(g · x̂)`` with ``g = grad · weight``: the sums in
    float64, each divided by ``n`` and then rounded once to the arrays' dtype."""
    rows, n = grad.shape
    for r in range(rows):
        grad_row, x_hat = grad[r], normalized[r]
        total_g, total_gx = 0.0, 0.0
        for k in range(n):
            g = grad_row[k] * weight[k]
            total_g += np.float64(g)
            total_gx += np.float64(g * x_hat[k])
        mean_g[r], mean_g_normalized[r] = total_g / n, total_gx / n


@njit(**_PASSES)
def input_gradient(grad, normalized, weight, shift, stretch, inv_std, dx):
    """``dx = (g - shift - x̂ · stretch) · inv_std`` with ``g = grad · weight`` (``shift``
    and ``stretch`` are each row's ``mean(g)`` and ``mean(g · x̂)``): in the array's dtype,
    nothing else in the loop, so that it runs on whole SIMD registers."""
    rows, n = grad.shape
    for r in range(rows):
        a, b, s = shift[r], stretch[r], inv_std[r]
        grad_row, x_hat, result = grad[r], normalized[r], dx[r]
        for k in range(n):
            result[k] = (grad_row[k] * weight[k] - a - x_hat[k] * b) * s


@njit(**_PASSES)
def affine_gradients(grad, normalized, sums):
    """``sums[0] = Σ_rows grad · x̂`` and ``sums[1] = Σ_rows grad`` (the weight's and the
    bias's gradients, float64), added row after row.

    A walk of its own: with ``dx`` written in the same loop the float64 sums halved the
    SIMD width of the whole loop (38 µs for both at ``(1024, 64)`` float32, 12 + 18 apart).
    The sums run in local arrays, which the compiler knows overlap nothing."""
    rows, n = grad.shape
    sum_weight, sum_bias = np.zeros(n), np.zeros(n)
    for r in range(rows):
        grad_row, x_hat = grad[r], normalized[r]
        for k in range(n):
            sum_weight[k] += np.float64(grad_row[k] * x_hat[k])
            sum_bias[k] += np.float64(grad_row[k])
    sums[0], sums[1] = sum_weight, sum_bias

"""Batch norm's passes over the activation as compiled loops, for numpy arrays on the CPU.

Written with whole-array numpy operations (:mod:`teachgrad.ops.batch_norm`), batch
norm's output takes two passes (scale, then shift) and its backward seven, each a
numpy call that reads, and most of them write, a whole array. The loops below do the
same arithmetic in one pass for the output and two for the backward: both
per-channel sums in one walk, and each output element written once. The batch's
statistics take two walks: the sums for the mean, then the centred input and its
sum of squares together.

Arrays are ``(N, C, M)``: the batch, the channels, and every other dimension
flattened (``M`` values of a channel per sample). The sums accumulate in float64,
in any order (``fastmath={"reassoc"}`` lets the compiler split them into vector
lanes): no worse than numpy's pairwise float32 sums, within rounding of them, and
bit-identical to nothing. The elementwise passes do numpy's operations in numpy's
order, with no fused multiply-add, so they round as the whole-array code does.
"""
from __future__ import annotations

import numpy as np
from numba import njit

_SUMS = dict(cache=True, error_model="numpy", fastmath={"reassoc"})
_PASSES = dict(cache=True, error_model="numpy")


@njit(**_PASSES)
def scale_shift(centered, scale, shift, out):
    """``out = centered * scale[c] + shift[c]``."""
    n, c, m = centered.shape
    for sample in range(n):
        for channel in range(c):
            a, b = scale[channel], shift[channel]
            row, result = centered[sample, channel], out[sample, channel]
            for k in range(m):
                result[k] = row[k] * a + b


@njit(**_SUMS)
def gradient_sums(g, centered, sum_g, sum_g_centered):
    """``sum_g[c] = Σ g`` and ``sum_g_centered[c] = Σ g · centered`` (float64), in one walk."""
    n, c, m = g.shape
    for channel in range(c):
        total_g, total_gc = 0.0, 0.0
        for sample in range(n):
            grad_row, centered_row = g[sample, channel], centered[sample, channel]
            for k in range(m):
                total_g += np.float64(grad_row[k])
                total_gc += np.float64(grad_row[k]) * np.float64(centered_row[k])
        sum_g[channel], sum_g_centered[channel] = total_g, total_gc


@njit(**_PASSES)
def input_gradient(g, centered, scale, a, b, dx):
    """``dx = g * scale[c] + centered * a[c] + b[c]`` (the three per-channel factors of
    batch norm's input gradient, :class:`teachgrad.ops.batch_norm.BatchNormTraining`)."""
    n, c, m = g.shape
    for sample in range(n):
        for channel in range(c):
            s, ac, bc = scale[channel], a[channel], b[channel]
            grad_row, centered_row, out = g[sample, channel], centered[sample, channel], dx[sample, channel]
            for k in range(m):
                out[k] = grad_row[k] * s + centered_row[k] * ac + bc


@njit(**_SUMS)
def channel_sums(x, sums):
    """``sums[c] = Σ x`` over the batch and every position (float64)."""
    n, c, m = x.shape
    for channel in range(c):
        total = 0.0
        for sample in range(n):
            row = x[sample, channel]
            for k in range(m):
                total += np.float64(row[k])
        sums[channel] = total


@njit(**_SUMS)
def center_and_square(x, mean, centered, sum_squares):
    """``centered = x - mean[c]`` (rounded as numpy's subtraction) and
    ``sum_squares[c] = Σ centered²`` (float64), in one walk."""
    n, c, m = x.shape
    for channel in range(c):
        middle, total = mean[channel], 0.0
        for sample in range(n):
            row, out = x[sample, channel], centered[sample, channel]
            for k in range(m):
                value = row[k] - middle
                out[k] = value
                total += np.float64(value) * np.float64(value)
        sum_squares[channel] = total

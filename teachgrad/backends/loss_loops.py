"""Log-softmax over rows, and cross-entropy's forward and backward, as compiled loops for
numpy arrays on the CPU.

A row of logits is short (a character model has 62 classes, a word model some
thousands), and there are many rows. Each loop below is kept simple enough for the
compiler to run it on SIMD registers: one walk over a row doing one thing. A loop that
sums a row and then writes it, or one that reads one array and writes another that might
overlap it, falls back to an element-by-element version.

The exponential is numpy's (vectorised; numba's is a C library call per element, ten
times slower), so log-softmax takes five walks: the row maxima, the shift, numpy's
``exp`` into a scratch array, the row sums, the subtraction of their logarithms.
Cross-entropy needs no log-softmax array at all: its loss per row is
``log(sum(exp(shifted))) - shifted[target]``, and its gradient is the softmax
(``exp(shifted) / sum``, both kept from the forward) minus the one-hot target, in one walk.
"""
from __future__ import annotations

import numpy as np
from numba import njit

_PASSES = dict(cache=True, error_model="numpy")
# "reassoc" lets the compiler add a row in SIMD lanes (partial sums added at the end)
_SUMS = dict(_PASSES, fastmath={"reassoc"})
# Running maxima per row: eight float32 (four float64) fill one AVX2 register. Sixteen
# leave most of a 62-long row to the scalar remainder.
LANES = 8


@njit(**_PASSES)
def row_maxima(x, out):
    """``out[r] = max(x[r])`` in ``LANES`` running maxima per row, then across them.

    A NaN may or may not win (one compare per element and no NaN test, so that the
    compiler can vectorise it); the row comes out NaN either way: ``exp`` of NaN is NaN,
    and so is the row's sum that every element then meets."""
    rows, n = x.shape
    lanes = np.empty(LANES, x.dtype)
    whole = n - n % LANES
    for r in range(rows):
        row = x[r]
        top = row[0]
        if whole:
            for lane in range(LANES):
                lanes[lane] = row[lane]
            for j in range(LANES, whole, LANES):
                for lane in range(LANES):
                    v = row[j + lane]
                    lanes[lane] = v if v > lanes[lane] else lanes[lane]
            top = lanes[0]
            for lane in range(1, LANES):
                top = lanes[lane] if lanes[lane] > top else top
        for j in range(whole, n):
            top = row[j] if row[j] > top else top
        out[r] = top


@njit(**_PASSES)
def shift_rows(x, tops, out):
    """``out[r] = x[r] - tops[r]`` (``out`` may not overlap ``x``)."""
    for r in range(x.shape[0]):
        row, shifted, top = x[r], out[r], tops[r]
        for j in range(x.shape[1]):
            shifted[j] = row[j] - top


@njit(**_SUMS)
def row_sums(e, out):
    """``out[r] = sum(e[r])``, accumulated in float64 (``out`` is float64: a float32 sum
    rounded to float32 would move the log-sum-exp by up to an ulp of the sum)."""
    for r in range(e.shape[0]):
        row = e[r]
        total = 0.0
        for j in range(e.shape[1]):
            total += np.float64(row[j])
        out[r] = total


@njit(**_PASSES)
def subtract_log(out, sums):
    """In place: ``out[r] -= log(sums[r])`` (the shifted row minus its log-sum-exp)."""
    for r in range(out.shape[0]):
        shift = np.log(sums[r])
        row = out[r]
        for j in range(out.shape[1]):
            row[j] = row[j] - shift


@njit(**_PASSES)
def picked_losses(shifted, sums, target, losses):
    """``losses[r] = log(sums[r]) - shifted[r, target[r]]``: minus the log-probability of
    each row's target (the same number as ``-(shifted - log(sum))``: a negation is exact)."""
    for r in range(shifted.shape[0]):
        losses[r] = np.log(sums[r]) - shifted[r, target[r]]


@njit(**_PASSES)
def softmax_minus_one_hot(e, sums, target, scale, out):
    """``out[r] = scale[r] * (e[r] / sums[r] - onehot(target[r]))``, as
    ``e[r] * (scale[r] / sums[r])`` and then ``scale[r]`` off the target's place: the
    gradient of cross-entropy's per-row losses scaled by ``scale``."""
    for r in range(e.shape[0]):
        row, result = e[r], out[r]
        factor = scale[r] / sums[r]
        for j in range(e.shape[1]):
            result[j] = row[j] * factor
    for r in range(e.shape[0]):
        out[r, target[r]] -= scale[r]


def log_softmax_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For 2-D C-ordered float ``x``: each row minus its maximum, ``exp`` of that (numpy's,
    in a new array) and the sums of its rows (float64)."""
    rows = x.shape[0]
    tops, sums = np.empty(rows, x.dtype), np.empty(rows)
    row_maxima(x, tops)
    shifted = np.empty_like(x)
    shift_rows(x, tops, shifted)
    e = np.exp(shifted)
    row_sums(e, sums)
    return shifted, e, sums


def log_softmax(x: np.ndarray) -> np.ndarray:
    """Log-softmax of each row of a 2-D C-ordered float ``x``."""
    shifted, _, sums = log_softmax_parts(x)
    subtract_log(shifted, sums)
    return shifted

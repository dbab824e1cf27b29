"""Log-softmax over rows, and cross-entropy's forward and backward, as compiled loops for
numpy arrays on the CPU.

A row of logits is short (a character model has 62 classes, a word model some
thousands), and there are many rows. Each loop below is kept simple enough for the
compiler to run it on SIMD registers: one walk over a row doing one thing. A loop that
sums a row and then writes it, or one that reads one array and writes another that might
overlap it, falls back to an element-by-element version.

The exponential is numpy's (vectorised; numba's is a C library call per element, ten
times slower), so log-softmax takes five walks: the row maxima, the shift, numpy's
``exp`` in place, the row sums, the shifted rows minus the sums' logarithms (written
over the exponentials).
Cross-entropy needs no log-softmax array at all: its loss per row is
``log(sum(exp(shifted))) - shifted[target]``, and its gradient is the softmax
(``exp(shifted) / sum``, both kept from the forward) minus the one-hot target, in one walk.
Each pass that needs the shifted rows recomputes ``x - max`` (one subtraction, the same
number each time) rather than keep an array of them.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .attention_loops import row_maxima  # (eight running maxima per row: vectorised)

_PASSES = dict(cache=True, error_model="numpy")
# "reassoc" lets the compiler add a row in SIMD lanes (partial sums added at the end)
_SUMS = dict(_PASSES, fastmath={"reassoc"})


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
def log_probabilities(x, tops, sums, out):
    """``out[r] = (x[r] - tops[r]) - log(sums[r])``: the shifted row (the very numbers
    ``shift_rows`` made) minus its log-sum-exp. ``out`` may be the array of ``exp`` whose
    rows ``sums`` added up: that is no longer needed, and it does not overlap ``x``."""
    for r in range(x.shape[0]):
        top, shift = tops[r], np.log(sums[r])
        row, result = x[r], out[r]
        for j in range(x.shape[1]):
            result[j] = (row[j] - top) - shift


@njit(**_PASSES)
def picked_losses(x, tops, sums, target, losses):
    """``losses[r] = log(sums[r]) - (x[r, target[r]] - tops[r])``: minus the
    log-probability of each row's target (the same number as ``-((x - top) - log(sum))``:
    a negation is exact)."""
    for r in range(x.shape[0]):
        losses[r] = np.log(sums[r]) - (x[r, target[r]] - tops[r])


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


def shift_by_row_maxima(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[r] = x[r] - max(x[r])`` for 2-D C-ordered ``x`` (``out`` apart from it): what
    keeps ``exp`` from overflowing. Returns the maxima.

    A row holding a NaN comes out NaN downstream either way: whether or not the NaN is
    its maximum, ``exp`` of it is NaN, and so is the row's sum (or log-sum) that every
    element then meets."""
    tops = np.empty(x.shape[0], x.dtype)
    row_maxima(x, tops)
    shift_rows(x, tops, out)
    return tops


def exp_shifted_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For 2-D C-ordered float ``x``: each row's maximum, ``exp(x - max)`` (numpy's exp, in
    place in the one new array) and the sums of its rows (float64)."""
    e = np.empty_like(x)
    tops = shift_by_row_maxima(x, e)
    np.exp(e, out=e)
    sums = np.empty(x.shape[0])
    row_sums(e, sums)
    return tops, e, sums


def log_softmax(x: np.ndarray) -> np.ndarray:
    """Log-softmax of each row of a 2-D C-ordered float ``x``: its result written over the
    exponentials once their sums are taken (one new array)."""
    tops, e, sums = exp_shifted_rows(x)
    log_probabilities(x, tops, sums, e)
    return e

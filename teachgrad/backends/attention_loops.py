"""Attention's softmax over the scores as compiled loops, for numpy arrays on the CPU.

Written with tensor operations (``teachgrad.nn.attention``), one attention call's
``(..., L, S)`` scores go through a scaling, a ``masked_fill`` of the hidden pairs, and a
softmax's four passes, each a numpy call over the whole matrix, and back through as many
again. The loops below do the scaling and the causal mask in one pass, the row maxima, the
shift, the sums and the division in one pass each, and leave the exponential to numpy
(its vectorised ``exp``; numba's calls the C library once per element); the backward is
two passes. Each pass is a loop simple enough for the compiler to vectorise. Arrays are
``(rows, S)``: the leading dimensions and the queries folded into rows, so row ``r`` is
query ``r % L``.

Row sums accumulate in the array's dtype in any order (``fastmath={"reassoc"}`` lets the
compiler split them into vector lanes): within rounding of numpy's pairwise sums, not
their bits. The causal mask is PyTorch's ``is_causal``: query ``i`` sees keys ``0..i``
(the top-left triangle, also when ``L != S``).
"""
from __future__ import annotations

import numpy as np
from numba import njit

_SUMS = dict(cache=True, error_model="numpy", fastmath={"reassoc"})
_PASSES = dict(cache=True, error_model="numpy")


LANES = 8  # (row maxima kept in this many lanes: independent selects the compiler vectorises;
#            one AVX2 register of float32: 16 left most of a 62-long row to the scalar tail)


@njit(**_PASSES)
def scale_and_hide(scores, scale, queries, causal):
    """In place: ``scores * scale`` at the keys each row sees, ``-inf`` at the ones it does
    not (their ``exp`` is exactly 0). Row ``r`` is query ``r % queries``."""
    rows, keys = scores.shape
    hidden = -np.inf
    for r in range(rows):
        row = scores[r]
        seen = min(r % queries + 1, keys) if causal else keys
        for j in range(keys):
            row[j] = row[j] * scale if j < seen else hidden


@njit(**_PASSES)
def row_maxima(scores, out):
    """``out[r] = max(scores[r])``, in ``LANES`` running maxima per row, then across them.

    A NaN may or may not win here (one compare per element, no NaN test, so that the
    compiler can vectorise it); the softmax's row is NaN either way: ``exp`` of NaN is
    NaN and so is the row's sum, by which every weight is divided."""
    rows, keys = scores.shape
    lanes = np.empty(LANES, scores.dtype)
    for r in range(rows):
        row = scores[r]
        top = row[0]
        whole = keys - keys % LANES
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
        for j in range(whole, keys):
            top = row[j] if row[j] > top else top
        out[r] = top


@njit(**_PASSES)
def subtract_rows(scores, tops):
    """In place: each row minus its own number (its maximum: what keeps ``exp`` finite)."""
    for r in range(scores.shape[0]):
        row, top = scores[r], tops[r]
        for j in range(scores.shape[1]):
            row[j] = row[j] - top


@njit(**_SUMS)
def row_sums(e, out):
    for r in range(e.shape[0]):
        row = e[r]
        total = row[0] * 0
        for j in range(e.shape[1]):
            total += row[j]
        out[r] = total


@njit(**_PASSES)
def divide_rows(e, sums):
    """In place: each row divided by its own number (its sum: the softmax's weights)."""
    for r in range(e.shape[0]):
        row, total = e[r], sums[r]
        for j in range(e.shape[1]):
            row[j] = row[j] / total


@njit(**_SUMS)
def row_dots(a, b, out):
    for r in range(a.shape[0]):
        x, y = a[r], b[r]
        total = x[0] * 0
        for j in range(a.shape[1]):
            total += x[j] * y[j]
        out[r] = total


@njit(**_PASSES)
def score_gradient_rows(grad, weights, dots, scale):
    """In place in ``grad`` (the weights' gradient): ``weights * (grad - dot) * scale``."""
    for r in range(grad.shape[0]):
        g, w, dot = grad[r], weights[r], dots[r]
        for j in range(grad.shape[1]):
            g[j] = w[j] * (g[j] - dot) * scale


def attention_weights(scores: np.ndarray, scale, causal: bool) -> np.ndarray:
    """Softmax of ``scores * scale`` (causal or not) over the last axis, in ``scores``'s
    own memory (a fresh matrix product nothing else holds). Each loop is one simple pass
    the compiler vectorises (a pass that sums and then writes the same row does not
    vectorise: that is why the sums and the writes are separate loops)."""
    rows = scores.reshape(-1, scores.shape[-1])
    per_row = np.empty(rows.shape[0], rows.dtype)
    scale_and_hide(rows, scale, scores.shape[-2], causal)
    row_maxima(rows, per_row)
    subtract_rows(rows, per_row)
    np.exp(rows, out=rows)
    row_sums(rows, per_row)
    divide_rows(rows, per_row)
    return scores


def score_gradient(grad: np.ndarray, weights: np.ndarray, scale) -> None:
    """In place in ``grad`` (the weights' gradient, ``(rows, S)``): the scores' gradient,
    ``weights * (grad - sum(grad * weights)) * scale`` row by row (a hidden pair has
    weight 0, so its gradient is 0, as ``masked_fill``'s backward makes it)."""
    dots = np.empty(grad.shape[0], grad.dtype)
    row_dots(grad, weights, dots)
    score_gradient_rows(grad, weights, dots, scale)

"""Attention's softmax over the scores as compiled loops, for numpy arrays on the CPU.

Written with tensor operations (``teachgrad.nn.attention``), one attention call's
``(..., L, S)`` scores go through a scaling, a ``masked_fill`` of the hidden pairs, and a
softmax's four passes, each a numpy call over the whole matrix, and back through as many
again. The loops below do the scaling, the causal mask and the row maximum in one walk of
each row, leave the exponential to numpy (its vectorised ``exp``; numba's calls the C
library once per element), and finish each row's normalisation in one walk; the backward
is one walk per row. Arrays are ``(rows, S)``: the leading dimensions and the queries
folded into rows, so row ``r`` is query ``r % L``.

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


@njit(**_PASSES)
def shift_scaled_rows(scores, scale, queries, causal):
    """In place: ``scores[r] = scores[r] * scale - max(scores[r] * scale)`` over the keys
    row ``r`` sees, and ``-inf`` at the keys it does not (their ``exp`` is exactly 0)."""
    rows, keys = scores.shape
    hidden = -np.inf
    for r in range(rows):
        row = scores[r]
        seen = min(r % queries + 1, keys) if causal else keys
        top = row[0] * scale
        for j in range(seen):
            v = row[j] * scale
            row[j] = v
            if v > top or v != v:  # NaN wins, as numpy's max
                top = v
        for j in range(seen):
            row[j] = row[j] - top
        for j in range(seen, keys):
            row[j] = hidden


@njit(**_SUMS)
def divide_by_row_sums(e):
    """In place: each row of exponentials divided by its sum (the softmax's weights)."""
    for r in range(e.shape[0]):
        row = e[r]
        total = row[0] * 0
        for j in range(row.shape[0]):
            total += row[j]
        for j in range(row.shape[0]):
            row[j] = row[j] / total


@njit(**_SUMS)
def score_gradient(grad, weights, scale):
    """In place in ``grad`` (the weights' gradient): the scores' gradient,
    ``weights * (grad - sum(grad * weights)) * scale`` row by row (a hidden pair has
    weight 0, so its gradient is 0 as ``masked_fill``'s backward makes it)."""
    for r in range(weights.shape[0]):
        w, g = weights[r], grad[r]
        dot = w[0] * 0
        for j in range(w.shape[0]):
            dot += g[j] * w[j]
        for j in range(w.shape[0]):
            g[j] = w[j] * (g[j] - dot) * scale


def attention_weights(scores: np.ndarray, scale, causal: bool) -> np.ndarray:
    """Softmax of ``scores * scale`` (causal or not) over the last axis, in ``scores``'s
    own memory (a fresh matrix product nothing else holds)."""
    rows = scores.reshape(-1, scores.shape[-1])
    shift_scaled_rows(rows, scale, scores.shape[-2], causal)
    np.exp(rows, out=rows)
    divide_by_row_sums(rows)
    return scores

"""Scaled dot-product attention as one Function, for numpy arrays on the CPU.

``F.scaled_dot_product_attention`` is written with the engine's own operations
(``teachgrad.nn.attention``): a matrix product, a scaling, a ``masked_fill``, a softmax
and a second product, five nodes forward and as many backward, each a pass over the
``(..., L, S)`` score matrix. This Function computes the same numbers (within rounding)
in two matrix products and the compiled loops of
:mod:`teachgrad.backends.attention_loops` (scaling, causal mask and softmax in three
walks), and its backward in four products and one walk::

    P  = softmax(Q Kᵀ · scale, hidden pairs -inf)      O = P V
    dV = Pᵀ dO     dP = dO Vᵀ     dS = P ⊙ (dP − Σ_keys dP ⊙ P) · scale
    dQ = dS K      dK = dSᵀ Q

``nn.attention`` calls it only where that path computes: numpy arrays of one float dtype
on the CPU, no mask besides ``is_causal``, no dropout, autocast off, the three inputs'
leading (batch, head) dimensions equal. Everything else, and every other backend, runs
the readable composition; ``tests/engine/test_attention_loops.py`` holds the two equal.
"""
from __future__ import annotations

import numpy as np

from ..autograd.function import Context, Function
from ..tensor import Tensor


def _array(t):
    return t if type(t) is np.ndarray else t._array


def _heads_last(like: np.ndarray, rows: int, columns: int) -> np.ndarray | None:
    """Where a ``(B, H, rows, columns)`` product goes when ``like`` is 4-D ``(B, H, ...)``:
    a ``(B, rows, H, columns)`` array read as ``(B, H, rows, columns)`` (a transposed view),
    as PyTorch's CPU attention lays out its output and its inputs' gradients. A model
    splits heads with ``x.view(B, T, H, D).transpose(1, 2)`` and joins them with
    ``y.transpose(1, 2).contiguous().view(B, T, H * D)``: in this layout that transpose is
    already contiguous, so ``contiguous()`` copies nothing forward, and backward the
    gradients reach ``view``'s reshape contiguous, so it copies nothing either. (None for
    other shapes: numpy's own output.)"""
    if like.ndim != 4:
        return None
    batch, heads = like.shape[:2]
    return np.empty((batch, rows, heads, columns), like.dtype).transpose(0, 2, 1, 3)


class ScaledDotProductAttention(Function):
    rule = ("O = softmax(Q Kᵀ·s) V:  ∂V = Pᵀ grad,  ∂S = P ⊙ (grad Vᵀ − Σ (grad Vᵀ) ⊙ P)·s,  "
            "∂Q = ∂S K,  ∂K = ∂Sᵀ Q")
    formula_on_arrays = True  # (the backward reads arrays either way; see below)
    fresh_gradients = True  # (three matrix products: new arrays nothing else holds)

    @staticmethod
    def forward(ctx: Context, query: Tensor, key: Tensor, value: Tensor,
                is_causal: bool, scale: float):
        from ..backends.attention_loops import attention_weights
        q, k, v = query._array, key._array, value._array
        scale = q.dtype.type(scale)
        weights = attention_weights(np.matmul(q, np.swapaxes(k, -1, -2)), scale, is_causal)
        ctx.save_for_backward(query, key, value,
                              Tensor._make(weights, ctx.backend, query.device))
        ctx.scale = scale
        return np.matmul(weights, v, out=_heads_last(weights, weights.shape[-2], v.shape[-1]))

    @staticmethod
    def backward(ctx: Context, grad):
        # On arrays (the engine's usual way) or on tensors (a tool watching every
        # operation): the arithmetic is on the arrays either way, by the loops.
        from ..backends.attention_loops import score_gradient
        q, k, v, weights = (_array(t) for t in ctx.saved_tensors)
        g = _array(grad)
        needs_q, needs_k, needs_v = ctx.needs_input_grad[:3]
        dv = np.matmul(np.swapaxes(weights, -1, -2), g,
                       out=_heads_last(v, *v.shape[-2:])) if needs_v else None
        dq = dk = None
        if needs_q or needs_k:
            d_scores = np.matmul(g, np.swapaxes(v, -1, -2))  # (the weights' gradient first)
            score_gradient(d_scores.reshape(-1, d_scores.shape[-1]),
                           weights.reshape(-1, weights.shape[-1]), ctx.scale)
            dq = np.matmul(d_scores, k, out=_heads_last(q, *q.shape[-2:])) if needs_q else None
            dk = np.matmul(np.swapaxes(d_scores, -1, -2), q,
                           out=_heads_last(k, *k.shape[-2:])) if needs_k else None
        grads = (dq, dk, dv)
        if type(grad) is not np.ndarray:  # (tensors in, tensors out)
            grads = tuple(None if a is None else Tensor._make(a, ctx.backend, grad.device)
                          for a in grads)
        return (*grads, None, None)

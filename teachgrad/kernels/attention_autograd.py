"""Tiled attention on tensors, differentiable: ``tg.kernels.flash_attention(q, k, v)``.

One :class:`FlashAttention` Function: its forward launches the tiled kernel
(:mod:`.attention`) and keeps ``O`` and the per-row log-sum-exp; its backward launches
the two gradient kernels (:mod:`.attention_backward`), which recompute the
probabilities tile by tile. Nothing of size ``T x S`` is stored on the way.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes
from ..autograd.function import Context, Function
from ..tensor import Tensor
from . import attention, attention_backward
from .strided import new_array


def _rows(t: Tensor, rows: int, head_dim: int):
    """A tensor's values as a contiguous ``(batch*heads, rows, head_dim)`` device array."""
    dense = t.contiguous()._array
    heads = dense.size // (rows * head_dim)
    return dense.buffer[dense.offset:dense.offset + dense.size].reshape(heads, rows, head_dim)


class FlashAttention(Function):
    rule = ("dV = Pᵀ·dO; dS = P ⊙ (dO·Vᵀ − rowsum(dO ⊙ O)); dQ = scale·dS·K; "
            "dK = scale·dSᵀ·Q (P recomputed from the saved log-sum-exp)")

    @staticmethod
    def forward(ctx: Context, q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float):
        T, D, S = q.shape[-2], q.shape[-1], k.shape[-2]
        Q, K, V = _rows(q, T, D), _rows(k, S, D), _rows(v, S, D)
        heads, dtype = Q.shape[0], np.dtype(Q.dtype)
        out, lse = new_array(tuple(q.shape), dtype), new_array((heads, T), dtype)
        O, L = out.buffer.reshape(heads, T, D), lse.buffer.reshape(heads, T)
        attention.flash_forward(Q, K, V, O, L, causal=causal, scale=scale)
        ctx.arrays, ctx.options = (Q, K, V, O, L), (causal, scale)
        ctx.shapes = (tuple(q.shape), tuple(k.shape), tuple(v.shape))
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        Q, K, V, O, L = ctx.arrays
        causal, scale = ctx.options
        dO = _rows(grad, Q.shape[1], Q.shape[2])
        made = [new_array(shape, O.dtype) for shape in ctx.shapes]
        dQ, dK, dV = (m.buffer.reshape(like.shape) for m, like in zip(made, (Q, K, V)))
        attention_backward.flash_backward(Q, K, V, O, L, dO, dQ, dK, dV, causal=causal,
                                          scale=scale)
        return (*(Tensor._make(m, ctx.backend, ctx.device) for m in made), None, None)


def flash_attention(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None) -> Any:
    """``softmax(q kᵀ · scale) v`` on the ``cuda`` device by the tiled kernels, with a backward.

    ``q`` is ``(..., T, head_dim)``, ``k`` and ``v`` are ``(..., S, head_dim)`` tensors on
    ``cuda`` (float32, or float64 for gradcheck) with the same leading dimensions (batch,
    heads). ``causal`` masks key ``j`` for query ``i`` when ``j > i`` (PyTorch's
    ``is_causal``); ``scale`` defaults to ``1 / sqrt(head_dim)``. The result is a new
    ``cuda`` tensor like ``q``.
    """
    for name, t in {"q": q, "k": k, "v": v}.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"flash_attention: {name} is a {type(t).__name__}, not a tensor. "
                            "Fix: tg.tensor(values, device='cuda')")
        if t.device.type != "cuda":
            raise ValueError(f"flash_attention runs the cuda kernel, but {name} is on "
                             f"{t.device}. Fix: move the inputs with .cuda()")
        if t.dim() < 2 or t.dtype is not q.dtype or t.dtype not in (dtypes.float32, dtypes.float64):
            raise ValueError(f"flash_attention: {name} must be a float32 (or float64) tensor of "
                             f"at least 2 dimensions (..., rows, head_dim) like q, got {t.dtype} "
                             f"{tuple(t.shape)}")
    lead = tuple(q.shape[:-2])
    if tuple(k.shape[:-2]) != lead or tuple(v.shape[:-2]) != lead or k.shape[-2] != v.shape[-2] \
            or k.shape[-1] != q.shape[-1] or v.shape[-1] != q.shape[-1]:
        raise ValueError(f"flash_attention: q {tuple(q.shape)}, k {tuple(k.shape)} and v "
                         f"{tuple(v.shape)} need the same leading dimensions and head_dim, and "
                         "k and v the same number of rows")
    if q.numel() == 0 or k.numel() == 0:
        raise ValueError(f"flash_attention needs at least one query and one key: q "
                         f"{tuple(q.shape)}, k {tuple(k.shape)}")
    scale = 1.0 / float(q.shape[-1]) ** 0.5 if scale is None else float(scale)
    return FlashAttention.apply(q, k, v, bool(causal), scale)

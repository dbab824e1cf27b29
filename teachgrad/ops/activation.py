"""Softmax and log-softmax along a dimension, each one numerically stable Function.

Subtracting the row maximum before ``exp`` changes nothing mathematically
(it cancels in the ratio) but keeps ``exp`` from overflowing.
"""
from __future__ import annotations

from ..autograd.function import Context, Function
from ..tensor import Tensor


def _stable_exp(backend, x, dim: int):
    """``exp(x - max(x))`` along ``dim`` and its sum along ``dim`` (kept)."""
    shifted = backend.binary("sub", x, backend.reduce("max", x, (dim,), True))
    e = backend.unary("exp", shifted)
    return shifted, e, backend.reduce("sum", e, (dim,), True)


class Softmax(Function):
    rule = "∂softmax/∂a = s ⊙ (grad − Σ grad ⊙ s)"

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int):
        last = dim == a.ndim - 1  # (the CPU backends have one-pass loops for rows)
        out = ctx.backend.fused_activation("softmax", a._array) if last else None
        if out is None:
            _, e, total = _stable_exp(ctx.backend, a._array, dim)
            out = ctx.backend.binary("div", e, total)
        ctx.out, ctx.dim = out, dim
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        s = ctx.output
        if ctx.dim == s.ndim - 1 and grad.dtype is s.dtype:
            fused = ctx.backend.fused_activation("softmax", s._array, grad._array)
            if fused is not None:
                return Tensor._make(fused, ctx.backend, grad.device), None
        return s * (grad - (grad * s).sum(dim=ctx.dim, keepdim=True)), None


class LogSoftmax(Function):
    rule = "∂log_softmax/∂a = grad − softmax ⊙ Σ grad"

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int):
        backend = ctx.backend
        shifted, _, total = _stable_exp(backend, a._array, dim)
        out = backend.binary("sub", shifted, backend.unary("log", total))
        ctx.out, ctx.dim = out, dim
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        softmax = ctx.output.exp()
        return grad - softmax * grad.sum(dim=ctx.dim, keepdim=True), None

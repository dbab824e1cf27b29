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


def _fused_forward(ctx: Context, name: str, a: Tensor, dim: int):
    """The backend's one-pass ``name`` over the last dimension, or None (another dimension,
    or a backend without the loops)."""
    return ctx.backend.fused_activation(name, a._array) if dim == a.ndim - 1 else None


# Where the loops do not run (small arrays, another dimension, another backend), each
# backward below is its formula on the backend's arrays: the very primitives its tensor
# operations would call (the same numbers), without an autograd node for each of them.

def _fused_backward(ctx: Context, name: str, grad: Tensor) -> Tensor | None:
    """The backend's one-pass input gradient of ``name`` from its output, or None."""
    out = ctx.output
    if ctx.dim != out.ndim - 1 or grad.dtype is not out.dtype:
        return None
    fused = ctx.backend.fused_activation(name, out._array, grad._array)
    return None if fused is None else Tensor._make(fused, ctx.backend, grad.device)


class Softmax(Function):
    rule = "∂softmax/∂a = s ⊙ (grad − Σ grad ⊙ s)"

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int):
        out = _fused_forward(ctx, "softmax", a, dim)  # (the CPU backends have loops for rows)
        if out is None:
            _, e, total = _stable_exp(ctx.backend, a._array, dim)
            out = ctx.backend.binary("div", e, total)
        ctx.out, ctx.dim = out, dim
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        fused = _fused_backward(ctx, "softmax", grad)
        if fused is not None:
            return fused, None
        s = ctx.output
        if grad.dtype is not s.dtype:  # (then the tensor operations promote)
            return s * (grad - (grad * s).sum(dim=ctx.dim, keepdim=True)), None
        b, g, s = grad._backend, grad._array, s._array
        dot = b.reduce("sum", b.binary("mul", g, s), (ctx.dim,), True)
        return Tensor._make(b.binary("mul", s, b.binary("sub", g, dot)), b, grad.device), None


class LogSoftmax(Function):
    rule = "∂log_softmax/∂a = grad − softmax ⊙ Σ grad"

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int):
        out = _fused_forward(ctx, "log_softmax", a, dim)
        if out is None:
            backend = ctx.backend
            shifted, _, total = _stable_exp(backend, a._array, dim)
            out = backend.binary("sub", shifted, backend.unary("log", total))
        ctx.out, ctx.dim = out, dim
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        fused = _fused_backward(ctx, "log_softmax", grad)
        if fused is not None:
            return fused, None
        out = ctx.output
        if grad.dtype is not out.dtype:  # (then the tensor operations promote)
            return grad - out.exp() * grad.sum(dim=ctx.dim, keepdim=True), None
        b, g = grad._backend, grad._array
        softmax = b.unary("exp", out._array)
        total = b.reduce("sum", g, (ctx.dim,), True)
        return Tensor._make(b.binary("sub", g, b.binary("mul", softmax, total)), b, grad.device), None

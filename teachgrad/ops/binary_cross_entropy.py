"""The two pieces binary cross-entropy needs as Functions of their own: the per-element
loss of probabilities (its logs clamped at -100) and ``log_sigmoid``.

Both are Functions rather than compositions because their gradients are not what the
chain rule of their pieces would give: the clamp has a flat side (whose slope PyTorch
ignores: it keeps ``(p - y) / (p (1 - p))``), and ``log_sigmoid`` written as
``min(x, 0) - log(1 + e^-|x|)`` has two kinks at 0 that cancel.
"""
from __future__ import annotations

import numpy as np

from ..autograd.function import Context, Function
from ..tensor import Tensor

LOG_FLOOR = -100.0  # PyTorch's clamp of log(p) and log(1 - p): a loss of at most 100
# PyTorch's floor of p (1 - p) in the gradient's denominator: 1e-12 as a float32 constant
# (also for float64), kept so that the gradients match PyTorch's to the last bit
EPSILON = float(np.float32(1e-12))


class BinaryCrossEntropy(Function):
    """``-(y · max(log p, -100) + (1 - y) · max(log(1 - p), -100))``, per element."""

    rule = ("∂/∂p = (p − y) / max(p(1 − p), 1e−12),   ∂/∂y = log(1 − p) − log p  "
            "(the logs unclamped, as PyTorch's)")

    @staticmethod
    def forward(ctx: Context, p: Tensor, y: Tensor):
        ctx.save_for_backward(p, y)
        b = ctx.backend
        with np.errstate(divide="ignore"):  # log(0) = -inf is meant: the clamp takes it
            log_p = b.binary("maximum", b.unary("log", p._array), LOG_FLOOR)
            log_not_p = b.binary("maximum", b.unary("log1p", b.unary("neg", p._array)), LOG_FLOOR)
        # (y - 1) log(1 - p) - y log p: PyTorch's order of operations
        return b.binary("sub", b.binary("mul", b.binary("sub", y._array, 1.0), log_not_p),
                        b.binary("mul", y._array, log_p))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        p, y = ctx.saved_tensors
        d_p = grad * (p - y) / ((1 - p) * p).clamp(min=EPSILON) if ctx.needs_input_grad[0] else None
        with np.errstate(divide="ignore"):  # (±inf where p is 0 or 1, as PyTorch's)
            d_y = grad * ((-p).log1p() - p.log()) if ctx.needs_input_grad[1] else None
        return d_p, d_y


class LogSigmoid(Function):
    """``log(sigmoid(x)) = min(x, 0) - log(1 + e^-|x|)``: no exponent can overflow."""

    rule = "∂ log σ(a)/∂a = 1 − σ(a) = σ(−a)"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        b, x = ctx.backend, a._array
        tail = b.unary("log1p", b.unary("exp", b.unary("neg", b.unary("abs", x))))
        return b.binary("sub", b.binary("minimum", x, 0.0), tail)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        return grad * (-a).sigmoid()

"""The negative log-likelihood loss as one operation: the last step of cross-entropy."""
from __future__ import annotations

import numpy as np

from ..autograd.function import Context, Function
from ..tensor import Tensor


class NLLLoss(Function):
    """``-logp[n, target[n]]`` for each row ``n``, then the mean, the sum or neither.

    One node instead of the four it replaces (a row index, a pick, a minus, a
    mean), computing the same numbers in the same order.
    """

    rule = ("loss = −mean over n of logp[n, target[n]]:  ∂loss/∂logp[n, target[n]] = −1/N "
            "(−1 for reduction='sum'), 0 for every other class")

    @staticmethod
    def forward(ctx: Context, logp: Tensor, target: Tensor, reduction: str):
        backend = ctx.backend
        rows = logp.shape[0]
        ctx.index = (backend.arange(rows, target.dtype.numpy), target._array)
        ctx.shape, ctx.dtype, ctx.reduction = tuple(logp.shape), logp.dtype.numpy, reduction
        losses = backend.unary("neg", backend.getitem(logp._array, ctx.index))
        if reduction == "none":
            return losses
        total = backend.reduce("sum", losses, None, False)
        return backend.binary("div", total, float(rows)) if reduction == "mean" else total

    formula_on_arrays = True  # (backward computes on numpy arrays when given them; see there)
    arrays_of_any_dtype = True  # (the integer targets are only read as positions)
    fresh_gradients = True  # (a new array of logp's shape)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        rows = ctx.shape[0]
        if ctx.reduction == "mean":
            grad = grad / rows
        if type(grad) is not Tensor:  # numpy arrays (the engine's usual way on the CPU): the
            # rows' picks are distinct positions, so each is written once, no adding up
            full = np.zeros(ctx.shape, ctx.dtype)
            full[ctx.index] = -grad
            return full, None, None
        per_row = -grad.expand(rows) if ctx.reduction != "none" else -grad
        full = ctx.backend.index_add(ctx.shape, ctx.dtype, ctx.index, per_row._array)
        return Tensor._make(full, ctx.backend, grad.device), None, None

"""The negative log-likelihood loss as one operation: the last step of cross-entropy; and
cross-entropy itself as one operation on the CPU's arrays."""
from __future__ import annotations

import numpy as np

from ..autograd.function import Context, Function
from ..backends.compiled_loops import LOOP_DTYPES
from ..backends.numpy_backend import NumpyBackend
from ..tensor import Tensor
from .activation import _stable_exp


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


class CrossEntropy(Function):
    """``nll_loss(log_softmax(logits, 1), target)`` for ``(N, C)`` logits on the CPU as one
    node, its gradient the softmax minus the one-hot target (scaled by the reduction).

    The loss of one row needs no log-softmax array: it is ``log Σ exp(shifted) −
    shifted[target]`` with ``shifted`` the row minus its maximum. Its gradient with respect
    to the logits is ``softmax − onehot(target)``, and the softmax is ``exp(shifted) / Σ``,
    both kept from the forward: one walk backward, where log-softmax's backward after
    NLL's would build a one-hot array, take ``exp`` of the log-probabilities again and walk
    twice. Large arrays take the compiled loops of :mod:`teachgrad.backends.loss_loops`
    (the same forward numbers as the two nodes' loops; a gradient within rounding of
    theirs); small ones the two nodes' own numpy operations, for the same bits. Only
    ``nn.functional.cross_entropy`` makes this node, where it takes the arrays
    (:meth:`takes`); elsewhere it is ``log_softmax`` followed by :class:`NLLLoss`.
    """

    rule = ("loss[n] = log Σ_c exp(x[n, c]) − x[n, target[n]]:  ∂loss/∂x[n] = "
            "scale · (softmax(x[n]) − onehot(target[n])), scale = 1/N for the mean")

    formula_on_arrays = True  # (backward computes on numpy arrays when given them)
    arrays_of_any_dtype = True  # (the integer targets are only read as positions)
    fresh_gradients = True  # (a new array of the logits' shape)

    @staticmethod
    def takes(logits: Tensor) -> bool:
        """Whether this node computes ``logits``' loss: a non-empty 2-D numpy array of
        float32 or float64 on a backend with the compiled loops (the numpy backends)."""
        a = logits._array
        return (type(a) is np.ndarray and a.ndim == 2 and a.size > 0
                and a.dtype in LOOP_DTYPES and isinstance(logits._backend, NumpyBackend))

    @staticmethod
    def forward(ctx: Context, logits: Tensor, target: Tensor, reduction: str):
        backend, x, picks = ctx.backend, logits._array, target._array
        rows = x.shape[0]
        ctx.target, ctx.reduction = picks, reduction
        if backend._one_pass(x):  # (large enough to be worth the loops' call, C order)
            from ..backends import loss_loops

            tops, ctx.exp_shifted, ctx.row_sums = loss_loops.exp_shifted_rows(x)
            losses = np.empty(rows, x.dtype)
            loss_loops.picked_losses(x, tops, ctx.row_sums, picks, losses)
            ctx.log_probs = None
        else:  # the operations LogSoftmax and NLLLoss run on small arrays, in their order
            shifted, _, total = _stable_exp(backend, x, 1)
            ctx.log_probs = log_probs = backend.binary("sub", shifted, backend.unary("log", total))
            rows_and_picks = (np.arange(rows, dtype=picks.dtype), picks)
            losses = backend.unary("neg", backend.getitem(log_probs, rows_and_picks))
        if reduction == "none":
            return losses
        total = backend.reduce("sum", losses, None, False)
        return backend.binary("div", total, float(rows)) if reduction == "mean" else total

    @staticmethod
    def backward(ctx: Context, grad):
        on_tensors = type(grad) is Tensor  # (a tool watching each operation passes tensors)
        g = grad._array if on_tensors else grad
        rows = ctx.target.shape[0]
        if ctx.reduction == "mean":
            g = g / rows
        dtype = (ctx.exp_shifted if ctx.log_probs is None else ctx.log_probs).dtype
        scale = np.empty(rows, dtype)  # each row's share of the loss's gradient
        scale[...] = g
        if ctx.log_probs is None:
            from ..backends import loss_loops

            dx = np.empty_like(ctx.exp_shifted)
            loss_loops.softmax_minus_one_hot(ctx.exp_shifted, ctx.row_sums, ctx.target, scale, dx)
        else:
            dx = _small_gradient(ctx, scale)
        return (Tensor._make(dx, ctx.backend, grad.device) if on_tensors else dx), None, None


def _small_gradient(ctx: Context, scale: np.ndarray) -> np.ndarray:
    """NLLLoss's backward (``−scale`` at each target) then LogSoftmax's (``g − softmax ·
    Σ g``), the numpy operations those nodes run on small arrays, in their order."""
    b, log_probs = ctx.backend, ctx.log_probs
    g = np.zeros(log_probs.shape, log_probs.dtype)
    g[np.arange(log_probs.shape[0]), ctx.target] = -scale
    softmax = b.unary("exp", log_probs)
    total = b.reduce("sum", g, (1,), True)
    return b.binary("sub", g, b.binary("mul", softmax, total))

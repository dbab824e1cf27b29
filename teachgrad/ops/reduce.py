"""Reductions: sum, mean, max and min over all elements or chosen dimensions."""
from __future__ import annotations

from ..autograd.function import Context, Function
from ..tensor import Tensor


def _kept_shape(shape: tuple, axes: tuple | None) -> tuple:
    """``shape`` with the reduced axes set to 1 (the shape of a keepdim result)."""
    if axes is None:
        return (1,) * len(shape)
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _spread(grad: Tensor, ctx: Context) -> Tensor:
    """Give every reduced element the gradient of the value it went into."""
    if not ctx.keepdim and ctx.axes is not None:  # (a full reduction's 0-d grad expands as is)
        grad = grad.reshape(_kept_shape(ctx.shape, ctx.axes))
    if type(grad) is not Tensor:  # (its numpy array, when the engine runs this on arrays)
        return ctx.backend.broadcast_to(grad, ctx.shape)  # (the view expand makes)
    return grad.expand(ctx.shape)


def kept_output(ctx: Context) -> Tensor:
    """The forward's output with the reduced dimensions kept as size 1, so that it
    broadcasts against the input (what backwards of max, norms and logsumexp compare with)."""
    out = ctx.output
    return out if ctx.keepdim else out.reshape(_kept_shape(ctx.shape, ctx.axes))


class Sum(Function):
    rule = "∂(Σᵢ aᵢ)/∂aᵢ = 1: each summed element gets the whole gradient"
    formula_on_arrays = True  # (.reshape, and the expand's view made by the backend)

    @staticmethod
    def forward(ctx: Context, a: Tensor, axes: tuple | None, keepdim: bool):
        ctx.shape, ctx.axes, ctx.keepdim = a._array.shape, axes, keepdim
        return ctx.backend.reduce("sum", a._array, axes, keepdim)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return _spread(grad, ctx), None, None


class Mean(Function):
    rule = "∂(Σᵢ aᵢ / n)/∂aᵢ = 1/n"
    formula_on_arrays = True  # (as Sum's; n divides as a float on tensors and arrays alike)

    @staticmethod
    def forward(ctx: Context, a: Tensor, axes: tuple | None, keepdim: bool):
        ctx.shape, ctx.axes, ctx.keepdim = a._array.shape, axes, keepdim
        n = 1
        for i, size in enumerate(a.shape):
            if axes is None or i in axes:
                n *= size
        ctx.n = n
        total = ctx.backend.reduce("sum", a._array, axes, keepdim)
        return ctx.backend.binary("div", total, float(n))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return _spread(grad / float(ctx.n), ctx), None, None


class Amax(Function):
    """max/min over dims without indices: ties share the gradient equally (as in PyTorch)."""

    rule = "∂max(a)/∂aᵢ = 1 for the largest element (shared equally by ties), else 0"

    @staticmethod
    def forward(ctx: Context, a: Tensor, axes: tuple | None, keepdim: bool, op: str = "max"):
        ctx.shape, ctx.axes, ctx.keepdim = a._array.shape, axes, keepdim
        out = ctx.backend.reduce(op, a._array, axes, keepdim)
        ctx.save_for_backward(a)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        best = kept_output(ctx)
        winners = (a == best).to(grad.dtype)
        count = winners.sum(dim=ctx.axes, keepdim=True)
        return _spread(grad, ctx) * winners / count, None, None, None


class MaxDim(Function):
    """max/min along one dim, returning (values, indices) like ``torch.max(x, dim)``.

    The gradient goes only to the element whose index was returned.
    """

    rule = "∂max(a, dim)/∂aᵢ = 1 at the returned index, else 0"

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int, keepdim: bool, op: str = "max"):
        ctx.shape, ctx.axes, ctx.keepdim, ctx.dim = tuple(a.shape), (dim,), keepdim, dim
        backend = ctx.backend
        index = backend.arg_reduce("arg" + op, a._array, dim, True)
        values = backend.reduce(op, a._array, (dim,), True)
        ctx.index = index
        if not keepdim:
            squeezed = tuple(n for i, n in enumerate(a.shape) if i != dim)
            index = backend.reshape(index, squeezed)
            values = backend.reshape(values, squeezed)
        indices = Tensor._make(index, backend, a.device)
        ctx.mark_non_differentiable(indices)
        return values, indices

    @staticmethod
    def backward(ctx: Context, grad: Tensor, _grad_indices: Tensor):
        backend, dim = ctx.backend, ctx.dim
        positions = backend.arange(ctx.shape[dim], "int64")
        along = [1] * len(ctx.shape)
        along[dim] = ctx.shape[dim]
        positions = backend.reshape(positions, tuple(along))
        chosen = Tensor._make(backend.binary("eq", positions, ctx.index), backend, grad.device)
        return _spread(grad, ctx) * chosen.to(grad.dtype), None, None, None

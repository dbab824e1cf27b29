"""Shape operations: the data is the same, only how we look at it changes.

Their backwards undo the change: reshape back, permute back, sum out what an
expand repeated (the engine does that summing), slice a concatenation apart.
"""
from __future__ import annotations

from ..autograd.function import Context, Function
from ..tensor import Tensor


class Reshape(Function):
    rule = "∂reshape(a)/∂a: reshape the gradient back to a's shape"
    is_view = True
    formula_on_arrays = True  # (.reshape only: the same call on a tensor and an array)

    @staticmethod
    def forward(ctx: Context, a: Tensor, shape: tuple):
        ctx.shape = tuple(a.shape)
        return ctx.backend.reshape(a._array, shape)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return grad.reshape(ctx.shape), None


class Permute(Function):
    rule = "∂permute(a)/∂a: permute the gradient back with the inverse order"
    is_view = True
    formula_on_arrays = True  # (see backward: a tensor's permute is an array's transpose)

    @staticmethod
    def forward(ctx: Context, a: Tensor, axes: tuple):
        ctx.axes = axes
        return ctx.backend.permute(a._array, axes)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        inverse = [0] * len(ctx.axes)
        for i, axis in enumerate(ctx.axes):
            inverse[axis] = i
        if type(grad) is Tensor:
            return grad.permute(*inverse), None
        return grad.transpose(inverse), None  # (the engine runs this on a numpy array)


class Expand(Function):
    rule = "∂expand(a)/∂a: sum the gradient over the repeated dimensions"
    is_view = True

    @staticmethod
    def forward(ctx: Context, a: Tensor, shape: tuple):
        return ctx.backend.broadcast_to(a._array, shape)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return grad, None  # the engine sums it back to a's shape


class Contiguous(Function):
    rule = "∂contiguous(a)/∂a = 1 (only the memory layout changes)"
    is_view = True
    formula_on_arrays = True  # (the gradient passes through unchanged)

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        return ctx.backend.contiguous(a._array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return grad


class Clone(Function):
    rule = "∂clone(a)/∂a = 1"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        return ctx.backend.astype(a._array, a.dtype.numpy)  # astype always copies

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return grad


class Cat(Function):
    rule = "∂cat(a, b, …)/∂a: the slice of the gradient where a was placed"

    @staticmethod
    def forward(ctx: Context, *tensors: Tensor, dim: int):
        ctx.dim = dim
        ctx.sizes = [t.shape[dim] for t in tensors]
        return ctx.backend.concatenate([t._array for t in tensors], dim)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        pieces, start = [], 0
        lead = (slice(None),) * ctx.dim
        for size in ctx.sizes:
            pieces.append(grad[lead + (slice(start, start + size),)])
            start += size
        return tuple(pieces)

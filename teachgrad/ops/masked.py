"""Selecting by a mask: masked_fill and masked_select.

``x.masked_fill(mask, v)`` is ``where(mask, v, x)``: its gradient goes to ``x`` where the
mask is False and to ``v`` (summed) where it is True. ``x.masked_select(mask)`` is
``x[mask]`` with the two broadcast first: a gather of the True positions, whose
backward scatters the gradient back to them. The number of True values decides the
result's size, so it is read on the host (PyTorch synchronises here too).
"""
from __future__ import annotations

from typing import Any

from .. import dtypes
from ..autograd.function import Context, Function
from ..device import common_device
from ..tensor import Tensor
from . import indexing
from .dispatch import broadcast_shapes
from .gather_scatter import in_place, in_shape, read_at, read_back


class MaskedFill(Function):
    rule = "∂masked_fill(a, mask, v)/∂a: the gradient where mask is False, else 0;  ∂/∂v: its sum where True"

    @staticmethod
    def forward(ctx: Context, a: Tensor, mask: Tensor, value: Any):
        ctx.mask = mask._array
        filler = value._array if isinstance(value, Tensor) else value
        return ctx.backend.where(mask._array, filler, a._array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        backend, da, dvalue = ctx.backend, None, None
        zero = backend.zeros((), grad.dtype.numpy)
        if ctx.needs_input_grad[0]:  # (the engine sums it back to a's shape)
            da = Tensor._make(backend.where(ctx.mask, zero, grad._array), backend, grad.device)
        if ctx.needs_input_grad[2]:
            filled = Tensor._make(backend.where(ctx.mask, grad._array, zero), backend, grad.device)
            dvalue = filled.sum()
        return da, None, dvalue


class MaskedSelect(Function):
    rule = "∂masked_select(a, mask)/∂a: the gradient goes back to the selected elements, 0 elsewhere"

    @staticmethod
    def forward(ctx: Context, a: Tensor, mask: Tensor):
        return read_at(ctx, a, indexing.normalize_index(a, mask))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return read_back(ctx, grad), None


def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:  # noqa: A002
    """``value`` where ``mask`` is True, ``input`` elsewhere (mask and input broadcast)."""
    if not isinstance(mask, Tensor) or mask.dtype is not dtypes.bool_:
        got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{got}. Fix: compare to make one, e.g. x.masked_fill(x < 0, 0.0)")
    common_device([input, mask], "masked_fill")
    broadcast_shapes(tuple(input.shape), tuple(mask.shape), "masked_fill")
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got "
                               f"tensor with {value.ndim} dimension(s).")
        common_device([input, value], "masked_fill")
        value = value.to(input.dtype)
    elif isinstance(value, (bool, int, float)):
        value = input.dtype.numpy.type(value).item()
    else:
        raise TypeError(f"masked_fill(): 'value' must be a number or a 0-d tensor, not "
                        f"{type(value).__name__}")
    return MaskedFill.apply(input, mask, value)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:  # noqa: A002
    """The elements of ``input`` where ``mask`` is True, as a 1-D tensor (both broadcast)."""
    if not isinstance(mask, Tensor) or mask.dtype is not dtypes.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask. Fix: compare to make "
                           "one, e.g. x.masked_select(x > 0)")
    common_device([input, mask], "masked_select")
    shape = broadcast_shapes(tuple(input.shape), tuple(mask.shape), "masked_select")
    full = in_shape(input.expand(shape) if tuple(input.shape) != shape else input, shape or (1,))
    return MaskedSelect.apply(full, in_shape(mask.expand(shape), shape or (1,)))


def masked_fill_(self: Tensor, mask: Tensor, value: Any) -> Tensor:
    if isinstance(mask, Tensor):  # the mask may broadcast to self, not widen it
        shape = broadcast_shapes(tuple(self.shape), tuple(mask.shape), "masked_fill_")
        if shape != tuple(self.shape):
            raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the "
                               f"broadcast shape {list(shape)}")
    return in_place(self, lambda old: masked_fill(old, mask, value), value)


TENSOR_METHODS = {"masked_fill": masked_fill, "masked_select": masked_select,
                  "masked_fill_": masked_fill_}

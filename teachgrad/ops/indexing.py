"""Indexing: ``x[i]``, ``x[1:3, None]``, ``x[idx_tensor]`` and assignment into them."""
from __future__ import annotations

from typing import Any

from .. import dtypes
from ..autograd import grad_mode
from ..autograd.function import Context, Function
from ..tensor import Tensor


def normalize_index(t: Tensor, index: Any) -> tuple:
    """Turn any index into a tuple of int/slice/None/Ellipsis/backend arrays, checked."""
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    for item in index:
        if isinstance(item, Tensor):
            if item.device != t.device:
                raise RuntimeError(
                    f"indices are on {item.device} but the tensor is on {t.device}. "
                    f"Fix: move the indices with .to('{t.device}')"
                )
            if item.dtype not in (dtypes.int64, dtypes.bool_):
                raise IndexError(f"tensors used as indices must be long or bool, not {item.dtype}")
            out.append(item._array)
        elif isinstance(item, list):
            out.append(_as_index_array(t, item))
        elif isinstance(item, (int, slice)) or item is None or item is Ellipsis:
            out.append(item)
        elif hasattr(item, "__index__"):
            out.append(int(item))
        else:
            raise IndexError(f"unsupported index {item!r}: use ints, slices, None, ... or integer tensors")
    _check_bounds(t, out)
    return tuple(out)


def _as_index_array(t: Tensor, items: list) -> Any:
    from ..tensor import tensor
    return tensor(items, device=t.device)._array


def _check_bounds(t: Tensor, index: list) -> None:
    """Integer indices out of range get PyTorch's message instead of a backend error."""
    def width(item: Any) -> int:  # how many dimensions an index item consumes
        if item is None:
            return 0
        if hasattr(item, "dtype") and item.dtype == bool:
            return item.ndim
        return 1

    used = sum(width(i) for i in index if i is not Ellipsis)
    if used > t.ndim:
        raise IndexError(f"too many indices for tensor of dimension {t.ndim}")
    dim = 0
    for item in index:
        if item is Ellipsis:
            dim += t.ndim - used
            continue
        if isinstance(item, int):
            size = t.shape[dim]
            if not -size <= item < size:
                raise IndexError(f"index {item} is out of bounds for dimension {dim} with size {size}")
        dim += width(item)


class Index(Function):
    rule = "∂a[i]/∂a: the gradient goes back to the positions that were read (repeats add up)"
    is_view = True  # basic indexing (ints, slices) gives a view

    @staticmethod
    def forward(ctx: Context, a: Tensor, index: tuple):
        ctx.shape, ctx.dtype, ctx.index = tuple(a.shape), a.dtype.numpy, index
        return ctx.backend.getitem(a._array, index)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        full = ctx.backend.index_add(ctx.shape, ctx.dtype, ctx.index, grad._array)
        return Tensor._make(full, ctx.backend, grad.device), None


def getitem(t: Tensor, index: Any) -> Tensor:
    return Index.apply(t, normalize_index(t, index))


def setitem(t: Tensor, index: Any, value: Any) -> None:
    """``t[index] = value`` in place; allowed where PyTorch's leaf rules allow it."""
    value_needs_grad = isinstance(value, Tensor) and value.requires_grad
    if grad_mode.is_grad_enabled() and (t.requires_grad or value_needs_grad):
        if t.requires_grad and t.is_leaf:
            t._check_inplace()
        raise RuntimeError(
            "assigning into a tensor that is part of the graph is not supported by teachgrad. "
            "Fix: build the result out of place (tg.where, tg.cat), or do it under tg.no_grad()."
        )
    idx = normalize_index(t, index)
    if isinstance(value, Tensor):
        if value.device != t.device:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, "
                f"{t.device} and {value.device} (in setitem). Fix: move the value with .to('{t.device}')"
            )
        value = value.detach().to(t.dtype)._array
    elif not isinstance(value, (int, float, bool)):
        from ..tensor import tensor
        value = tensor(value, dtype=t.dtype, device=t.device)._array
    if not isinstance(value, (int, float, bool)):
        _check_value_fits(t, idx, value)
    t._backend.setitem(t._array, idx, value)
    t._bump_version()


def _check_value_fits(t: Tensor, idx: tuple, value: Any) -> None:
    """``t[idx] = value`` needs value to broadcast to the shape of ``t[idx]``."""
    backend = t._backend
    target = backend.shape(backend.getitem(t._array, idx))
    given = backend.shape(value)
    while len(given) > len(target) and given[0] == 1:  # extra leading 1s are fine (numpy too)
        given = given[1:]
    fits = len(given) <= len(target) and all(
        g == 1 or g == n for g, n in zip(reversed(given), reversed(target)))
    if not fits:
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(given)} cannot be broadcast to "
            f"indexing result of shape {list(target)}"
        )

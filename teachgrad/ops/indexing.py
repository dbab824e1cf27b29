"""Indexing: ``x[i]``, ``x[1:3, None]``, ``x[idx_tensor]``, ``x[mask]`` and assignment into them.

Every index is checked here, on the host, before a backend sees it: a boolean
mask becomes the integer positions of its ``True`` elements (``mask.nonzero()``,
numpy's rule too), and integer index arrays are bounds-checked. Both read the
index values, so on ``cuda`` they copy the (small) index array to the host --
PyTorch synchronises for a mask as well, because the result's size depends on it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes
from ..autograd import grad_mode
from ..autograd.function import Context, Function
from ..cuda_devices import on_tensors_device
from ..tensor import Tensor


def normalize_index(t: Tensor, index: Any) -> tuple:
    """Turn any index into a tuple of int/slice/None/Ellipsis/int64 backend arrays, checked."""
    if not isinstance(index, tuple):
        index = (index,)
    items = [_host_item(t, item) for item in index]
    used = sum(_width(i) for i in items)
    if used > t.ndim:
        raise IndexError(f"too many indices for tensor of dimension {t.ndim} "
                         f"(the index uses {used} dimensions)")
    out: list = []
    dim = 0
    for item in items:
        if item is Ellipsis:
            dim += t.ndim - used
            out.append(item)
        elif isinstance(item, np.ndarray) and item.dtype == np.bool_:
            out.extend(_mask_positions(t, item, dim))
            dim += item.ndim
        elif isinstance(item, np.ndarray):
            _check_in_range(item, t.shape[dim], dim)
            out.append(_to_backend(t, item))
            dim += 1
        elif isinstance(item, int):
            size = t.shape[dim]
            if not -size <= item < size:
                raise IndexError(f"index {item} is out of bounds for dimension {dim} with size {size}")
            out.append(item)
            dim += 1
        else:  # slice or None
            out.append(item)
            dim += item is not None
    return tuple(out)


def _host_item(t: Tensor, item: Any) -> Any:
    """One index item as int/slice/None/Ellipsis, or a host numpy array (int64 or bool)."""
    if isinstance(item, bool) or isinstance(item, np.bool_):
        return np.array(bool(item))  # x[True] adds a dimension, as a 0-d mask
    if isinstance(item, (int, np.integer)):
        return int(item)
    if isinstance(item, slice) or item is None or item is Ellipsis:
        return item
    if isinstance(item, Tensor):
        if item.device != t.device:
            raise RuntimeError(
                f"indices are on {item.device} but the tensor is on {t.device}. "
                f"Fix: move the indices with .to('{t.device}')"
            )
        if item.dtype not in (dtypes.int64, dtypes.bool_):
            raise IndexError(f"tensors used as indices must be long or bool, not {item.dtype}. "
                             "Fix: convert them with .long()")
        host = index_values(item)
        return int(host) if host.ndim == 0 and host.dtype != np.bool_ else host  # t[tensor(1)] is t[1]
    if isinstance(item, range):  # x[range(3)] is x[[0, 1, 2]]
        item = list(item)
    if isinstance(item, (list, np.ndarray)):
        arr = np.asarray(item)
        if arr.size == 0:
            arr = arr.astype(np.int64)  # x[[]] selects nothing
        if arr.dtype.kind not in "iub":
            raise IndexError(f"index arrays must hold integers or bools, not {arr.dtype}. "
                             "Fix: index with ints, e.g. x[[0, 2]]")
        if arr.ndim == 0 and arr.dtype != np.bool_:
            return int(arr)
        return arr if arr.dtype == np.bool_ else arr.astype(np.int64)
    if hasattr(item, "__index__"):
        return int(item.__index__())
    kind = IndexError if isinstance(item, float) else TypeError  # (PyTorch's classes)
    raise kind(f"unsupported index {item!r}: use ints, slices, None, ..., "
               "integer or bool tensors (or lists of ints)")


def index_values(item: Tensor) -> np.ndarray:
    """An index tensor's values, read on the host. While tracing, ``tg.jit`` watches this
    read: the values decide which elements are taken, so a graph cannot record them."""
    return item._host()


def _width(item: Any) -> int:
    """How many dimensions of the indexed tensor an index item consumes."""
    if item is None or item is Ellipsis:
        return 0
    if isinstance(item, np.ndarray) and item.dtype == np.bool_:
        return item.ndim
    return 1


def _mask_positions(t: Tensor, mask: np.ndarray, dim: int) -> list:
    """A bool mask over dims ``dim..`` as integer index arrays of its True positions."""
    if mask.ndim == 0:  # x[True] is x[None]
        if not mask:
            raise IndexError("teachgrad does not support indexing with False (it selects "
                             "nothing). Fix: use x[None][:0] for an empty result.")
        return [None]
    covered = tuple(t.shape[dim:dim + mask.ndim])
    for k, (m, n) in enumerate(zip(mask.shape, covered)):
        if m != n:
            raise IndexError(
                f"The shape of the mask {list(mask.shape)} at index {k} does not match the "
                f"shape of the indexed tensor {list(covered)} at index {dim + k}"
            )
    return [_to_backend(t, p.astype(np.int64)) for p in np.nonzero(mask)]


def _check_in_range(positions: np.ndarray, size: int, dim: int) -> None:
    bad = positions[(positions < -size) | (positions >= size)]
    if bad.size:
        raise IndexError(f"index {int(bad.flat[0])} is out of bounds for dimension {dim} "
                         f"with size {size}")


def _to_backend(t: Tensor, arr: np.ndarray) -> Any:
    return t._backend.from_numpy(np.ascontiguousarray(arr, dtype=np.int64))


class Index(Function):
    rule = "∂a[i]/∂a: the gradient goes back to the positions that were read (repeats add up)"
    is_view = True  # basic indexing (ints, slices) gives a view
    formula_on_arrays = True  # (backward computes on the arrays either way; see there)
    fresh_gradients = True  # (a new array of a's shape)

    @staticmethod
    def forward(ctx: Context, a: Tensor, index: tuple):
        ctx.shape, ctx.dtype, ctx.index = tuple(a.shape), a.dtype.numpy, index
        return ctx.backend.getitem(a._array, index)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        # (on a tensor, or on its numpy array when the engine runs formulas on arrays)
        on_tensor = type(grad) is Tensor
        full = ctx.backend.index_add(ctx.shape, ctx.dtype, ctx.index,
                                     grad._array if on_tensor else grad)
        return (Tensor._make(full, ctx.backend, grad.device) if on_tensor else full), None

    @staticmethod
    def gradient_block(ctx: Context) -> tuple | None:
        """``(dim, start, stop)`` when the index is slices that keep every position but
        ``start:stop`` (step 1) along one dimension ``dim`` (``split``'s and ``chunk``'s
        pieces), else None (see ``Function.gradient_block``)."""
        block = None
        for dim, item in enumerate(ctx.index):
            if type(item) is not slice:
                return None  # (an int, None, ..., an index array)
            start, stop, step = item.indices(ctx.shape[dim])
            if step != 1:
                return None
            if start != 0 or stop != ctx.shape[dim]:
                if block is not None or stop <= start:
                    return None  # (a block in two dimensions, or an empty one)
                block = (dim, start, stop)
        return block


@on_tensors_device
def getitem(t: Tensor, index: Any) -> Tensor:
    return Index.apply(t, normalize_index(t, index))


class IndexPut(Function):
    rule = ("∂(a[i] = v)/∂a: the gradient, with zeros where a was overwritten;  "
            "∂/∂v: the gradient read at i (summed where v was broadcast)")

    @staticmethod
    def forward(ctx: Context, a: Tensor, value: Any, index: tuple):
        ctx.index, ctx.dtype = index, a.dtype.numpy
        ctx.backend.setitem(a._array, index, value._array if isinstance(value, Tensor) else value)
        return a._array  # written in place: the result is a's own storage

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        backend, da, dv = ctx.backend, None, None
        if ctx.needs_input_grad[0]:
            kept = backend.astype(grad._array, ctx.dtype)  # a copy, then zero what was replaced
            backend.setitem(kept, ctx.index, 0)
            da = Tensor._make(kept, backend, grad.device)
        if ctx.needs_input_grad[1]:
            dv = Tensor._make(backend.getitem(grad._array, ctx.index), backend, grad.device)
        return da, dv, None


@on_tensors_device
def setitem(t: Tensor, index: Any, value: Any) -> None:
    """``t[index] = value`` in place; recorded for autograd where PyTorch's leaf rules allow it."""
    t._check_writable()
    value_needs_grad = isinstance(value, Tensor) and value.requires_grad
    record = grad_mode.is_grad_enabled() and (t.requires_grad or value_needs_grad)
    if record and t.requires_grad and t.is_leaf:
        t._check_inplace()  # the leaf rule's error
    if record and t.grad_fn is not None and t.grad_fn.function.is_view:
        raise RuntimeError(
            f"assigning into a view (made by {t.grad_fn.name()}) while autograd records is not "
            "supported by teachgrad: the tensor it views would not see the change in its "
            "gradient. Fix: assign into the original tensor, or .clone() the view first."
        )
    idx = normalize_index(t, index)
    if isinstance(value, Tensor):
        if value.device != t.device:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, "
                f"{t.device} and {value.device} (in setitem). Fix: move the value with .to('{t.device}')"
            )
        value = value.to(t.dtype) if record else value.detach().to(t.dtype)
    elif not isinstance(value, (int, float, bool)):
        from ..tensor import tensor
        value = tensor(value, dtype=t.dtype, device=t.device)
    if isinstance(value, Tensor):
        _check_value_fits(t, idx, value._array)
    if record:
        out = IndexPut.apply(t, value, idx)
        t.grad_fn, t._output_nr, t.requires_grad = out.grad_fn, out._output_nr, True
    else:
        t._backend.setitem(t._array, idx, value._array if isinstance(value, Tensor) else value)
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

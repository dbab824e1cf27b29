"""The public shape operations (``tg.reshape``, ``x.view``, ``tg.cat``, ...), re-exported
by :mod:`.functional`: each checks its arguments, then calls one Function of :mod:`.shape`."""
from __future__ import annotations

import builtins
from typing import Any, Sequence

from .. import dtypes
from ..backends.view_strides import view_strides
from ..device import common_device
from ..tensor import Size, Tensor
from . import shape as sh
from .dispatch import normalize_dim, normalize_dims



def _shape_arg(shape: tuple) -> tuple:
    """Sizes given as ``f(2, 3)`` or ``f((2, 3))``, checked to be ints (``2.5`` is refused)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        shape = tuple(shape[0])
    for s in shape:  # (the usual case, plain ints, in one quick pass: this runs on every view)
        if type(s) is not int:
            break
    else:
        return shape
    for s in shape:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"sizes must be ints, got {s!r} ({type(s).__name__}) in {list(shape)}. "
                            "Fix: pass whole numbers, e.g. reshape(2, 3)")
    return tuple(s.__index__() for s in shape)


def view(a: Tensor, *shape: Any) -> Tensor:
    """The same storage read in a new shape; refuses when that needs a copy (use reshape)."""
    if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)) and \
            not hasattr(shape[0], "__index__"):
        raise TypeError(f"view() takes a shape, not {shape[0]!r}: teachgrad does not support "
                        "view(dtype). Fix: use .to(dtype) for a converted copy")
    shape = _resolve_shape(a, _shape_arg(shape))
    # (contiguous data reads as any shape of its size: only strided data needs the walk)
    if not a.is_contiguous() and view_strides(tuple(a.shape), a.stride(), shape) is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        )
    return _reshape_to(a, shape)


def _resolve_shape(a: Tensor, shape: tuple) -> tuple:
    """``shape`` with its one ``-1`` worked out, checked against ``a``'s element count."""
    n = a.numel()
    known, inferred, bad = 1, 0, None
    for i, s in enumerate(shape):  # (one pass: this runs on every reshape and view)
        if s >= 0:
            known *= s
        elif s == -1:
            inferred += 1
        elif bad is None:
            bad = i
    if bad is not None:
        raise RuntimeError(f"invalid shape dimension {shape[bad]} at index {bad} of shape "
                           f"{list(shape)}: sizes must be >= 0, or -1 for one inferred size")
    if inferred > 1:
        raise RuntimeError("only one dimension can be inferred (-1)")
    if inferred:
        if known == 0 or n % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {n}")
        return tuple(n // known if s == -1 else s for s in shape)
    if known != n:
        raise RuntimeError(
            f"shape '{list(shape)}' is invalid for input of size {n}: the new shape must "
            f"hold exactly {n} elements (current shape {list(a.shape)})"
        )
    return shape


def reshape(a: Tensor, *shape: Any) -> Tensor:
    return _reshape_to(a, _resolve_shape(a, _shape_arg(shape)))


def _reshape_to(a: Tensor, shape: tuple) -> Tensor:
    """``a`` in ``shape``, already checked to hold its elements."""
    if shape == tuple(a.shape):
        return sh.Reshape.apply(a, shape) if a.requires_grad else a.detach()
    return sh.Reshape.apply(a, shape)


def flatten(a: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if a.ndim == 0:
        return reshape(a, 1)
    s, e = normalize_dim(start_dim, a.ndim), normalize_dim(end_dim, a.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    middle = 1
    for n in a.shape[s:e + 1]:
        middle *= n
    return reshape(a, tuple(a.shape[:s]) + (middle,) + tuple(a.shape[e + 1:]))


def unsqueeze(a: Tensor, dim: int) -> Tensor:
    d = normalize_dim(dim, a.ndim + 1)
    return reshape(a, tuple(a.shape[:d]) + (1,) + tuple(a.shape[d:]))


def squeeze(a: Tensor, dim: Any = None) -> Tensor:
    if dim is None:
        return reshape(a, tuple(n for n in a.shape if n != 1))
    dims = normalize_dims(dim, a.ndim) or ()
    return reshape(a, tuple(n for i, n in enumerate(a.shape) if not (i in dims and n == 1)))


def permute(a: Tensor, *dims: Any) -> Tensor:
    dims = _shape_arg(dims)
    axes = tuple(normalize_dim(d, a.ndim) for d in dims)
    if sorted(axes) != list(range(a.ndim)):
        raise RuntimeError(
            f"permute(): dims {list(dims)} must be a reordering of all {a.ndim} dimensions"
        )
    return sh.Permute.apply(a, axes)


def transpose(a: Tensor, dim0: int, dim1: int) -> Tensor:
    axes = list(range(a.ndim))
    d0, d1 = normalize_dim(dim0, a.ndim), normalize_dim(dim1, a.ndim)
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return sh.Permute.apply(a, tuple(axes))


def t(a: Tensor) -> Tensor:
    if a.ndim > 2:
        raise RuntimeError(
            f"t() expects a tensor with <= 2 dimensions, but it has {a.ndim}. "
            "Fix: use transpose(dim0, dim1) or .mT"
        )
    return a if a.ndim < 2 else transpose(a, 0, 1)


def expand(a: Tensor, *shape: Any) -> Tensor:
    shape = _shape_arg(shape)
    if len(shape) < a.ndim:
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(shape)}) must be greater or equal "
            f"to the number of dimensions in the tensor ({a.ndim})"
        )
    current = tuple(a.shape)
    lead = len(shape) - len(current)
    for i in range(lead - 1, -1, -1):  # new leading dimensions: no size to keep (-1)
        if shape[i] == -1:
            raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a "
                               f"leading, non-existing dimension {i}")
        if shape[i] < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {shape[i]}: "
                               f"{list(shape)}")
    full = tuple(current[i - lead] if s == -1 else s for i, s in enumerate(shape))
    for i, n in enumerate(current):
        if n != 1 and n != full[lead + i]:
            raise RuntimeError(
                f"The expanded size of the tensor ({full[lead + i]}) must match the existing size "
                f"({n}) at non-singleton dimension {lead + i}. Target sizes: {list(shape)}. "
                f"Tensor sizes: {list(current)}"
            )
    if full == current:
        return a
    return sh.Expand.apply(a, full)


def repeat(a: Tensor, *sizes: Any) -> Tensor:
    """``a`` tiled ``sizes[i]`` times along each dimension (like ``np.tile``), as a copy.

    Built from three shape operations, so it needs no backward of its own: a view with
    a size-1 axis before each dimension, an expand of those axes to the counts (whose
    gradient sums over the copies), and a reshape that merges each pair.
    """
    sizes = _shape_arg(sizes)
    if len(sizes) < a.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           f"of dimensions of tensor (repeat{list(sizes)} of a {a.ndim}-D tensor)")
    if any(r < 0 for r in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension: repeat{list(sizes)}")
    shape = (1,) * (len(sizes) - a.ndim) + tuple(a.shape)
    paired = tuple(d for n in shape for d in (1, n))
    copies = tuple(d for r, n in zip(sizes, shape) for d in (r, n))
    return reshape(expand(reshape(a, paired), copies), tuple(r * n for r, n in zip(sizes, shape)))


def contiguous(a: Tensor) -> Tensor:
    return sh.Contiguous.apply(a)


def clone(a: Tensor) -> Tensor:
    return sh.Clone.apply(a)


def _tensor_list(name: str, tensors: Any) -> list[Tensor]:
    """The tensors of ``cat``/``stack``: a list or tuple of tensors, never one tensor's rows."""
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}(): argument 'tensors' must be a list or tuple of Tensors, not "
                        f"{type(tensors).__name__}. Fix: {name}([a, b])")
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}(): expected Tensor as element {i} in argument 'tensors', but "
                            f"got {type(x).__name__}. Fix: make it a tensor with tg.tensor(...)")
    if not tensors:
        kind = ValueError if name == "cat" else RuntimeError  # (PyTorch's classes)
        raise kind(f"{name}(): expected a non-empty list of tensors")
    return list(tensors)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = _tensor_list("cat", tensors)
    for i, x in enumerate(tensors):
        if x.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated. "
                               "Fix: use tg.stack to join 0-d tensors, or unsqueeze them first")
    common_device(tensors, "cat")
    first = tensors[0]
    d = normalize_dim(dim, first.ndim)
    dt = first.dtype
    for x in tensors[1:]:
        dt = dtypes.promote_types(dt, x.dtype)
    for i, x in enumerate(tensors):
        same = x.ndim == first.ndim and builtins.all(
            a == b for j, (a, b) in enumerate(zip(x.shape, first.shape)) if j != d)
        if not same:
            raise RuntimeError(
                f"cat(): sizes of tensors must match except in dimension {d}: tensor 0 has "
                f"shape {list(first.shape)} but tensor {i} has shape {list(x.shape)}"
            )
    tensors = [x.to(dt) for x in tensors]
    return sh.Cat.apply(*tensors, dim=d)


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = _tensor_list("stack", tensors)
    for i, x in enumerate(tensors):
        if x.shape != tensors[0].shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} "
                f"at entry 0 and {list(x.shape)} at entry {i}"
            )
    d = normalize_dim(dim, tensors[0].ndim + 1)
    return cat([unsqueeze(x, d) for x in tensors], d)

"""Shared plumbing for ops: argument checks, dtype promotion, broadcasting.

Every check here runs before any Function does work, so a bad call raises a
clear error and changes nothing.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import dtypes
from ..device import common_device
from ..tensor import Tensor, tensor

Number = (int, float, bool)


def value(x: Any) -> Any:
    """The backend array of a tensor, or a Python scalar unchanged (for forwards)."""
    return x._array if isinstance(x, Tensor) else x


def as_tensor_like(x: Any, like: Tensor) -> Tensor:
    """Turn lists/numpy arrays into a tensor on ``like``'s device (tensors pass through)."""
    if isinstance(x, Tensor):
        return x
    return tensor(x, device=like.device)


def scaled(a: Any, b: Any, alpha: Any) -> Any:
    """``alpha * b`` for ``add(a, b, alpha=)``/``sub``: lists become tensors first
    (``[1.0] * 3`` would repeat the list)."""
    if alpha == 1:
        return b
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"alpha must be a number, not {type(alpha).__name__}")
    like = a if isinstance(a, Tensor) else b
    if not isinstance(b, (Tensor, int, float)):
        b = as_tensor_like(b, like)
    kinds = [x.dtype for x in (a, b) if isinstance(x, Tensor)]
    if isinstance(alpha, float) and not any(d.is_floating_point for d in kinds) \
            and not isinstance(a, float) and not isinstance(b, float):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                           "point number. Fix: convert the tensor with .float() first")
    return b * alpha


def broadcast_shapes(a: tuple, b: tuple, op: str) -> tuple:
    """The shape of ``a op b`` under broadcasting, or a PyTorch-style error naming both."""
    if a == b:
        return a
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            dim = max(len(a), len(b)) - i
            raise RuntimeError(
                f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                f"non-singleton dimension {dim} (in {op}: shapes {list(a)} and {list(b)} "
                "cannot broadcast). Fix: reshape or unsqueeze one of them so that each "
                "dimension is equal or 1."
            )
        out.append(max(x, y))
    return tuple(reversed(out))


def prepare_binary(a: Any, b: Any, op: str, *, float_result: bool = False) -> tuple[Any, Any]:
    """Promote dtypes and check shapes for ``a op b`` (at least one is a tensor).

    Python numbers stay numbers (they travel to kernels as arguments); a tensor
    is converted only when the result needs a different dtype.
    """
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if ta and tb:
        if a.dtype is b.dtype:
            dt = a.dtype
        elif (a.ndim == 0) == (b.ndim == 0):
            dt = dtypes.promote_types(a.dtype, b.dtype)
        else:  # a 0-d tensor does not widen a dimensioned one of the same kind
            dt = dtypes.result_type(a, b)
        if a._array.shape != b._array.shape:
            broadcast_shapes(tuple(a._array.shape), tuple(b._array.shape), op)
    else:
        t, s = (a, b) if ta else (b, a)
        if not isinstance(s, Number):
            if isinstance(s, (np.ndarray, np.generic, list, tuple)):
                s = as_tensor_like(s, t)
                return prepare_binary(t, s, op, float_result=float_result) if ta else \
                    prepare_binary(s, t, op, float_result=float_result)
            raise TypeError(f"unsupported operand type for {op}: tensor and {type(s).__name__}")
        dt = dtypes.scalar_result_type(t.dtype, s)
        s = float(s) if dt.is_floating_point else bool(s) if dt is dtypes.bool_ else int(s)
        a, b = (t, s) if ta else (s, t)
    if float_result and not dt.is_floating_point:
        dt = dtypes.get_default_dtype()
    if isinstance(a, Tensor) and a.dtype is not dt:
        a = a.to(dt)
    if isinstance(b, Tensor) and b.dtype is not dt:
        b = b.to(dt)
    return a, b


def normalize_dim(dim: int, ndim: int) -> int:
    """A dimension index in ``[0, ndim)``; negative counts from the end."""
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"dim must be an int, not {type(dim).__name__} {dim!r}. Fix: e.g. dim=1")
    if not lo <= dim <= hi:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})"
        )
    return int(dim) % max(ndim, 1)


def normalize_dims(dim: int | Sequence[int] | None, ndim: int) -> tuple[int, ...] | None:
    """``dim`` as a sorted tuple of non-negative axes, or None for 'all of them'.

    An empty ``dim`` (``()`` or ``[]``) also means all of them, as in PyTorch.
    """
    if dim is None:
        return None
    if isinstance(dim, (int, np.integer)):
        dims = (dim,)
    elif isinstance(dim, (tuple, list)):
        dims = tuple(dim)
    else:
        raise TypeError(f"dim must be an int or a tuple of ints, not {type(dim).__name__} {dim!r}. "
                        "Fix: e.g. sum(dim=1) or sum(dim=(0, 1))")
    if not dims:
        return None
    axes = tuple(sorted(normalize_dim(d, ndim) for d in dims))
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"dim {dims} names the same dimension twice")
    return axes if ndim else ()


def require_float(t: Tensor) -> Tensor:
    """Integer/bool tensors become the default float dtype for float-valued ops (exp, log...)."""
    return t if t.dtype.is_floating_point else t.to(dtypes.get_default_dtype())


# -- addcmul, addcdiv and lerp (their forms in place check the same) ----------------------


def check_pointwise(name: str, tensors: dict[str, Any], numbers: dict[str, Any]) -> None:
    """The arguments of addcmul, addcdiv and lerp: tensors where tensors are due (PyTorch
    refuses numbers there too), numbers (not bools) for ``value``."""
    for what, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): argument '{what}' must be a tensor, not "
                            f"{type(t).__name__}")
    for what, v in numbers.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name}(): argument '{what}' must be a number, not "
                            f"{type(v).__name__}")


def check_true_division(name: str, tensor1: Tensor, tensor2: Tensor) -> None:
    """addcdiv's quotient is a true division: two integer tensors are refused, as in PyTorch."""
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        raise RuntimeError(
            f"Integer division with {name} is not supported (PyTorch dropped it too). "
            f"Fix: make one of the tensors float, e.g. {name}(x, t1.float(), t2)")


def number_in_dtype(weight: Any, dtype: Any) -> Any:
    """A number weight rounded to the tensors' dtype, as PyTorch's kernel takes it (then
    ``1 - weight`` is exact, and the same as in that dtype)."""
    return weight if isinstance(weight, Tensor) else float(dtype.numpy.type(weight))


def check_lerp(name: str, input: Tensor, end: Tensor, weight: Any) -> None:  # noqa: A002
    """lerp's arguments: two tensors of one floating-point dtype, a number or tensor weight."""
    check_pointwise(name, {"input": input, "end": end}, {})
    if not isinstance(weight, Tensor):
        check_pointwise(name, {}, {"weight": weight})
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name}: expected a floating-point tensor, got {input.dtype}. "
                           "Fix: convert with .float() first")
    for what, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t.dtype is not input.dtype:
            raise RuntimeError(f"{name}: expected dtype {input.dtype} for `{what}` but got "
                               f"dtype {t.dtype}. Fix: convert it with .to({input.dtype})")
    common_device([t for t in (input, end, weight) if isinstance(t, Tensor)], name)

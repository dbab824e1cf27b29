"""The public operations (``tg.exp``, ``tg.matmul``, ``tg.cat``, ...).

Each checks and normalises its arguments, then calls one Function's ``apply``.
Tensor methods (``x.exp()``, ``x @ y``) are these same functions.
"""
from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

from .. import dtypes
from ..autograd.cast_points import cast_point
from ..cuda_devices import on_tensors_device
from ..device import common_device
from ..tensor import Tensor
from . import activation, elementwise as ew, indexing, linalg, pointwise_activation as pa, reduce as red
from .dispatch import (
    broadcast_shapes, check_lerp, check_pointwise, check_true_division, normalize_dim,
    normalize_dims, number_in_dtype, prepare_binary, require_float, scaled,
)
from .functional_shapes import (  # noqa: F401 (the shape operations are public here too)
    cat, clone, contiguous, expand, flatten, permute, repeat, reshape, squeeze, stack, t,
    transpose, unsqueeze, view,
)

# -- arithmetic ------------------------------------------------------------------


def add(a: Any, b: Any, alpha: float = 1) -> Tensor:
    a, b = prepare_binary(a, scaled(a, b, alpha), "add")
    return ew.Add.apply(a, b)


def sub(a: Any, b: Any, alpha: float = 1) -> Tensor:
    a, b = prepare_binary(a, scaled(a, b, alpha), "sub")
    return ew.Sub.apply(a, b)


def mul(a: Any, b: Any) -> Tensor:
    return ew.Mul.apply(*prepare_binary(a, b, "mul"))


def div(a: Any, b: Any) -> Tensor:
    return ew.Div.apply(*prepare_binary(a, b, "div", float_result=True))


def pow(a: Any, b: Any) -> Tensor:  # noqa: A001 (PyTorch's name)
    a, b = prepare_binary(a, b, "pow")
    if not (a.dtype if isinstance(a, Tensor) else b.dtype).is_floating_point:
        negative = b < 0 if not isinstance(b, Tensor) else bool((b < 0).any())
        if negative:
            raise RuntimeError("Integers to negative integer powers are not allowed. "
                               "Fix: make the base float, e.g. x.float() ** -1")
    return ew.Pow.apply(a, b)


def neg(a: Tensor) -> Tensor:
    if a.dtype is dtypes.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. "
                           "Fix: to invert a mask, use mask == False (or 1 - mask.long())")
    return ew.Neg.apply(a)


def _unary(fn: type, a: Tensor) -> Tensor:
    return fn.apply(require_float(a))


def exp(a: Tensor) -> Tensor:
    return _unary(ew.Exp, a)


def log(a: Tensor) -> Tensor:
    return _unary(ew.Log, a)


def sqrt(a: Tensor) -> Tensor:
    return _unary(ew.Sqrt, a)


def sin(a: Tensor) -> Tensor:
    return _unary(ew.Sin, a)


def cos(a: Tensor) -> Tensor:
    return _unary(ew.Cos, a)


def tanh(a: Tensor) -> Tensor:
    return _unary(ew.Tanh, a)


def sigmoid(a: Tensor) -> Tensor:
    return _unary(ew.Sigmoid, a)


def erf(a: Tensor) -> Tensor:
    return _unary(pa.Erf, a)


def log1p(a: Tensor) -> Tensor:
    """``log(1 + a)``, exact for tiny ``a`` (where ``1 + a`` would round to 1)."""
    return _unary(pa.Log1p, a)


def expm1(a: Tensor) -> Tensor:
    """``exp(a) - 1``, exact for tiny ``a``."""
    return _unary(pa.Expm1, a)


def abs(a: Tensor) -> Tensor:  # noqa: A001
    return ew.Abs.apply(a)


def relu(a: Tensor) -> Tensor:
    return ew.Relu.apply(a)


# -- two operations in one call (what optimizers update their state with) --------------


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: float = 1) -> Tensor:  # noqa: A002
    """``input + value * tensor1 * tensor2``, broadcasting all three (PyTorch's ``addcmul``)."""
    check_pointwise("addcmul", {"input": input, "tensor1": tensor1, "tensor2": tensor2},
                    {"value": value})
    return add(input, mul(tensor1, tensor2), alpha=value)


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: float = 1) -> Tensor:  # noqa: A002
    """``input + value * tensor1 / tensor2``, broadcasting all three (PyTorch's ``addcdiv``)."""
    check_pointwise("addcdiv", {"input": input, "tensor1": tensor1, "tensor2": tensor2},
                    {"value": value})
    check_true_division("addcdiv", tensor1, tensor2)
    return add(input, div(tensor1, tensor2), alpha=value)


def lerp(input: Tensor, end: Tensor, weight: Any) -> Tensor:  # noqa: A002
    """``input + weight * (end - input)``: the straight line from ``input`` (weight 0) to
    ``end`` (weight 1); ``weight`` is a number or a tensor (broadcasting).

    As in PyTorch, where ``|weight| >= 0.5`` the same line is computed from the other
    end, ``end - (1 - weight) * (end - input)``, so a weight of 1 gives ``end`` exactly.
    """
    check_lerp("lerp", input, end, weight)
    weight = number_in_dtype(weight, input.dtype)
    diff = end - input
    if isinstance(weight, Tensor):
        near_input = abs(weight) < 0.5
        return where(near_input, input + weight * diff, end - diff * (1 - weight))
    if -0.5 < weight < 0.5:  # (this module's abs is the tensor one)
        return input + weight * diff
    return end - diff * (1 - weight)


def maximum(a: Tensor, b: Any) -> Tensor:
    return ew.Maximum.apply(*prepare_binary(a, b, "maximum"))


def minimum(a: Tensor, b: Any) -> Tensor:
    return ew.Minimum.apply(*prepare_binary(a, b, "minimum"))


def clamp(a: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """Limit ``a`` to ``[min, max]``; the bounds may be numbers or tensors (broadcasting).

    As in PyTorch, a float bound lifts an integer tensor to float
    (``tensor([1, 2]).clamp(min=1.5)`` is ``[1.5, 2.]``), and where ``min > max``
    every element becomes ``max``.
    """
    if min is None and max is None:
        raise RuntimeError("clamp: at least one of 'min' or 'max' must not be None")
    bounds = [b for b in (min, max) if b is not None]
    for b in bounds:
        if not isinstance(b, (Tensor, int, float)):
            raise TypeError(f"clamp: min and max must be numbers or tensors, not "
                            f"{type(b).__name__} {b!r}. Fix: e.g. x.clamp(min=0.0)")
    tensors = [a] + [b for b in bounds if isinstance(b, Tensor)]
    common_device(tensors, "clamp")
    dt = dtypes.result_type(a, *bounds)
    if dt is dtypes.bool_:
        raise RuntimeError("clamp is not supported for bool tensors. Fix: convert with .long()")

    def cast(b: Any) -> Any:
        if isinstance(b, Tensor):
            return b if b.dtype is dt else b.to(dt)
        return b if b is None else (float(b) if dt.is_floating_point else int(b))

    for b in bounds:
        if isinstance(b, Tensor):
            broadcast_shapes(tuple(a.shape), tuple(b.shape), "clamp")
    return ew.Clamp.apply(cast(a), cast(min), cast(max))


clip = clamp


def where(cond: Tensor, a: Any, b: Any) -> Tensor:
    """``a`` where ``cond`` is true, else ``b`` (broadcasting all three)."""
    if not isinstance(cond, Tensor) or cond.dtype is not dtypes.bool_:
        raise RuntimeError("where expected condition to be a boolean tensor. Fix: compare to "
                           "make one, e.g. tg.where(x > 0, a, b)")
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):  # two numbers: PyTorch's dtype
        from ..tensor import tensor
        a = tensor(a, dtype=dtypes.result_type(a, b), device=cond.device)
    a, b = prepare_binary(a, b, "where")
    shapes = [tuple(t.shape) for t in (a, b) if isinstance(t, Tensor)]
    for s in shapes:
        broadcast_shapes(tuple(cond.shape), s, "where")
    return ew.Where.apply(cond, a, b)


def sign(a: Tensor) -> Tensor:
    """-1, 0 or 1 per element; its gradient is 0 everywhere, as in PyTorch."""
    if a.dtype is dtypes.bool_:
        return a.clone()  # the sign of True is True (1), of False is False (0)
    return ew.Sign.apply(a)


@on_tensors_device
def _compare(op: str, a: Any, b: Any) -> Tensor:
    a, b = prepare_binary(a, b, op)
    t = a if isinstance(a, Tensor) else b
    common_device([x for x in (a, b) if isinstance(x, Tensor)], op)
    out = t._backend.binary(op, a._array if isinstance(a, Tensor) else a,
                            b._array if isinstance(b, Tensor) else b)
    return Tensor._make(out, t._backend, t.device)


def eq(a: Any, b: Any) -> Tensor:
    return _compare("eq", a, b)


def ne(a: Any, b: Any) -> Tensor:
    return _compare("ne", a, b)


def isnan(a: Tensor) -> Tensor:
    """Where ``a`` is NaN (a bool tensor): NaN is the one value not equal to itself."""
    return _compare("ne", a, a)


def isinf(a: Tensor) -> Tensor:
    """Where ``a`` is ``inf`` or ``-inf`` (never, for integer and bool tensors)."""
    if not a.dtype.is_floating_point:
        return _compare("ne", a, a)
    return _compare("eq", abs(a.detach()), math.inf)


def isfinite(a: Tensor) -> Tensor:
    """Where ``a`` is neither NaN nor ±inf: ``|a| < inf`` is false for exactly those (every
    comparison with NaN is false)."""
    if not a.dtype.is_floating_point:
        return _compare("eq", a, a)
    return _compare("lt", abs(a.detach()), math.inf)


def lt(a: Any, b: Any) -> Tensor:
    return _compare("lt", a, b)


def le(a: Any, b: Any) -> Tensor:
    return _compare("le", a, b)


def gt(a: Any, b: Any) -> Tensor:
    return _compare("gt", a, b)


def ge(a: Any, b: Any) -> Tensor:
    return _compare("ge", a, b)


# -- reductions --------------------------------------------------------------------


def sum(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    if a.dtype is dtypes.bool_:
        a = a.long()
    return red.Sum.apply(a, normalize_dims(dim, a.ndim), keepdim)


def mean(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    if not a.dtype.is_floating_point:
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be floating point, "
            f"got {a.dtype}. Fix: call .float() first."
        )
    return red.Mean.apply(a, normalize_dims(dim, a.ndim), keepdim)


def _check_not_empty(name: str, a: Tensor, axes: tuple | None) -> None:
    """max/min/argmax have no value over nothing: PyTorch's errors, before any work."""
    if axes is None:
        if a.numel() == 0:
            kind = IndexError if name.startswith("arg") else RuntimeError
            raise kind(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                       "Specify the reduction dim with the 'dim' argument.")
        return
    for axis in axes:
        if a.shape[axis] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {axis} to have non-zero size "
                             f"(the tensor has shape {list(a.shape)}). Fix: reduce over a "
                             "dimension with elements, or check for empty input first")


def _extreme(op: str, a: Tensor, dim: Any, keepdim: bool) -> Any:
    if dim is None:
        _check_not_empty(op, a, None)
        return red.Amax.apply(a, None, False, op)
    d = normalize_dim(dim, a.ndim)
    _check_not_empty(op, a, (d,) if a.ndim else None)
    if a.ndim == 0:  # a 0-d tensor is its own max along "dim 0"; its index is 0
        values, indices = red.MaxDim.apply(reshape(a, 1), 0, False, op)
        return _ReturnTypes[op](values, indices)
    values, indices = red.MaxDim.apply(a, d, keepdim, op)
    return _ReturnTypes[op](values, indices)


def max(a: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """``max(x)`` is the largest element; ``max(x, dim)`` is ``(values, indices)``."""
    if isinstance(dim, Tensor):
        return maximum(a, dim)
    return _extreme("max", a, dim, keepdim)


def min(a: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    if isinstance(dim, Tensor):
        return minimum(a, dim)
    return _extreme("min", a, dim, keepdim)


def amax(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    axes = normalize_dims(dim, a.ndim)
    _check_not_empty("amax", a, axes if axes else None)
    return red.Amax.apply(a, axes, keepdim, "max")


def amin(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    axes = normalize_dims(dim, a.ndim)
    _check_not_empty("amin", a, axes if axes else None)
    return red.Amax.apply(a, axes, keepdim, "min")


@on_tensors_device
def _arg(op: str, a: Tensor, dim: int | None, keepdim: bool) -> Tensor:
    axis = None if dim is None else normalize_dim(dim, a.ndim)
    _check_not_empty(op, a, None if axis is None or a.ndim == 0 else (axis,))
    if a.dtype is dtypes.bool_:
        a = a.long()  # (kernels compare numbers)
    out = a._backend.arg_reduce(op, a._array, axis, keepdim)
    return Tensor._make(out, a._backend, a.device)


def argmax(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _arg("argmax", a, dim, keepdim)


def argmin(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _arg("argmin", a, dim, keepdim)


# -- linear algebra -----------------------------------------------------------------


@cast_point("matmul")
def matmul(a: Tensor, b: Tensor) -> Tensor:
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("matmul needs two tensors")
    if a.dtype is not b.dtype:  # PyTorch refuses too: no silent conversion of a whole matrix
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != {b.dtype}. "
            f"Fix: convert one, e.g. b.to({a.dtype})"
        )
    common_device([a, b], "matmul")
    linalg.check_matmul_shapes(a, b)
    return linalg.MatMul.apply(a, b)


def mm(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: both arguments must be 2-D, got {a.ndim}-D and {b.ndim}-D")
    return matmul(a, b)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: both arguments must be 3-D, got {a.ndim}-D and {b.ndim}-D")
    return matmul(a, b)


def softmax(a: Tensor, dim: int) -> Tensor:
    d = normalize_dim(dim, a.ndim)
    if a.ndim == 0:  # one element: a distribution over one outcome
        return reshape(activation.Softmax.apply(require_float(reshape(a, 1)), 0), ())
    return activation.Softmax.apply(require_float(a), d)


def log_softmax(a: Tensor, dim: int) -> Tensor:
    d = normalize_dim(dim, a.ndim)
    if a.ndim == 0:
        return reshape(activation.LogSoftmax.apply(require_float(reshape(a, 1)), 0), ())
    return activation.LogSoftmax.apply(require_float(a), d)


def getitem(a: Tensor, index: Any) -> Tensor:
    return indexing.getitem(a, index)


def any(a: Tensor, dim: int | None = None) -> Tensor:  # noqa: A001
    return gt(sum(ne(a, 0), dim), 0)


def all(a: Tensor, dim: int | None = None) -> Tensor:  # noqa: A001
    # "no element is zero" rather than "as many non-zeros as elements": a traced graph then
    # holds no size, so it stays right when an axis changes length (ONNX dynamic axes)
    return eq(sum(eq(a, 0), dim), 0)


_ReturnTypes = {
    "max": namedtuple("max", ["values", "indices"]),
    "min": namedtuple("min", ["values", "indices"]),
}

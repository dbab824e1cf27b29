"""Statistics over dimensions: ``var``, ``std`` and ``logsumexp``, each one Function.

``var`` divides the squared deviations by ``N - correction`` (``correction=1``, the
default, is Bessel's unbiased estimate; ``unbiased=False`` is ``correction=0``).
``logsumexp`` subtracts the maximum before ``exp`` so that large inputs do not
overflow, and treats an infinite maximum as 0 so that ``±inf`` give ``±inf``, not nan.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

from .. import dtypes
from ..autograd.function import Context, Function
from ..tensor import Tensor
from .dispatch import normalize_dims, require_float
from .functional import where
from .reduce import _kept_shape, _spread, kept_output


def reduced_count(shape: tuple, axes: tuple | None) -> int:
    """How many elements go into each result of a reduction over ``axes``."""
    return math.prod(n for i, n in enumerate(shape) if axes is None or i in axes)


def _deviations(backend: Any, a: Any, axes: tuple | None, n: int) -> Any:
    """``a - mean(a)`` over ``axes`` (the mean kept as size-1 dimensions)."""
    total = backend.reduce("sum", a, axes, True)
    return backend.binary("sub", a, backend.binary("div", total, float(n)))


class Var(Function):
    rule = "∂var/∂aᵢ = 2 (aᵢ − mean) / (N − correction)"

    @staticmethod
    def forward(ctx: Context, a: Tensor, axes: tuple | None, correction: float, keepdim: bool):
        backend = ctx.backend
        ctx.shape, ctx.axes, ctx.keepdim = a._array.shape, axes, keepdim
        ctx.n = reduced_count(a._array.shape, axes)
        ctx.divisor = max(ctx.n - correction, 0)
        centered = _deviations(backend, a._array, axes, ctx.n)
        squares = backend.reduce("sum", backend.binary("mul", centered, centered), axes, keepdim)
        ctx.save_for_backward(a)
        return backend.binary("div", squares, float(ctx.divisor))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        return var_backward(ctx, grad, a), None, None, None


def var_backward(ctx: Context, grad: Tensor, a: Tensor) -> Tensor:
    """PyTorch's ``var_backward``: ``2 / (N - correction) * grad * (a - mean(a))``."""
    centered = a - a.mean(dim=ctx.axes, keepdim=True)
    scale = 2.0 / ctx.divisor if ctx.divisor else math.inf  # (no degrees of freedom: nan)
    return _spread(grad, ctx) * centered * scale


class Std(Function):
    rule = "∂std/∂aᵢ = (aᵢ − mean) / ((N − correction) · std), 0 where std = 0"

    @staticmethod
    def forward(ctx: Context, a: Tensor, axes: tuple | None, correction: float, keepdim: bool):
        variance = Var.forward(ctx, a, axes, correction, keepdim)
        out = ctx.backend.unary("sqrt", variance)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        std = ctx.output
        # d sqrt(v) = dv / (2 sqrt v): infinite where std is 0, so PyTorch gives 0 there
        grad_var = _zero_where(grad / (std * 2), std)
        return var_backward(ctx, grad_var, a), None, None, None


def _zero_where(values: Tensor, std: Tensor) -> Tensor:
    """``values`` with 0 where ``std`` is 0 (PyTorch's ``masked_fill_(result == 0, 0)``)."""
    return where(std == 0, 0.0, values)


class LogSumExp(Function):
    rule = "∂logsumexp(a)/∂aᵢ = exp(aᵢ − logsumexp(a)) = softmax(a)ᵢ"

    @staticmethod
    def forward(ctx: Context, a: Tensor, axes: tuple | None, keepdim: bool):
        backend, x = ctx.backend, a._array
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        ctx.save_for_backward(a)
        if reduced_count(x.shape, axes) == 0:  # the log of an empty sum: -inf, as in PyTorch
            ctx.out = backend.full(_reduced_shape(x.shape, axes, keepdim), -math.inf, x.dtype)
            return ctx.out
        top = backend.reduce("max", x, axes, True)
        # an infinite maximum would give inf - inf = nan below: shift by 0 instead
        infinite = backend.binary("eq", backend.unary("abs", top), math.inf)
        top = backend.where(infinite, 0.0, top)
        total = backend.reduce("sum", backend.unary("exp", backend.binary("sub", x, top)), axes, True)
        out = backend.binary("add", backend.unary("log", total), top)
        if not keepdim:
            out = backend.reshape(out, _reduced_shape(x.shape, axes, keepdim))
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        return _spread(grad, ctx) * (a - kept_output(ctx)).exp(), None, None


def _reduced_shape(shape: tuple, axes: tuple | None, keepdim: bool) -> tuple:
    if keepdim:
        return _kept_shape(shape, axes)
    return tuple(n for i, n in enumerate(shape) if axes is not None and i not in axes)


# -- the public functions ------------------------------------------------------------------


def _correction(name: str, unbiased: Any, correction: Any) -> float:
    """``correction`` from PyTorch's two spellings (``unbiased=`` is the older one)."""
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}(): pass either unbiased= or correction=, not both "
                        "(unbiased=False is correction=0, unbiased=True is correction=1)")
    if unbiased is not None:
        if not isinstance(unbiased, bool):
            raise TypeError(f"{name}(): unbiased must be a bool, not {type(unbiased).__name__}")
        return 1.0 if unbiased else 0.0
    if correction is None:
        return 1.0
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise TypeError(f"{name}(): correction must be a number, not "
                        f"{type(correction).__name__}. Fix: e.g. correction=0")
    return float(correction)


def _check_var_args(name: str, a: Tensor, dim: Any, unbiased: Any, correction: Any) -> tuple:
    """Validate a ``var``/``std`` call; returns ``(axes, correction)``."""
    if not isinstance(a, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be a Tensor, not {type(a).__name__}")
    if isinstance(dim, bool):  # var(x, False): the old positional `unbiased`
        dim, unbiased = None, dim
    if not a.dtype.is_floating_point:
        raise RuntimeError(f"{name}(): std and var only support floating point dtypes, got "
                           f"{a.dtype}. Fix: convert first, e.g. x.float().{name}()")
    axes = normalize_dims(dim, a.ndim)
    c = _correction(name, unbiased, correction)
    if reduced_count(tuple(a.shape), axes) - c <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly "
                      "less than the reduction factor (input numel divided by output numel).",
                      UserWarning, stacklevel=3)
    return axes, c


def var(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,  # noqa: A002
        correction: Any = None) -> Tensor:
    """The variance over ``dim`` (all elements by default), divided by ``N - correction``."""
    axes, c = _check_var_args("var", input, dim, unbiased, correction)
    return Var.apply(input, axes, c, keepdim)


def std(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,  # noqa: A002
        correction: Any = None) -> Tensor:
    """The standard deviation, ``sqrt(var(...))``, with the same arguments as :func:`var`."""
    axes, c = _check_var_args("std", input, dim, unbiased, correction)
    return Std.apply(input, axes, c, keepdim)


def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:  # noqa: A002
    """``log(sum(exp(x)))`` over ``dim``, without overflow (integers become float)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"logsumexp(): argument 'input' must be a Tensor, not {type(input).__name__}")
    if input.dtype is dtypes.bool_:
        input = input.long()
    axes = normalize_dims(dim, input.ndim)
    return LogSumExp.apply(require_float(input), axes, keepdim)

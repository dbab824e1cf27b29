"""Norms: ``vector_norm`` as one Function, and what is built on it (``norm``,
``matrix_norm``, ``cdist``).

The p-norm of a vector is ``(Σ |xᵢ|^p)^(1/p)``; p = inf is the largest ``|xᵢ|``,
p = -inf the smallest, p = 0 counts the non-zero elements. The gradient of the
2-norm is ``x / ‖x‖``, which has no value at ``x = 0``: there PyTorch (and so
teachgrad) gives 0, the smallest subgradient.
"""
from __future__ import annotations

import math
from typing import Any

from .. import dtypes
from ..autograd.cast_points import cast_point
from ..autograd.function import Context, Function
from ..device import common_device
from ..tensor import Tensor
from .dispatch import broadcast_shapes, normalize_dims
from .functional import amax, amin, sign, where
from .reduce import _spread, kept_output
from .singular_values import singular_value_norm


class VectorNorm(Function):
    rule = ("∂‖a‖ₚ/∂aᵢ = sign(aᵢ) |aᵢ|^(p−1) / ‖a‖ₚ^(p−1); "
            "p = 2: aᵢ / ‖a‖, 0 where ‖a‖ = 0")

    @staticmethod
    def forward(ctx: Context, a: Tensor, p: float, axes: tuple | None, keepdim: bool):
        ctx.shape, ctx.axes, ctx.keepdim, ctx.p = a._array.shape, axes, keepdim, p
        ctx.save_for_backward(a)
        out = _vector_norm(ctx.backend, a._array, p, axes, keepdim)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        grad_a = norm_backward(_spread(grad, ctx), a, kept_output(ctx), ctx.p, ctx.axes)
        return grad_a, None, None, None


def _vector_norm(backend: Any, x: Any, p: float, axes: tuple | None, keepdim: bool) -> Any:
    """The forward arithmetic, in backend primitives (so it runs on every device)."""
    if p == 2:  # the common case: no abs, no pow
        return backend.unary("sqrt", backend.reduce("sum", backend.binary("mul", x, x), axes, keepdim))
    size = backend.unary("abs", x)
    if p == math.inf:
        return backend.reduce("max", size, axes, keepdim)
    if p == -math.inf:
        return backend.reduce("min", size, axes, keepdim)
    if p == 0:
        nonzero = backend.astype(backend.binary("ne", x, 0.0), x.dtype)
        return backend.reduce("sum", nonzero, axes, keepdim)
    if p == 1:
        return backend.reduce("sum", size, axes, keepdim)
    total = backend.reduce("sum", backend.binary("pow", size, float(p)), axes, keepdim)
    return backend.binary("pow", total, 1.0 / p)


def norm_backward(grad: Tensor, a: Tensor, norm: Tensor, p: float, axes: tuple | None) -> Tensor:
    """PyTorch's ``norm_backward``; ``grad`` and ``norm`` already have ``a``'s dimensions."""
    if p == 0:
        return a * 0.0
    if p == 1:
        return sign(a) * grad
    if p == 2:
        return a * where(norm == 0, 0.0, grad / norm)
    if math.isinf(p):
        # the elements that reach the max (or min) share the gradient equally
        hits = where(a != a, 1.0, (a.abs() == norm).to(a.dtype))  # (nan counts as a hit)
        return sign(a) * (grad / hits.sum(dim=axes, keepdim=True) * hits)
    if p < 1:
        scaled = where(a == 0, 0.0, sign(a) * a.abs() ** (p - 1))
        return scaled * grad * norm ** (1 - p)
    scale = where(norm == 0, 0.0, grad / norm ** (p - 1))
    if p < 2:
        return sign(a) * a.abs() ** (p - 1) * scale
    return a * a.abs() ** (p - 2) * scale


# -- the public functions ------------------------------------------------------------------


def _check_input(name: str, a: Any, dtype: Any) -> Tensor:
    if not isinstance(a, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be a Tensor, not {type(a).__name__}")
    if dtype is not None:
        a = a.to(dtypes.get_dtype(dtype))
    if not a.dtype.is_floating_point:
        raise RuntimeError(f"{name}: Expected a floating point tensor as input. Got "
                           f"{a.dtype}. Fix: convert first, e.g. x.float()")
    return a


def _check_ord(name: str, ord: Any) -> float:  # noqa: A002
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise TypeError(f"{name}(): ord must be a number (2, 1, inf, ...), not {ord!r}. "
                        "Fix: for the Frobenius norm of a matrix use tg.linalg.matrix_norm")
    return float(ord)


def vector_norm(x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                dtype: Any = None) -> Tensor:
    """``tg.linalg.vector_norm``: the ``ord``-norm over ``dim`` (all elements by default)."""
    x = _check_input("linalg.vector_norm", x, dtype)
    p = _check_ord("linalg.vector_norm", ord)
    axes = normalize_dims(dim, x.ndim)
    if p < 0 or math.isinf(p):
        empty = x.numel() == 0 if axes is None else any(x.shape[i] == 0 for i in axes)
        if empty:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty "
                               "tensor because the operation does not have an identity")
    if p == 0:  # a count of non-zero elements: no gradient at all (PyTorch records none)
        x = x.detach()
    return VectorNorm.apply(x, p, axes, keepdim)


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def matrix_norm(A: Tensor, ord: Any = "fro", dim: Any = (-2, -1), keepdim: bool = False, *,  # noqa: A002
                dtype: Any = None) -> Tensor:
    """``tg.linalg.matrix_norm``: ``'fro'``, ``ord`` = ±1 (column sums), ±inf (row sums), or
    from the singular values: ``'nuc'`` (their sum), ±2 (the largest, the smallest)."""
    A = _check_input("linalg.matrix_norm", A, dtype)
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 "
                           f"dimensions, got {A.ndim}. Fix: for a vector use tg.linalg.vector_norm")
    if isinstance(ord, bool) or ord not in _MATRIX_ORDS:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported. Fix: use 'fro', "
                           "'nuc', 1, -1, 2, -2, inf or -inf")
    axes = normalize_dims(dim, A.ndim)
    if not isinstance(dim, (tuple, list)) or axes is None or len(axes) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    rows, cols = (normalize_dims(d, A.ndim)[0] for d in dim)
    if ord == "fro":
        return VectorNorm.apply(A, 2.0, axes, keepdim)
    if ord in ("nuc", 2, -2):  # from the singular values (ops/singular_values.py)
        return singular_value_norm(A, ord, rows, cols, keepdim)
    # ord ±1: the largest (smallest) column sum of |A|; ±inf: the same over rows
    summed, compared = (rows, cols) if abs(ord) == 1 else (cols, rows)
    extreme = amax if ord > 0 else amin
    out = extreme(A.abs().sum(dim=summed, keepdim=True), dim=compared, keepdim=True)
    return out if keepdim else out.squeeze(max(rows, cols)).squeeze(min(rows, cols))


@cast_point("norm")
def norm(input: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False,  # noqa: A002
         dtype: Any = None) -> Tensor:
    """``tg.norm`` / ``x.norm()``: as PyTorch's, a vector norm unless ``p`` names a matrix one.

    ``p='fro'`` over all elements, one dim or two dims is the 2-norm of those
    elements; ``p='nuc'`` goes to :func:`matrix_norm`; a number ``p`` is always a
    vector norm over ``dim``.
    """
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            return vector_norm(input, 2, dim, keepdim, dtype=dtype)
        dims = tuple(range(input.ndim)) if dim is None else dim
        return matrix_norm(input, p, dims, keepdim, dtype=dtype)
    return vector_norm(input, 2 if p is None else p, dim, keepdim, dtype=dtype)


def linalg_norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                dtype: Any = None) -> Tensor:
    """``tg.linalg.norm``: a vector norm for one dim (or a 1-D input), a matrix norm for two."""
    if isinstance(dim, int) or (dim is not None and len(dim) == 1):
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is None and ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if dim is None and A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if dim is None and A.ndim != 2:
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must "
                           f"be 1D or 2D. Got {A.ndim}D. Fix: pass dim=")
    return matrix_norm(A, "fro" if ord is None else ord, (-2, -1) if dim is None else dim,
                       keepdim, dtype=dtype)


_CDIST_MODES = (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                "donot_use_mm_for_euclid_dist")


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: Any = None) -> Tensor:
    """The p-norm distance between each row of ``x1`` (…, P, M) and each row of ``x2``
    (…, R, M): a (…, P, R) tensor. Written as broadcasting and a vector norm, so its
    gradient is the norm's (0 where two rows coincide, as in PyTorch).

    PyTorch computes large euclidean cases (more than 25 rows) with a matrix
    product instead; teachgrad always takes the differences, which is exact.
    """
    for name, t in (("x1", x1), ("x2", x2)):
        if not isinstance(t, Tensor):
            raise TypeError(f"cdist(): argument '{name}' must be a Tensor, not {type(t).__name__}")
        if t.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name.upper()} got: "
                               f"{t.ndim}D. Fix: add a row dimension, e.g. {name}.unsqueeze(0)")
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name.upper()} got: "
                               f"{t.dtype}. Fix: convert with .float()")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p!r}")
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode (one of "
                         f"{', '.join(repr(m) for m in _CDIST_MODES[1:])})")
    if x1.dtype is not x2.dtype:
        raise RuntimeError(f"cdist: X1 and X2 must have the same dtype, got {x1.dtype} and "
                           f"{x2.dtype}. Fix: convert one, e.g. x2.to({x1.dtype})")
    common_device([x1, x2], "cdist")
    broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]), "cdist (batch dimensions)")
    differences = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # (…, P, R, M)
    # (straight to the Function: for p = 0 too PyTorch's cdist records a zero gradient)
    return VectorNorm.apply(differences, float(p), (differences.ndim - 1,), False)

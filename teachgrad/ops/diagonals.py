"""Parts of matrices: tril, triu, diagonal, diag and trace.

``tril``/``triu`` keep a triangle and zero the rest: the kept part is a mask
``column - row <= k`` (or ``>= k``) built from two ``arange``s, so every
backend computes it with the primitives it already has. Their gradient is the
same mask applied to the gradient.

``diagonal`` reads the elements ``(i, i + offset)``: an index with two position
arrays, so its forward is a gather and its backward a scatter-add, like
``x[rows, cols]``. ``diag`` of a vector is the reverse: it writes a vector onto
the diagonal of a zero matrix, and its backward reads the diagonal back.
(PyTorch's ``diagonal`` is a view of its input; here it is a copy.)
"""
from __future__ import annotations

from typing import Any

from .. import dtypes
from ..autograd.function import Context, Function
from ..tensor import Tensor
from .gather_scatter import in_place, read_at, read_back
from .dispatch import normalize_dim


def triangle_mask(backend: Any, rows: int, cols: int, diagonal: int, upper: bool) -> Any:
    """True where ``column - row >= diagonal`` (upper) or ``<= diagonal`` (lower)."""
    row = backend.reshape(backend.arange(rows, "int64"), (rows, 1))
    col = backend.reshape(backend.arange(cols, "int64"), (1, cols))
    offset = backend.binary("sub", col, row)
    return backend.binary("ge" if upper else "le", offset, diagonal)


class Triangle(Function):
    rule = "∂tril(a)/∂a (and triu): the gradient inside the kept triangle, 0 outside"

    @staticmethod
    def forward(ctx: Context, a: Tensor, diagonal: int, upper: bool):
        backend = ctx.backend
        ctx.keep = triangle_mask(backend, a.shape[-2], a.shape[-1], diagonal, upper)
        return backend.where(ctx.keep, a._array, backend.zeros((), a.dtype.numpy))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        backend = ctx.backend
        kept = backend.where(ctx.keep, grad._array, backend.zeros((), grad.dtype.numpy))
        return Tensor._make(kept, backend, grad.device), None, None


class Diagonal(Function):
    rule = "∂diagonal(a)/∂a: the gradient on the diagonal it was read from, 0 elsewhere"

    @staticmethod
    def forward(ctx: Context, a: Tensor, offset: int):
        """The diagonal ``offset`` of the last two dimensions, as the last dimension."""
        rows, cols = diagonal_positions(ctx.backend, a.shape[-2], a.shape[-1], offset)
        return read_at(ctx, a, (Ellipsis, rows, cols))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return read_back(ctx, grad), None


class DiagEmbed(Function):
    rule = "∂diag(v)/∂v: the gradient read back off the diagonal"

    @staticmethod
    def forward(ctx: Context, v: Tensor, offset: int):
        size = v.shape[0] + abs(offset)
        ctx.positions = diagonal_positions(ctx.backend, size, size, offset)
        out = ctx.backend.zeros((size, size), v.dtype.numpy)
        ctx.backend.setitem(out, ctx.positions, v._array)
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        on_diagonal = ctx.backend.getitem(grad._array, ctx.positions)
        return Tensor._make(on_diagonal, ctx.backend, grad.device), None


def diagonal_positions(backend: Any, rows: int, cols: int, offset: int) -> tuple:
    """Row and column positions of the diagonal ``offset`` (above the main one if > 0)."""
    start_row, start_col = max(-offset, 0), max(offset, 0)
    length = max(0, min(rows - start_row, cols - start_col))
    along = backend.arange(length, "int64")
    return backend.binary("add", along, start_row), backend.binary("add", along, start_col)


def _check_matrix(name: str, a: Any, message: str) -> None:
    if not isinstance(a, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be a tensor, not {type(a).__name__}")
    if a.ndim < 2:
        raise RuntimeError(message)


def _check_int(name: str, what: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}(): argument '{what}' must be int, not {type(value).__name__}")


def _triangle(name: str, input: Tensor, diagonal: int, upper: bool) -> Tensor:  # noqa: A002
    _check_matrix(name, input, f"{name}: input tensor must have at least 2 dimensions "
                               f"(got shape {list(getattr(input, 'shape', []))})")
    _check_int(name, "diagonal", diagonal)
    return Triangle.apply(input, diagonal, upper)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """The lower triangle of the last two dimensions (on and below diagonal ``diagonal``), zeros above."""
    return _triangle("tril", input, diagonal, upper=False)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """The upper triangle of the last two dimensions (on and above diagonal ``diagonal``), zeros below."""
    return _triangle("triu", input, diagonal, upper=True)


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    """The diagonal of the ``(dim1, dim2)`` matrices, as the last dimension of the result."""
    _check_matrix("diagonal", input, f"diagonal(): expected a tensor of at least 2 dimensions, "
                                     f"got {getattr(input, 'ndim', 0)}")
    _check_int("diagonal", "offset", offset)
    d1, d2 = normalize_dim(dim1, input.ndim), normalize_dim(dim2, input.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    others = tuple(d for d in range(input.ndim) if d not in (d1, d2))
    moved = input.permute(*others, d1, d2)  # the two dimensions last
    return Diagonal.apply(moved, offset)


_diagonal_of = diagonal  # (inside diag, `diagonal` is its argument)


def diag(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """A vector's square matrix with it on diagonal ``diagonal``; a matrix's diagonal as a vector."""
    if not isinstance(input, Tensor):
        raise TypeError(f"diag(): argument 'input' must be a tensor, not {type(input).__name__}")
    if input.ndim == 2:
        return _diagonal_of(input, diagonal)
    if input.ndim != 1:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")
    _check_int("diag", "diagonal", diagonal)
    return DiagEmbed.apply(input, diagonal)


def trace(input: Tensor) -> Tensor:  # noqa: A002
    """The sum of a matrix's main diagonal (integers sum to int64)."""
    _check_matrix("trace", input, f"trace: expected a matrix, but got tensor with dim "
                                  f"{getattr(input, 'ndim', 0)}")
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    if input.dtype is dtypes.bool_:
        raise NotImplementedError('"trace" not implemented for \'Bool\'. Fix: convert with .long() first')
    on_diagonal = diagonal(input)
    return on_diagonal.sum()


def tril_(self: Tensor, diagonal: int = 0) -> Tensor:
    return in_place(self, lambda old: tril(old, diagonal))


def triu_(self: Tensor, diagonal: int = 0) -> Tensor:
    return in_place(self, lambda old: triu(old, diagonal))


TENSOR_METHODS = {"tril": tril, "triu": triu, "diagonal": diagonal, "diag": diag, "trace": trace,
                  "tril_": tril_, "triu_": triu_}

"""Operations on values rather than positions: ``unique``, ``nonzero``, ``bincount``,
``mode``, the comparisons ``isclose``/``allclose``/``equal``, and ``one_hot``.

The size of what ``unique``, ``nonzero`` and ``bincount`` return depends on the
values, so they are computed on the host (numpy) and the result is copied to the
tensor's device. PyTorch waits for the GPU here too: the output cannot be
allocated before the values are known. ``isclose`` and ``one_hot`` run on the
device, as backend primitives.
"""
from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import numpy as np

from .. import dtypes
from ..autograd.function import Context
from ..device import common_device
from ..tensor import Tensor
from .dispatch import normalize_dim, prepare_binary
from .reduce import MaxDim


def host(t: Tensor) -> np.ndarray:
    """``t``'s values on the host. Read through ``.numpy()``, so that inside ``tg.jit.trace``
    (and ``tg.compile``) a value that leaves the tensor world breaks the graph, or is
    guarded for an input, as ``.item()`` is: never baked in silently."""
    return t.detach().cpu().numpy()


def on_device(values: np.ndarray, like: Tensor) -> Tensor:
    """A new tensor on ``like``'s device holding host ``values``."""
    backend = like._backend
    return Tensor._make(backend.from_numpy(np.array(values, order="C", copy=True)), backend, like.device)


def _check_tensor(name: str, t: Any, what: str = "input") -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}(): argument '{what}' must be a Tensor, not {type(t).__name__}")


# -- unique, nonzero, bincount -----------------------------------------------------------


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None) -> Any:
    """The distinct values (or distinct slices along ``dim``), in ascending order.

    With ``return_inverse``, also where each element went (``output[inverse]`` rebuilds
    the input); with ``return_counts``, how often each value occurs. Not differentiable,
    as in PyTorch. teachgrad always sorts (PyTorch's order for ``sorted=False`` is
    unspecified, and on the CPU it sorts too).
    """
    _check_tensor("unique", input)
    values = host(input)
    axis = None if dim is None else normalize_dim(dim, input.ndim)
    flat = values.reshape(-1) if axis is None else values
    if axis is not None and values.ndim == 0:
        flat = values.reshape(1)
    found = np.unique(flat, return_inverse=True, return_counts=True, axis=axis, equal_nan=False)
    output, inverse, counts = found
    if axis is None:
        inverse = inverse.reshape(values.shape)
    results = [on_device(output.astype(values.dtype), input)]
    if return_inverse:
        results.append(on_device(inverse.reshape(-1 if axis is not None else values.shape)
                                  .astype(np.int64), input))
    if return_counts:
        results.append(on_device(counts.astype(np.int64), input))
    return results[0] if len(results) == 1 else tuple(results)


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Any:  # noqa: A002
    """The indices of the non-zero elements: an (n, ndim) int64 tensor, or with
    ``as_tuple=True`` one 1-D tensor per dimension (what ``x[...]`` takes)."""
    _check_tensor("nonzero", input)
    values = host(input)
    if as_tuple:
        return tuple(on_device(i.astype(np.int64), input) for i in np.nonzero(np.atleast_1d(values)))
    return on_device(np.argwhere(values).astype(np.int64), input)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:  # noqa: A002
    """How often each value 0, 1, 2, ... occurs in a 1-D int tensor (or the sum of
    ``weights`` at each value); at least ``minlength`` entries."""
    _check_tensor("bincount", input)
    if isinstance(minlength, bool) or not isinstance(minlength, int):
        raise TypeError(f"bincount(): minlength must be an int, not {type(minlength).__name__}")
    if minlength < 0:
        raise RuntimeError(f"minlength should be >= 0, got {minlength}")
    if input.dtype.is_floating_point:  # (PyTorch's class for a dtype a kernel lacks)
        raise NotImplementedError(f"bincount is not implemented for {input.dtype} input: it "
                                  "counts integers. Fix: convert with .long()")
    if input.ndim != 1 or input.dtype is not dtypes.int64:
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs (got a "
                           f"{input.ndim}-d {input.dtype} tensor). Fix: pass a 1-D int64 tensor")
    if weights is not None:
        _check_tensor("bincount", weights, "weights")
        if weights.ndim != 1 or weights.shape[0] != input.shape[0]:
            raise RuntimeError(f"weights should be 1-d and have the same length as input "
                               f"(input {list(input.shape)}, weights {list(weights.shape)})")
        common_device([input, weights], "bincount")
    values = host(input)
    if values.size and values.min() < 0:
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs; this one "
                           f"holds {values.min()}. Fix: shift the values to start at 0")
    if weights is None:
        return on_device(np.bincount(values, minlength=minlength).astype(np.int64), input)
    # as PyTorch: float32 weights sum in float32, any other dtype in float64
    kind = np.float32 if weights.dtype is dtypes.float32 else np.float64
    counted = np.bincount(values, weights=host(weights).astype(np.float64), minlength=minlength)
    return on_device(counted.astype(kind), input)


# -- mode ---------------------------------------------------------------------------------


class Mode(MaxDim):
    """The most frequent value along a dimension (the smallest one among ties) and the
    index of its last occurrence, as PyTorch's ``mode``; the gradient goes to that index."""

    rule = "∂mode(a, dim)/∂aᵢ = 1 at the returned index, else 0"

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int, keepdim: bool, op: str = "mode"):
        ctx.shape, ctx.axes, ctx.keepdim, ctx.dim = tuple(a.shape), (dim,), keepdim, dim
        rows = np.moveaxis(host(a), dim, -1)
        values, indices = np.empty(rows.shape[:-1], rows.dtype), np.empty(rows.shape[:-1], np.int64)
        for at in np.ndindex(rows.shape[:-1]):
            values[at], indices[at] = _mode_of(rows[at])
        backend = ctx.backend
        values, indices = np.expand_dims(values, dim), np.expand_dims(indices, dim)
        ctx.index = backend.from_numpy(indices)
        if not keepdim:
            values, indices = values.squeeze(dim), indices.squeeze(dim)
        out = Tensor._make(backend.from_numpy(indices), backend, a.device)
        ctx.mark_non_differentiable(out)
        return backend.from_numpy(np.array(values, order="C", copy=True)), out


def _mode_of(row: np.ndarray) -> tuple[Any, int]:
    """The most frequent value of a 1-D row (the smallest if several) and its last index."""
    distinct, counts = np.unique(row, return_counts=True)
    value = distinct[np.argmax(counts)]  # (argmax picks the first, i.e. the smallest value)
    return value, int(np.flatnonzero(row == value)[-1])


ModeResult = namedtuple("mode", ["values", "indices"])


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> Any:  # noqa: A002
    """``(values, indices)``: the most frequent value along ``dim`` and where it last occurs."""
    _check_tensor("mode", input)
    if input.ndim == 0:
        values, indices = Mode.apply(input.reshape(1), 0, False)
        return ModeResult(values, indices)
    d = normalize_dim(dim, input.ndim)
    if input.shape[d] == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    return ModeResult(*Mode.apply(input, d, keepdim))


# -- comparing whole tensors ---------------------------------------------------------------


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
            equal_nan: bool = False) -> Tensor:
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (or equal, for infinities)."""
    _check_tensor("isclose", input)
    _check_tensor("isclose", other, "other")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{input.dtype} did not match {other.dtype}: isclose needs two tensors "
                           f"of one dtype. Fix: convert one, e.g. other.to({input.dtype})")
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or tol < 0:
            raise RuntimeError(f"{name} must be greater than or equal to zero, but got {tol}")
    common_device([input, other], "isclose")
    a, b = prepare_binary(input, other, "isclose")
    backend = a._backend
    close = backend.binary("eq", a._array, b._array)
    if a.dtype.is_floating_point or a.dtype is dtypes.int64:
        x, y = (a._array, b._array) if a.dtype.is_floating_point else \
            (backend.astype(a._array, np.float64), backend.astype(b._array, np.float64))
        error = backend.unary("abs", backend.binary("sub", x, y))
        allowed = backend.binary("add", backend.unary("abs", backend.binary("mul", y, float(rtol))),
                                 float(atol))
        # error < inf leaves out nan and inf (inf - inf, or inf against a finite number)
        within = backend.where(backend.binary("lt", error, math.inf),
                               backend.binary("le", error, allowed), False)
        close = backend.where(close, True, within)
        if equal_nan:
            both_nan = backend.where(backend.binary("ne", x, x), backend.binary("ne", y, y), False)
            close = backend.where(close, True, both_nan)
    return Tensor._make(close, backend, a.device)


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
             equal_nan: bool = False) -> bool:
    """True when every element is :func:`isclose`."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input: Tensor, other: Tensor) -> bool:  # noqa: A002
    """True when both have the same shape and the same values (dtypes may differ)."""
    _check_tensor("equal", input)
    _check_tensor("equal", other, "other")
    common_device([input, other], "equal")
    if input.shape != other.shape:
        return False
    return bool((input == other).all())


# -- one_hot ---------------------------------------------------------------------------------


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """Class indices -> rows of zeros with a 1 at the index: shape ``(*tensor.shape, C)``, int64."""
    _check_tensor("one_hot", tensor, "tensor")
    if tensor.dtype is not dtypes.int64:
        raise RuntimeError(f"one_hot is only applicable to index tensor of type LongTensor, "
                           f"not {tensor.dtype}. Fix: convert with .long()")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < -1:
        raise RuntimeError(f"one_hot: num_classes should be -1 or a non-negative int, got {num_classes!r}")
    values = host(tensor)
    if values.size == 0 and num_classes == -1:
        raise RuntimeError("Can not infer total number of classes from empty tensor. "
                           "Fix: pass num_classes=")
    if values.size and values.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    classes = int(values.max()) + 1 if num_classes == -1 else num_classes
    if values.size and values.max() >= classes:
        raise RuntimeError(f"Class values must be smaller than num_classes ({classes}), "
                           f"found {values.max()}.")
    backend = tensor._backend
    column = backend.reshape(tensor._array, tuple(tensor.shape) + (1,))
    hits = backend.binary("eq", column, backend.arange(classes, np.int64))
    return Tensor._make(backend.astype(hits, np.int64), backend, tensor.device)

"""The numba CPU backend's fast lane: flat loops for the common case.

Most operations a tensor program runs have C-contiguous operands of one float
dtype and one shape, or an array and a Python number. On one core, two arrays
of one float dtype go to a numpy ufunc that numba compiled from the op's
scalar code (``zip_ufunc``): numpy's C does the checks, broadcasting and
allocation, numba's code the arithmetic. For them the general
loops of :mod:`teachgrad.backends.numba_loops` (an input kind, strides and a
shape array per operand) are more than needed, and on small arrays the
Python around a loop costs more than the loop. Here each loop takes the
arrays and nothing else: fewer arguments for numba's dispatcher to check on
every call. Each function returns ``None`` when its case does not apply, and
the backend then takes its general path.

The output is still made in Python (``np.empty(shape, dtype)``, which for a
C-contiguous operand is what ``np.empty_like`` makes, at less than half its
cost): an array made inside compiled code costs microseconds to hand back to
Python.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np
from numba import float32, float64, prange, vectorize

from .base import COMPARISONS, Array, Scalar
from .numba_loops import (
    BINARY_CODES, GRAIN, REDUCE_CODES, UNARY_CODES, _compile, apply_binary, apply_unary, fold,
    parallel_for,
)

#: Each binary op's name by its code (``zip_ufunc``'s kernels are named after their op).
BINARY_NAMES = {code: name for name, code in BINARY_CODES.items()}
#: Dtypes of the flat loops (a set: a membership test hashes once).
FLAT_DTYPES = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


@functools.lru_cache(maxsize=None)
def map_flat_loop(op: int, parallel: bool = True):
    loop_range = prange if parallel else range

    def map_flat(out, x):
        o, v = out.reshape(out.size), x.reshape(x.size)
        for i in loop_range(o.size):
            o[i] = apply_unary(op, v[i])

    return _compile(map_flat, parallel, error_model="numpy")


@functools.lru_cache(maxsize=None)
def zip_flat_loop(op: int, parallel: bool = True):
    loop_range = prange if parallel else range

    def zip_flat(out, a, b):
        o, x, y = out.reshape(out.size), a.reshape(a.size), b.reshape(b.size)
        for i in loop_range(o.size):
            o[i] = apply_binary(op, x[i], y[i])

    return _compile(zip_flat, parallel, error_model="numpy")


@functools.lru_cache(maxsize=None)
def zip_scalar_loop(op: int, parallel: bool = True):
    loop_range = prange if parallel else range

    def zip_scalar(out, a, b):
        o, x = out.reshape(out.size), a.reshape(a.size)
        for i in loop_range(o.size):
            o[i] = apply_binary(op, x[i], b)

    return _compile(zip_scalar, parallel, error_model="numpy")


@functools.lru_cache(maxsize=None)
def zip_ufunc(op: int) -> Any:
    """``apply_binary(op, x, y)`` compiled by ``numba.vectorize`` into a real numpy ufunc.

    numba compiles the scalar function and builds the ufunc's inner loop around it;
    numpy then does what a ufunc call does (check the operands, allocate the output,
    run the loop) in C. On one core, for two arrays, that is the cheapest call there
    is: a tensor operation pays what ``np.add`` pays. (The returned object is numba's
    ``DUFunc``; ``.ufunc`` is the numpy ufunc inside it, which it keeps alive.)
    """
    def kernel(x, y):
        return apply_binary(op, x, y)

    kernel.__name__ = kernel.__qualname__ = BINARY_NAMES[op]  # (named in numpy's warnings)
    return vectorize([float32(float32, float32), float64(float64, float64)], cache=True)(kernel)


#: ``zip_ufunc``'s numpy ufuncs by op name (each one kept alive by its cached DUFunc)
_UFUNCS: dict[str, Any] = {}


def _flat(x: Array) -> bool:
    """A non-empty C-contiguous float32/float64 numpy array."""
    return type(x) is np.ndarray and x.dtype in FLAT_DTYPES and x.flags.c_contiguous and x.size > 0


def _loop(kind: Callable, op: str, codes: dict, size: int) -> Callable:
    """The compiled loop of ``kind`` for ``op`` (the parallel build for large arrays),
    looked up in a dict: this runs on every call, so not through ``lru_cache``'s wrapper."""
    parallel = parallel_for(size)
    key = (kind, op, parallel)
    loop = _LOOPS.get(key)
    if loop is None:
        loop = _LOOPS[key] = kind(codes[op], parallel)
    return loop


_LOOPS: dict[tuple, Callable] = {}


def unary(op: str, x: Array) -> Array | None:
    if not _flat(x):
        return None
    out = np.empty(x.shape, x.dtype)
    _loop(map_flat_loop, op, UNARY_CODES, x.size)(out, x)
    return out


def binary(op: str, a: Array | Scalar, b: Array | Scalar) -> Array | None:
    if type(a) is not np.ndarray or op in COMPARISONS:
        return None
    dtype = a.dtype
    if type(b) is np.ndarray:
        if b.dtype is not dtype or dtype not in FLAT_DTYPES:
            return None
        size = a.size if a.size >= b.size else b.size  # (max() costs more, called this often)
        if size < GRAIN or not parallel_for(size):
            # one core: numba's ufunc, which broadcasts and strides as numpy's own do
            ufunc = _UFUNCS.get(op)
            if ufunc is None:
                ufunc = _UFUNCS[op] = zip_ufunc(BINARY_CODES[op]).ufunc
            out = ufunc(a, b)
            return out if type(out) is np.ndarray else np.asarray(out)  # (0-d: a scalar)
        if b.shape != a.shape or not a.flags.c_contiguous or not b.flags.c_contiguous:
            return None
        out = np.empty(a.shape, dtype)  # (like np.empty_like(a): a is C-contiguous)
        _loop(zip_flat_loop, op, BINARY_CODES, a.size)(out, a, b)
        return out
    if (type(b) is float or type(b) is int) and _flat(a):
        out = np.empty(a.shape, dtype)
        # the scalar in the array's dtype, so float32 math stays float32 (as numpy's)
        _loop(zip_scalar_loop, op, BINARY_CODES, a.size)(out, a, dtype.type(b))
        return out
    return None


def reduce(op: str, x: Array, axes: tuple[int, ...] | None, keepdims: bool) -> Array | None:
    """Every axis of one contiguous block on one core: one fold, no layout work."""
    if not (axes is None or len(axes) == x.ndim) or not _flat(x) or parallel_for(x.size):
        return None
    total = np.array(fold(REDUCE_CODES[op], x.reshape(x.size)), dtype=x.dtype)
    return total.reshape((1,) * x.ndim) if keepdims else total

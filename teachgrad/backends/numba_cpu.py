"""The numba CPU backend: the engine's arithmetic as hand-written parallel loops.

Select it with ``tg.backends.set_cpu_backend("numba")``. Arrays stay plain
``numpy.ndarray`` objects, so tensors move freely between this backend and the
numpy one; only *who computes* changes.

Every loop (in :mod:`teachgrad.backends.numba_loops`) is ordinary Python that numba
compiles to machine code.
``@njit(parallel=True)`` plus ``prange`` (a "parallel range") splits the
iterations of one loop over all CPU cores, the way a GPU launch splits work
over threads. A chapter puts three ways of computing side by side: these
loops, numpy (which calls tuned C and, for matmul, a BLAS library), and the
GPU kernels of :mod:`teachgrad.kernels`.

What is hand-written, and what is not:

* **elementwise** (``unary``, ``binary``, ``where``): one ``prange`` loop over
  the output; each input is read through its strides, so broadcast and
  transposed inputs are read in place (the same idea as
  :mod:`teachgrad.kernels.strided`). Except ``exp`` and ``tanh`` of floats,
  which run numpy's SIMD loops (:data:`_NUMPY_SIMD` says why).
* **reductions** (``sum``, ``max``, ``min``): the reduced axes are moved last,
  then rows, or pieces of long rows, are folded in parallel.
* **matmul**: three versions in :mod:`teachgrad.backends.numba_matmul`.
* **everything else** (reshape, permute, broadcast_to, getitem, concatenate,
  setitem, index_add, astype, argmax/argmin) comes from
  :class:`~teachgrad.backends.numpy_backend.NumpyBackend`: those operations
  move or relabel data rather than compute, so a hand-written loop would teach
  nothing new. Dtypes other than float32, float64 and int64 (e.g. bool arrays
  in arithmetic) also take numpy's path.

**Small arrays run on one core.** Waking the other cores costs a few
microseconds (milliseconds on a busy machine), so a loop over fewer than
:data:`GRAIN` elements switches to one thread, as PyTorch's CPU loops do.

**Compiling.** numba compiles a loop the first time it is called with a given
operation and dtype (a second or so each), and ``cache=True`` stores the
machine code on disk, so the next Python process loads it instead.
"""
from __future__ import annotations

import math

import numpy as np

from . import numba_flat, numba_matmul
from .base import COMPARISONS, Array, Scalar
from .numba_loops import (
    BINARY_CODES, CONTIGUOUS, LOOP_DTYPES, NO_STRIDES, REDUCE_CODES, UNARY_CODES, _shape_array,
    chunk_size, loop_operand, map_loop, parallel_for, reduce_loop, where_loop, zip_loop,
)
from .numpy_backend import NumpyBackend

#: Unary operations whose answer stays an integer for integer input (exp of an int does not).
_INTEGER_UNARY = {"neg", "abs", "relu", "sign", "step"}


#: Operations whose float loops are numpy's, not numba's. numba compiles ``math.exp`` and
#: ``math.tanh`` to one call of the C library's scalar function per element (it has no
#: vector versions of them without Intel's SVML), 5 to 40 times slower than numpy, which
#: ships its own SIMD loops for both (several elements per instruction, within an ulp or
#: two of the correctly rounded value). Same bits as the numpy backend, at its speed.
_NUMPY_SIMD = frozenset(("exp", "tanh"))


def _loops_handle(*arrays) -> bool:
    """Whether every array operand has a dtype the hand-written loops cover."""
    return all(np.dtype(x.dtype) in LOOP_DTYPES for x in arrays if isinstance(x, np.ndarray))


class NumbaCPUBackend(NumpyBackend):
    """CPU arrays computed by the parallel loops of :mod:`~teachgrad.backends.numba_loops`;
    layout operations by numpy."""

    name = "numba"
    device_type = "cpu"
    array_arithmetic = False  # (a NumpyBackend subclass: its arithmetic is its own loops)
    #: lerp_, addcmul_ and addcdiv_ take the compiled one-pass loops at every size (numba
    #: is loaded already; see :mod:`teachgrad.backends.pointwise_loops`)
    one_pass_bytes = 0

    #: Which matmul runs: "blocked" (default), "loop_order" or "naive"
    #: (see :mod:`teachgrad.backends.numba_matmul`).
    matmul_kernel = "blocked"

    def unary(self, op: str, x: Array) -> Array:
        if op in _NUMPY_SIMD and type(x) is np.ndarray and x.dtype in numba_flat.FLAT_DTYPES:
            return super().unary(op, x)  # numpy's SIMD loop (see _NUMPY_SIMD)
        out = numba_flat.unary(op, x)
        if out is not None:
            return out
        if not _loops_handle(x) or x.size == 0 or (x.dtype.kind == "i" and op not in _INTEGER_UNARY):
            return super().unary(op, x)
        out = np.empty(x.shape, dtype=x.dtype)
        kind, values, strides = loop_operand(x, x.shape, x.dtype)
        loop = map_loop(UNARY_CODES[op], kind, parallel_for(out.size))
        loop(out.reshape(-1), values, strides, _shape_array(x.shape))
        return out

    def binary(self, op: str, a: Array | Scalar, b: Array | Scalar) -> Array:
        out = numba_flat.binary(op, a, b)
        if out is not None:
            return out
        arrays = [x for x in (a, b) if isinstance(x, np.ndarray)]
        shape = np.broadcast_shapes(*(x.shape for x in arrays))
        if not _loops_handle(a, b) or len({x.dtype for x in arrays}) > 1 or 0 in shape:
            return super().binary(op, a, b)
        dtype = arrays[0].dtype
        out = np.empty(shape, dtype=np.bool_ if op in COMPARISONS else dtype)
        a_kind, a_values, a_strides = loop_operand(a, shape, dtype)
        b_kind, b_values, b_strides = loop_operand(b, shape, dtype)
        loop = zip_loop(BINARY_CODES[op], a_kind, b_kind, parallel_for(out.size))
        loop(out.reshape(-1), a_values, a_strides, b_values, b_strides, _shape_array(shape))
        return out

    def binary_inplace(self, op: str, x: Array, other: Array | Scalar) -> None:
        """``x = x op other``, the zip loop writing straight into ``x`` (an optimizer step)."""
        overlaps = isinstance(other, np.ndarray) and np.may_share_memory(x, other)
        if (op in COMPARISONS or not x.flags.c_contiguous or x.size == 0 or overlaps
                or not _loops_handle(x, other) or getattr(other, "dtype", x.dtype) != x.dtype):
            return super().binary_inplace(op, x, other)  # numpy buffers overlapping views
        other_kind, other_values, other_strides = loop_operand(other, x.shape, x.dtype)
        loop = zip_loop(BINARY_CODES[op], CONTIGUOUS, other_kind, parallel_for(x.size))
        flat = x.reshape(-1)  # a view: the loop reads element i of x, then overwrites it
        loop(flat, flat, NO_STRIDES, other_values, other_strides, _shape_array(x.shape))

    def where(self, cond: Array, a: Array | Scalar, b: Array | Scalar) -> Array:
        arrays = [x for x in (a, b) if isinstance(x, np.ndarray)]
        if not arrays or not _loops_handle(a, b) or len({x.dtype for x in arrays}) > 1:
            return super().where(cond, a, b)
        shape = np.broadcast_shapes(cond.shape, *(x.shape for x in arrays))
        if 0 in shape:
            return super().where(cond, a, b)
        dtype = arrays[0].dtype
        out = np.empty(shape, dtype=dtype)
        c_kind, c_values, c_strides = loop_operand(cond, shape, cond.dtype)
        a_kind, a_values, a_strides = loop_operand(a, shape, dtype)
        b_kind, b_values, b_strides = loop_operand(b, shape, dtype)
        loop = where_loop(c_kind, a_kind, b_kind, parallel_for(out.size))
        loop(out.reshape(-1), c_values, c_strides, a_values, a_strides, b_values, b_strides,
             _shape_array(shape))
        return out

    def reduce(self, op: str, x: Array, axes: tuple[int, ...] | None, keepdims: bool) -> Array:
        out = numba_flat.reduce(op, x, axes, keepdims)
        if out is not None:
            return out
        if not _loops_handle(x) or x.size == 0:
            return super().reduce(op, x, axes, keepdims)  # numpy's rules for empty arrays
        axes = tuple(range(x.ndim)) if axes is None else tuple(sorted(axes))
        kept = tuple(ax for ax in range(x.ndim) if ax not in axes)
        kept_shape = tuple(x.shape[ax] for ax in kept)
        # layout (numpy): the reduced axes last, one row per output value
        table = np.ascontiguousarray(np.transpose(x, kept + axes)).reshape(math.prod(kept_shape), -1)
        out = np.empty(table.shape[0], dtype=x.dtype)
        parallel = parallel_for(table.size)
        reduce_loop(REDUCE_CODES[op], parallel)(table, chunk_size(*table.shape, parallel), out)
        if keepdims:
            return out.reshape(tuple(1 if ax in axes else n for ax, n in enumerate(x.shape)))
        return out.reshape(kept_shape)

    def matmul(self, a: Array, b: Array) -> Array:
        if not _loops_handle(a, b) or a.dtype != b.dtype or a.ndim == 0 or b.ndim == 0:
            return super().matmul(a, b)
        return numba_matmul.matmul(a, b, self.matmul_kernel)

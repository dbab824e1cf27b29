"""Reductions: many numbers into one, with a tree in shared memory.

Summing ``n`` numbers one after another takes ``n`` steps. A block of threads
can do it in ``log2(threads)`` steps after a first sweep:

1. **Each thread folds its share.** Thread ``t`` walks its row with a
   grid-stride loop and combines what it meets into one private value.
2. **The tree.** The block's values go into *shared memory* (fast memory that
   every thread of the block can see). Then, ``step = threads/2, threads/4, ..., 1``:
   thread ``t < step`` combines ``partial[t]`` with ``partial[t + step]``.
   Half the threads drop out each step, like the rounds of a tournament.
3. **The barrier.** Before each step every thread must have finished the
   previous one, or thread ``t`` could read ``partial[t + step]`` before its
   owner wrote it. ``cuda.syncthreads()`` is that barrier: no thread of the
   block passes it until all have reached it. (Leave it out and the answer is
   sometimes wrong; :mod:`teachgrad.kernels.race` finds such bugs.)

A row longer than one block's share is split over ``gridDim.x`` blocks; each
writes a partial result and the kernel runs again on the partials until one
value per row is left. numpy spec::

    reduce_rows(x, op) == {"sum": x.sum, "max": x.max, "min": x.min}[op](axis=1)
    arg_reduce_rows(x, op) == {"argmax": x.argmax, "argmin": x.argmin}[op](axis=1)

Kernel-level API (``x`` a contiguous 2-D device array ``(rows, n)``, ``n >= 1``)::

    reduce_rows(op, x, threads=None) -> device array (rows,)        # op: sum | max | min
    arg_reduce_rows(op, x, threads=None) -> int64 device array (rows,)  # argmax | argmin
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda, from_dtype

from .. import _cuda_setup
from . import ops
from .caching_allocator import allocate
from .launch import device_limits, launch

_SIM = _cuda_setup.is_simulated()
#: Threads per block (a power of two, for the tree). Small in the simulator.
THREADS_PER_BLOCK = 16 if _SIM else 256
#: Most blocks that share one row before a second pass combines their partials.
MAX_BLOCKS_PER_ROW = 2 if _SIM else None  # None: 4 per multiprocessor
#: Most blocks along y; each takes every so-many-th row (a grid-stride loop over rows).
MAX_ROW_BLOCKS = 2 if _SIM else None  # None: the device's grid limit


# how two partial results combine (NaN wins in max and min, as in numpy)
_COMBINE = {"sum": ops.add, "max": ops.maximum, "min": ops.minimum}


def _identity(op: str, dtype: np.dtype):
    """The value that changes nothing: 0 for sum, the lowest value for max, the highest for min."""
    if op == "sum":
        return dtype.type(0)
    if dtype.kind == "f":
        return dtype.type(-math.inf if op == "max" else math.inf)
    if dtype.kind == "b":
        return np.bool_(op == "min")
    info = np.iinfo(dtype)
    return dtype.type(info.min if op == "max" else info.max)


@functools.lru_cache(maxsize=None)
def reduce_kernel(op: str, dtype: np.dtype, threads: int):
    """A block-tree reduction of each row of ``x`` into ``out[row, blockIdx.x]``."""
    combine = _COMBINE[op]
    identity = _identity(op, np.dtype(dtype))
    value_type = from_dtype(np.dtype(dtype))

    def tree_reduce_rows(x, out, rows, n):
        partial = cuda.shared.array(threads, value_type)
        t = cuda.threadIdx.x
        for row in range(cuda.blockIdx.y, rows, cuda.gridDim.y):
            # 1. each thread folds a grid-stride share of the row into one value
            acc = identity
            for col in range(cuda.blockIdx.x * threads + t, n, cuda.gridDim.x * threads):
                acc = combine(acc, x[row, col])
            partial[t] = acc
            cuda.syncthreads()  # every share is in shared memory before the tree reads it
            # 2. the tree: half the threads drop out each step
            step = threads // 2
            while step > 0:
                if t < step:
                    partial[t] = combine(partial[t], partial[t + step])
                cuda.syncthreads()  # this level is done before the next one reads it
                step //= 2
            if t == 0:
                out[row, cuda.blockIdx.x] = partial[0]
            cuda.syncthreads()  # partial[0] is read before the next row overwrites it

    kernel = cuda.jit(tree_reduce_rows)
    kernel.shared_bytes = threads * np.dtype(dtype).itemsize
    return kernel


def _check_power_of_two(threads: int) -> None:
    if threads < 1 or threads & (threads - 1):
        raise ValueError(f"the tree halves the threads each step: threads per block must be a "
                         f"power of two (e.g. 32 or 256), got {threads}")


def _check_rows_not_empty(op: str, n: int) -> None:
    if n == 0 and op != "sum":
        raise ValueError(f"{op} of an empty row has no value (rows of n = 0 elements): only sum "
                         "has one (0). Fix: give rows of at least one element")


def _grid(rows: int, n: int, threads: int) -> tuple[int, int]:
    cap = MAX_BLOCKS_PER_ROW or 4 * device_limits().multiprocessors
    blocks_per_row = max(1, min(cap, (n + threads - 1) // threads))
    # each pass must leave fewer values per row than it found, or it would never end
    blocks_per_row = min(blocks_per_row, max(1, n // 2))
    return blocks_per_row, min(rows, MAX_ROW_BLOCKS or device_limits().max_grid_dims[1])


def reduce_rows(op: str, x, threads: int | None = None):
    """Reduce each row of the 2-D device array ``x`` with ``op``; returns a ``(rows,)`` array."""
    threads = threads or THREADS_PER_BLOCK
    _check_power_of_two(threads)
    rows, n = x.shape
    _check_rows_not_empty(op, n)
    dtype = np.dtype(x.dtype)
    while True:
        blocks_per_row, row_blocks = _grid(rows, n, threads)
        out = allocate((rows, blocks_per_row), dtype)
        launch(reduce_kernel(op, dtype, threads), (blocks_per_row, row_blocks), threads, x, out, rows, n)
        if blocks_per_row == 1:
            return out.reshape(rows)
        x, n = out, blocks_per_row  # a second pass combines the blocks' partial results


# -- argmax / argmin: the same tree, carrying positions along ------------------------

@cuda.jit(device=True)
def prefer_second(value_a, index_a, value_b, index_b, want_max):
    """Whether ``(value_b, index_b)`` should win: the better value, NaN first, then the lower index."""
    if index_b < 0:
        return False
    if index_a < 0:
        return True
    a_nan = value_a != value_a
    b_nan = value_b != value_b
    if a_nan or b_nan:
        if a_nan and b_nan:
            return index_b < index_a
        return b_nan
    if value_b == value_a:
        return index_b < index_a
    if want_max:
        return value_b > value_a
    return value_b < value_a


@functools.lru_cache(maxsize=None)
def arg_reduce_kernel(op: str, dtype: np.dtype, threads: int):
    """One block per row; each shared slot holds a (value, position) pair."""
    want_max = op == "argmax"
    value_type = from_dtype(np.dtype(dtype))
    index_type = from_dtype(np.dtype(np.int64))
    zero = np.dtype(dtype).type(0)

    def tree_arg_reduce_rows(x, out, rows, n):
        best_values = cuda.shared.array(threads, value_type)
        best_indices = cuda.shared.array(threads, index_type)
        t = cuda.threadIdx.x
        for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
            value, index = zero, -1  # -1: this thread has seen nothing yet
            for col in range(t, n, threads):
                if prefer_second(value, index, x[row, col], col, want_max):
                    value, index = x[row, col], col
            best_values[t] = value
            best_indices[t] = index
            cuda.syncthreads()
            step = threads // 2
            while step > 0:
                if t < step and prefer_second(best_values[t], best_indices[t],
                                              best_values[t + step], best_indices[t + step], want_max):
                    best_values[t] = best_values[t + step]
                    best_indices[t] = best_indices[t + step]
                cuda.syncthreads()
                step //= 2
            if t == 0:
                out[row] = best_indices[0]
            cuda.syncthreads()

    kernel = cuda.jit(tree_arg_reduce_rows)
    kernel.shared_bytes = threads * (np.dtype(dtype).itemsize + 8)
    return kernel


def arg_reduce_rows(op: str, x, threads: int | None = None):
    """Position of the max (``argmax``) or min (``argmin``) of each row, int64 ``(rows,)``."""
    threads = threads or THREADS_PER_BLOCK
    _check_power_of_two(threads)
    rows, n = x.shape
    _check_rows_not_empty(op, n)
    out = allocate(rows, np.int64)
    grid = min(rows, MAX_ROW_BLOCKS or device_limits().max_grid_dims[0])
    launch(arg_reduce_kernel(op, np.dtype(x.dtype), threads), grid, threads, x, out, rows, n)
    return out

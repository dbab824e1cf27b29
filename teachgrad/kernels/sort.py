"""Sorting rows on the device: a *rank sort*, where every element finds its own place.

A sort on one CPU core moves elements around step by step. On a GPU there are
thousands of threads, so here is a sort with no moving at all until the end:
thread ``(row, i)`` counts how many elements of its row must come before its
own element -- that count *is* the place it goes to -- and writes it there.
No thread waits for another and no two threads write the same place, so there
is no barrier and no atomic. It costs ``n`` comparisons per element (``n²``
per row): fine for the rows of a lesson, top-k over a vocabulary, or a
simulator; a library for large arrays would use a merge or radix sort.

"Comes before" makes the sort **stable** (equal elements keep their order:
the lower position wins the tie) and puts NaN after every number, ascending,
as PyTorch does. numpy spec::

    order = np.argsort(x, axis=1, kind="stable")              # ascending
    values, indices = np.take_along_axis(x, order, 1), order

Kernel-level API (``x`` a contiguous 2-D device array ``(rows, n)``)::

    sort_rows(x, descending) -> (values, int64 indices), both (rows, n) device arrays
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from . import elementwise
from .caching_allocator import allocate
from .launch import launch


@cuda.jit(device=True)
def comes_before(value_a, index_a, value_b, index_b, descending):
    """Whether element ``a`` of a row sorts before element ``b`` (NaN last ascending)."""
    a_nan = value_a != value_a
    b_nan = value_b != value_b
    if a_nan or b_nan:
        if a_nan and b_nan:
            return index_a < index_b
        return a_nan if descending else b_nan
    if value_a == value_b:
        return index_a < index_b  # stable: ties keep their order
    if descending:
        return value_a > value_b
    return value_a < value_b


@functools.lru_cache(maxsize=None)
def rank_sort_kernel():
    def rank_sort(x, values, indices, rows, n, descending):
        for flat in range(cuda.grid(1), rows * n, cuda.gridsize(1)):
            row = flat // n
            mine = flat - row * n
            rank = 0  # how many elements of the row come before mine
            for other in range(n):
                if comes_before(x[row, other], other, x[row, mine], mine, descending):
                    rank += 1
            values[row, rank] = x[row, mine]
            indices[row, rank] = mine

    return cuda.jit(rank_sort)


def sort_rows(x, descending: bool):
    """Each row of the 2-D device array ``x`` sorted (stable): ``(values, indices)``."""
    rows, n = x.shape
    values = allocate((rows, n), x.dtype)
    indices = allocate((rows, n), np.int64)
    if rows * n:
        blocks, threads = elementwise.launch_config(rows * n)
        launch(rank_sort_kernel(), blocks, threads, x, values, indices, rows, n, bool(descending))
    return values, indices

"""Indexing on the device: views for slices, a gather for index arrays, and its backward.

*Basic* indexing (ints, slices, ``None``) never moves data: ``x[1:5:2]`` is the
same buffer with a new offset and stride (:func:`plan_index` works them out).

*Advanced* indexing with integer arrays, ``x[idx]``, picks arbitrary elements,
so it needs a kernel: a **gather**. Each output thread computes where its
element lives -- the basic axes step by their strides, the indexed axis looks
its position up in the index arrays -- and copies it. numpy spec::

    gather(x, index) == x[index]

Its backward is a **scatter-add**: every element of the gradient is added back
to the place it was read from. An index can repeat (``x[[0, 0, 1]]``), so two
threads may add to the same place at once; ``cuda.atomic.add`` makes each
read-add-write one indivisible step so no addition is lost. numpy spec::

    out = np.zeros(shape); np.add.at(out, index, values)

Kernel-level API (``index`` is a tuple of int, slice, None and int64
StridedArray; index arrays are not bounds-checked on the device)::

    plan_index(x, index) -> IndexPlan          # host-side: view or gather?
    gather(x, index) -> StridedArray
    scatter(out, index, values, accumulate)    # out[index] = values, or += with atomics
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numba import cuda

from . import elementwise
from .launch import launch
from .strided import StridedArray, as_operand, broadcast_view, contiguous_strides, new_array


@dataclass(frozen=True)
class IndexPlan:
    """How ``x[index]`` reads ``x``: a strided view, plus index arrays if any.

    ``shape``/``strides``/``offset`` describe the result with the indexed axes
    collapsed into one axis (``adv_axis``) of ``n_indexed`` positions, whose
    stride is 0: the index arrays supply that part of the position.
    """

    result_shape: tuple[int, ...]
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    adv_axis: int = -1  # -1: basic indexing only, the result is a view
    index_arrays: tuple = ()  # StridedArrays, broadcast together
    index_strides: tuple[int, ...] = ()  # x's stride along each indexed axis
    index_sizes: tuple[int, ...] = ()  # x's size along it (to wrap negative indices)


def _broadcast_shapes(shapes) -> tuple[int, ...]:
    return np.broadcast_shapes(*shapes)


def plan_index(x: StridedArray, index: tuple) -> IndexPlan:
    """Work out, on the host, how ``x[index]`` reads ``x`` (numpy's rules)."""
    index = tuple(index) if isinstance(index, tuple) else (index,)
    has_arrays = any(isinstance(item, StridedArray) for item in index)
    consumed = sum(1 for item in index if item is not None and item is not Ellipsis)
    if consumed > x.ndim:
        raise IndexError(f"too many indices: {consumed} given for a {x.ndim}-d array")
    fill = (slice(None),) * (x.ndim - consumed)  # what `...` (or nothing at the end) stands for
    at = next((i for i, item in enumerate(index) if item is Ellipsis), len(index))
    index = index[:at] + fill + tuple(item for item in index[at:] if item is not Ellipsis)

    offset, axis = x.offset, 0
    dims: list[tuple[int, int]] = []  # (size, stride) of every basic axis of the result
    arrays, index_strides, index_sizes = [], [], []
    advanced_at: list[int] = []  # tuple positions of advanced entries
    insert_at = None  # how many basic result axes come before the first advanced entry
    for position, item in enumerate(index):
        if item is None:
            dims.append((1, 0))
            continue
        size, stride = x.shape[axis], x.strides[axis]
        axis += 1
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            dims.append((len(range(start, stop, step)), stride * step))
            offset += start * stride
            continue
        if isinstance(item, StridedArray):
            arrays.append(item)
            index_strides.append(stride)
            index_sizes.append(size)
        else:  # an int
            if not isinstance(item, (int, np.integer)):
                raise TypeError(f"index {position} is a {type(item).__name__}: device indexing takes "
                                "ints, slices, None, ... and int64 arrays already on the device")
            i = int(item)
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for axis {axis - 1} with size {size}")
            offset += (i % size) * stride
        if has_arrays:  # with index arrays present, ints count as advanced (numpy's rule)
            advanced_at.append(position)
            if insert_at is None:
                insert_at = len(dims)

    if not arrays:
        shape = tuple(d[0] for d in dims)
        return IndexPlan(shape, shape, tuple(d[1] for d in dims), offset)
    # advanced entries next to each other keep their place; split apart, they go first
    if advanced_at[-1] - advanced_at[0] + 1 != len(advanced_at):
        insert_at = 0
    index_shape = _broadcast_shapes([a.shape for a in arrays])
    n_indexed = int(np.prod(index_shape, dtype=np.int64))
    basic_shape = [d[0] for d in dims]
    basic_strides = [d[1] for d in dims]
    result_shape = tuple(basic_shape[:insert_at]) + tuple(index_shape) + tuple(basic_shape[insert_at:])
    shape = tuple(basic_shape[:insert_at]) + (n_indexed,) + tuple(basic_shape[insert_at:])
    strides = tuple(basic_strides[:insert_at]) + (0,) + tuple(basic_strides[insert_at:])
    arrays = tuple(broadcast_view(a, index_shape) for a in arrays)
    return IndexPlan(result_shape, shape, strides, offset, insert_at, arrays,
                     tuple(index_strides), tuple(index_sizes))


def _stacked_indices(plan: IndexPlan):
    """The index arrays as one contiguous int64 ``(k, n_indexed)`` device array."""
    n = plan.shape[plan.adv_axis]
    stacked = new_array((len(plan.index_arrays), n), np.int64)
    for row, arr in enumerate(plan.index_arrays):
        shape = arr.shape
        destination = StridedArray(stacked.buffer, shape, contiguous_strides(shape), row * n)
        elementwise.copy(destination, arr)
    return stacked.buffer.reshape(len(plan.index_arrays), n)  # only called when n > 0


@cuda.jit(device=True)
def indexed_position(i, shape, strides, offset, adv_axis, indices, index_strides, index_sizes):
    """Where element ``i`` of ``x[index]`` lives in ``x``'s buffer."""
    position = offset
    for axis in range(len(shape) - 1, -1, -1):
        coord = i % shape[axis]
        i = i // shape[axis]
        if axis == adv_axis:
            # look the position up: one index array per indexed axis of x
            for j in range(len(index_strides)):
                idx = indices[j, coord]
                if idx < 0:
                    idx += index_sizes[j]
                position += idx * index_strides[j]
        else:
            position += coord * strides[axis]
    return position


@functools.lru_cache(maxsize=None)
def gather_kernel():
    def gather(out, n, x, shape, strides, offset, adv_axis, indices, index_strides, index_sizes):
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            out[i] = x[indexed_position(i, shape, strides, offset, adv_axis,
                                        indices, index_strides, index_sizes)]

    return cuda.jit(gather)


@functools.lru_cache(maxsize=None)
def scatter_kernel(accumulate: bool):
    def scatter(out, n, values, shape, strides, offset, adv_axis, indices, index_strides, index_sizes):
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            position = indexed_position(i, shape, strides, offset, adv_axis,
                                        indices, index_strides, index_sizes)
            if accumulate:
                cuda.atomic.add(out, position, values[i])  # repeated indices add up safely
            else:
                out[position] = values[i]

    return cuda.jit(scatter)


def _plan_args(plan: IndexPlan):
    return (plan.shape, plan.strides, plan.offset, plan.adv_axis, _stacked_indices(plan),
            plan.index_strides, plan.index_sizes)


def gather(x: StridedArray, index: tuple) -> StridedArray:
    """``x[index]``: a view for basic indexing, a gather kernel for index arrays."""
    plan = plan_index(x, index)
    if plan.adv_axis < 0:
        return x.view(plan.result_shape, plan.strides, plan.offset)
    out = new_array(plan.result_shape, x.dtype)
    n = out.size
    if n:
        blocks, threads = elementwise.launch_config(n)
        launch(gather_kernel(), blocks, threads, out.buffer, n, x.buffer, *_plan_args(plan))
    return out


def scatter(out: StridedArray, index: tuple, values, accumulate: bool) -> None:
    """In place: ``out[index] = values`` (or ``+=`` with atomics when ``accumulate``).

    Without ``accumulate``, a position indexed twice gets one of its values (which
    one is up to the hardware; numpy keeps the last).
    """
    plan = plan_index(out, index)
    if plan.adv_axis < 0:  # basic indexing: copy (or add) into a view
        target = out.view(plan.result_shape, plan.strides, plan.offset)
        if accumulate:
            total = new_array(target.shape, out.dtype)
            elementwise.binary("add", total, target, as_operand(values, target.shape))
            values = total
        elementwise.copy(target, as_operand(values, target.shape))
        return
    n = int(np.prod(plan.result_shape, dtype=np.int64))
    if n == 0:
        return
    dense = new_array(plan.result_shape, out.dtype)  # values, contiguous in result order
    elementwise.copy(dense, as_operand(values, plan.result_shape))
    blocks, threads = elementwise.launch_config(n)
    launch(scatter_kernel(accumulate), blocks, threads, out.buffer, n, dense.buffer, *_plan_args(plan))

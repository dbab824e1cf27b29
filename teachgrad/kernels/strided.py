"""A tensor's memory is a flat buffer; its shape is a way of reading it.

An n-dimensional array is stored as one flat run of numbers plus

* ``shape``   -- how many elements along each axis,
* ``strides`` -- how many *elements* to step in the buffer to move one along each axis,
* ``offset``  -- where element ``[0, 0, ...]`` sits in the buffer.

Element ``[i, j, k]`` lives at ``offset + i*strides[0] + j*strides[1] + k*strides[2]``.
That one formula makes many operations free, because they only change the
numbers, never the data:

* transpose / permute swaps strides;
* broadcasting sets a stride to 0 (every step along that axis reads the same element);
* slicing ``x[2:8:2]`` moves the offset and multiplies a stride.

Kernels receive a buffer plus ``(offset, strides, shape)`` and find each
element with :func:`strided_position`. numpy spec::

    def strided_position(i, shape, strides, offset):
        coords = np.unravel_index(i, shape)          # i counts in row-major order
        return offset + sum(c * s for c, s in zip(coords, strides))

:class:`StridedArray` is the ``cuda`` backend's array: a 1-D numba device
buffer plus this layout. Its metadata lives on the host (Python ints); only the
buffer lives on the device.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import cuda

from .caching_allocator import allocate


@cuda.jit(device=True)
def strided_position(i, shape, strides, offset):
    """Position in the flat buffer of the ``i``-th element in row-major order."""
    position = offset
    # peel coordinates off from the last axis, which varies fastest
    for axis in range(len(shape) - 1, -1, -1):
        coord = i % shape[axis]
        i = i // shape[axis]
        position += coord * strides[axis]
    return position


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major (C order) strides in elements: the last axis steps by 1."""
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


@dataclass(frozen=True)
class StridedArray:
    """A view into a flat device buffer: ``buffer`` + ``shape``/``strides``/``offset``."""

    buffer: object  # a 1-D numba device array
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements, not bytes
    offset: int = 0

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.buffer.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def is_contiguous(self) -> bool:
        """True when the elements sit in row-major order, back to back."""
        for size, stride, expected in zip(self.shape, self.strides, contiguous_strides(self.shape)):
            if size > 1 and stride != expected:
                return False
        return True

    def view(self, shape, strides, offset) -> "StridedArray":
        return StridedArray(self.buffer, tuple(shape), tuple(strides), int(offset))

    def kernel_layout(self) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        """``(offset, strides, shape)`` as kernels take them (at least 1-D: a scalar is shape (1,))."""
        if self.ndim == 0:
            return self.offset, (0,), (1,)
        return self.offset, self.strides, self.shape

    def __repr__(self) -> str:
        return (f"StridedArray(shape={self.shape}, strides={self.strides}, "
                f"offset={self.offset}, dtype={self.dtype})")


def new_array(shape: tuple[int, ...], dtype) -> StridedArray:
    """A fresh contiguous device array (uninitialised: no copy, no kernel)."""
    shape = tuple(int(s) for s in shape)
    size = int(np.prod(shape, dtype=np.int64))
    if size == 0:  # no memory, as in PyTorch (one uncounted element keeps kernels simple)
        buffer = cuda.device_array(1, dtype=np.dtype(dtype))
    else:
        buffer = allocate(size, dtype)  # counted device memory (caching_allocator)
    return StridedArray(buffer, shape, contiguous_strides(shape), 0)


def wrap(device_array) -> StridedArray:
    """View a contiguous numba device array of any shape as a :class:`StridedArray` (no copy)."""
    shape = tuple(device_array.shape)
    if device_array.size == 0:
        return new_array(shape, device_array.dtype)
    return StridedArray(device_array.reshape(device_array.size), shape, contiguous_strides(shape), 0)


def broadcast_view(x: StridedArray, shape: tuple[int, ...]) -> StridedArray:
    """``x`` read as ``shape`` (numpy broadcasting): a stride of 0 repeats an element."""
    shape = tuple(int(s) for s in shape)
    if len(shape) < x.ndim:
        raise ValueError(f"cannot broadcast shape {x.shape} to {shape}: it has fewer axes")
    lead = len(shape) - x.ndim
    strides = [0] * lead
    for size, stride, target in zip(x.shape, x.strides, shape[lead:]):
        if size == target:
            strides.append(stride)
        elif size == 1:
            strides.append(0)  # the one element, read again at every step
        else:
            raise ValueError(f"cannot broadcast shape {x.shape} to {shape}")
    return x.view(shape, strides, x.offset)


def as_operand(x, shape: tuple[int, ...]):
    """An operand of an elementwise kernel over ``shape``: a device array broadcast to it,
    or a Python scalar as it is."""
    return broadcast_view(x, shape) if isinstance(x, StridedArray) else x

"""When can a reshape be a *view*? The strides arithmetic behind ``.view()``.

A reshape keeps the data where it is only if every new dimension can be read
with a fixed stride. Splitting or merging dimensions that sit back to back in
memory works (``x.view(2, 3)`` of a contiguous ``(6,)``), merging dimensions that
do not (``x.t().view(6)``) would need a copy. PyTorch's ``.view()`` refuses that
case and ``.reshape()`` copies; this is the same test (ATen's ``computeStride``).
"""
from __future__ import annotations

import math


def view_strides(shape: tuple[int, ...], strides: tuple[int, ...],
                 new_shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """Strides (in elements) that read ``shape``/``strides`` as ``new_shape``, or None.

    Walk the old dimensions from the last one, grouping those that are contiguous
    with each other (stride[d] == stride[d+1] * size[d+1]); each group of old
    dimensions must hold exactly a run of whole new dimensions.
    """
    if math.prod(shape) == 0 or not shape:
        return _contiguous(new_shape)  # nothing (or one element) to read: any layout works
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1]
    tensor_numel = 1
    view_numel = 1
    for d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[d]
        # a group ends at the first dimension, or where the next one up is not contiguous with it
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base_stride = strides[d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))

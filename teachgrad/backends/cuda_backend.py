"""The ``cuda`` backend: every primitive runs as one of teachgrad's numba.cuda kernels.

Arrays are :class:`~teachgrad.kernels.strided.StridedArray`: a flat device
buffer plus shape, strides and offset. Data stays on the device from
``from_numpy`` to ``to_numpy``; those two are the only host<->device copies
(counted, see ``teachgrad.cuda.transfer_stats``). Layout changes (``permute``,
``broadcast_to``, slicing, most ``reshape``) are views: new strides, no kernel.
Python scalars travel as kernel arguments.

Which matmul kernel runs is a setting, so a chapter can switch between the
three it walks through::

    from teachgrad.backends import cuda_backend
    cuda_backend.MATMUL_KERNEL = "tiled"     # "naive", "tiled" or "register" (default)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import _cuda_setup
from ..kernels import elementwise, indexing, matmul as matmul_kernels, reduce as reduce_kernels
from ..kernels import sort as sort_kernels
from ..kernels.strided import (
    StridedArray, as_operand, broadcast_view, contiguous_strides, new_array,
)
from ..kernels.transfer import download, upload
from .base import COMPARISONS, Backend, Scalar
from .view_strides import view_strides

#: The matmul kernel the backend uses: "naive", "tiled" or "register".
MATMUL_KERNEL = "register"

#: A learner's kernels, while plugged (``tg.exercises.plug("cuda.map" | "cuda.reduce" |
#: "cuda.matmul", ...)``; :mod:`teachgrad.kernels.parts` fills and empties it):
#: "map" / "reduce" / "matmul" -> the function that runs the operation with that kernel.
#: Empty, the backend pays one dict read per operation.
PLUGGED: dict = {}


def _broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(
            f"shapes {' and '.join(map(str, shapes))} cannot be broadcast together"
        ) from None


def _shape_of(x) -> tuple[int, ...]:
    return x.shape if isinstance(x, StridedArray) else ()


def _prod(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


class CudaBackend(Backend):
    name = "cuda"
    device_type = "cuda"

    def __init__(self) -> None:
        _cuda_setup.require_cuda()

    # -- moving data ------------------------------------------------------------
    def from_numpy(self, a: np.ndarray) -> StridedArray:
        return upload(a)  # the one host-to-device copy

    def to_numpy(self, x: StridedArray) -> np.ndarray:
        return download(x)  # the one device-to-host copy

    # -- creating ---------------------------------------------------------------
    def full(self, shape, value: Scalar, dtype) -> StridedArray:
        out = new_array(tuple(shape), dtype)
        elementwise.copy(out, value)  # a scalar source: a fill kernel
        return out

    # -- elementwise ------------------------------------------------------------
    def unary(self, op: str, x: StridedArray) -> StridedArray:
        out = new_array(x.shape, x.dtype)
        (PLUGGED["map"] if PLUGGED and "map" in PLUGGED else elementwise.unary)(op, out, x)
        return out

    def binary(self, op: str, a, b) -> StridedArray:
        shape = _broadcast_shape(_shape_of(a), _shape_of(b))
        ref = a if isinstance(a, StridedArray) else b
        out = new_array(shape, np.bool_ if op in COMPARISONS else ref.dtype)
        elementwise.binary(op, out, as_operand(a, shape), as_operand(b, shape))
        return out

    def where(self, cond: StridedArray, a, b) -> StridedArray:
        shape = _broadcast_shape(cond.shape, _shape_of(a), _shape_of(b))
        arrays = [v for v in (a, b) if isinstance(v, StridedArray)]
        dtype = arrays[0].dtype if arrays else np.result_type(a, b)
        out = new_array(shape, dtype)
        elementwise.where(out, as_operand(cond, shape), as_operand(a, shape),
                          as_operand(b, shape))
        return out

    def astype(self, x: StridedArray, dtype) -> StridedArray:
        out = new_array(x.shape, dtype)
        elementwise.copy(out, x)  # the store converts
        return out

    # -- reductions -------------------------------------------------------------
    def reduce(self, op: str, x: StridedArray, axes, keepdims: bool) -> StridedArray:
        axes = tuple(range(x.ndim)) if axes is None else tuple(sorted(axes))
        kept = tuple(a for a in range(x.ndim) if a not in axes)
        out_shape = tuple(1 if a in axes else x.shape[a] for a in range(x.ndim)) if keepdims \
            else tuple(x.shape[a] for a in kept)
        rows, n = _prod([x.shape[a] for a in kept]), _prod([x.shape[a] for a in axes])
        if n == 0 and op != "sum":
            raise ValueError(f"{op} of an empty selection (shape {x.shape}, axes {axes}): "
                             "it has no identity; sum works, max and min need at least one element")
        if rows == 0 or n == 0:
            return self.full(out_shape, 0, x.dtype)
        # move the reduced axes last and lay the rows out back to back
        rows_view = self._dense(self.permute(x, kept + axes), (rows, n))
        if PLUGGED and op == "sum" and "reduce" in PLUGGED:
            result = PLUGGED["reduce"](rows_view)
        else:
            result = reduce_kernels.reduce_rows(op, rows_view)
        return StridedArray(result, out_shape, contiguous_strides(out_shape), 0)

    def arg_reduce(self, op: str, x: StridedArray, axis, keepdims: bool) -> StridedArray:
        if x.size == 0 and (axis is None or x.shape[axis] == 0):
            raise ValueError(f"attempt to get {op} of an empty sequence (shape {x.shape})")
        if axis is None:
            out_shape = (1,) * x.ndim if keepdims else ()
            rows, n = 1, x.size
            rows_view = self._dense(x, (rows, n))
        else:
            others = tuple(a for a in range(x.ndim) if a != axis)
            out_shape = tuple(1 if a == axis else x.shape[a] for a in range(x.ndim)) if keepdims \
                else tuple(x.shape[a] for a in others)
            rows, n = _prod([x.shape[a] for a in others]), x.shape[axis]
            if rows == 0:
                return self.full(out_shape, 0, np.int64)
            rows_view = self._dense(self.permute(x, others + (axis,)), (rows, n))
        result = reduce_kernels.arg_reduce_rows(op, rows_view)
        return StridedArray(result, out_shape, contiguous_strides(out_shape), 0)

    # -- linear algebra ---------------------------------------------------------
    def matmul(self, a: StridedArray, b: StridedArray) -> StridedArray:
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("matmul needs arrays with at least one axis, not scalars")
        a2 = self.reshape(a, (1,) + a.shape) if a.ndim == 1 else a  # (K,) is a 1 x K row
        b2 = self.reshape(b, b.shape + (1,)) if b.ndim == 1 else b  # (K,) is a K x 1 column
        (M, K), (K2, N) = a2.shape[-2:], b2.shape[-2:]
        if K != K2:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not fit "
                             f"({K} columns against {K2} rows)")
        batch_shape = _broadcast_shape(a2.shape[:-2], b2.shape[:-2])
        out_shape = batch_shape + (M, N)
        out = new_array(out_shape, a.dtype)
        if out.size:
            batch = _prod(batch_shape)
            A = self._as_batched(a2, batch_shape, batch)
            B = self._as_batched(b2, batch_shape, batch)
            C = out.buffer.reshape(batch, M, N)
            run = PLUGGED.get("matmul") if PLUGGED else None
            (run or matmul_kernels.KERNELS[MATMUL_KERNEL])(A, B, C)
        # drop the axes that 1-D operands gained
        if a.ndim == 1:
            out = self.reshape(out, out_shape[:-2] + out_shape[-1:])
        if b.ndim == 1:
            out = self.reshape(out, out.shape[:-1])
        return out

    def _as_batched(self, x: StridedArray, batch_shape, batch: int):
        """A contiguous ``(batch or 1, rows, cols)`` device array for the matmul kernels."""
        rows, cols = x.shape[-2:]
        if _prod(x.shape[:-2]) == 1:  # one matrix, shared by every product
            return self._dense(x, (1, rows, cols))
        return self._dense(broadcast_view(x, batch_shape + (rows, cols)), (batch, rows, cols))

    # -- layout -----------------------------------------------------------------
    def reshape(self, x: StridedArray, shape) -> StridedArray:
        shape = tuple(int(s) for s in shape)
        if -1 in shape:
            known = _prod([s for s in shape if s != -1])
            shape = tuple(x.size // known if s == -1 else s for s in shape)
        if _prod(shape) != x.size:
            raise ValueError(f"cannot reshape array of size {x.size} (shape {x.shape}) into shape {shape}")
        strides = view_strides(x.shape, x.strides, shape)
        if strides is not None:  # the layout allows a view: no copy (writes must reach x)
            return x.view(shape, strides, x.offset)
        source = self.contiguous(x)
        return source.view(shape, contiguous_strides(shape), source.offset)

    def permute(self, x: StridedArray, axes) -> StridedArray:
        axes = tuple(axes)
        return x.view(tuple(x.shape[a] for a in axes), tuple(x.strides[a] for a in axes), x.offset)

    def broadcast_to(self, x: StridedArray, shape) -> StridedArray:
        return broadcast_view(x, tuple(shape))

    def shares_memory(self, a: StridedArray, b: StridedArray) -> bool:
        return a.buffer is b.buffer  # a view keeps its base's buffer

    def is_contiguous(self, x: StridedArray) -> bool:
        return x.is_contiguous()

    def contiguous(self, x: StridedArray) -> StridedArray:
        return elementwise.contiguous(x)

    def concatenate(self, xs: Sequence[StridedArray], axis: int) -> StridedArray:
        first = xs[0]
        for x in xs[1:]:
            if x.ndim != first.ndim or any(x.shape[a] != first.shape[a]
                                           for a in range(first.ndim) if a != axis):
                raise ValueError(f"concatenate: shapes {first.shape} and {x.shape} differ "
                                 f"outside axis {axis}")
        shape = list(first.shape)
        shape[axis] = sum(x.shape[axis] for x in xs)
        out = new_array(tuple(shape), first.dtype)
        start = 0
        for x in xs:  # copy each input into its slab of the output
            slab = out.view(x.shape, out.strides, start * out.strides[axis])
            elementwise.copy(slab, x)
            start += x.shape[axis]
        return out

    # -- indexing ---------------------------------------------------------------
    def getitem(self, x: StridedArray, index: tuple) -> StridedArray:
        return indexing.gather(x, index)

    def index_add(self, shape, dtype, index: tuple, values: StridedArray) -> StridedArray:
        out = self.full(tuple(shape), 0, dtype)
        indexing.scatter(out, index, values, accumulate=True)
        return out

    def setitem(self, x: StridedArray, index: tuple, value) -> None:
        if isinstance(value, StridedArray) and value.buffer is x.buffer:
            value = self._copy(value)  # x[1:] = x[:-1] must read before it writes
        indexing.scatter(x, index, value, accumulate=False)

    # -- sorting ----------------------------------------------------------------
    def sort(self, x: StridedArray, axis: int, descending: bool):
        others = tuple(a for a in range(x.ndim) if a != axis)
        moved = self.permute(x, others + (axis,))  # the sorted axis last, rows back to back
        rows, n = _prod(moved.shape[:-1]), x.shape[axis]
        values, indices = sort_kernels.sort_rows(self._dense(moved, (rows, n)), descending)
        back = tuple(int(i) for i in np.argsort(others + (axis,)))
        return tuple(self.permute(StridedArray(a.reshape(-1), moved.shape,
                                               contiguous_strides(moved.shape), 0), back)
                     for a in (values, indices))

    # -- helpers ----------------------------------------------------------------
    def synchronize(self) -> None:
        from .. import streams

        streams.synchronize()  # every stream's queue, not only numba's

    def _copy(self, x: StridedArray) -> StridedArray:
        """A fresh contiguous copy made on the device (the strided copy kernel)."""
        out = new_array(x.shape, x.dtype)
        elementwise.copy(out, x)
        return out

    def _dense(self, x: StridedArray, shape: tuple[int, ...]):
        """x's elements as a contiguous numba device array of ``shape`` (copied only if needed)."""
        x = self.contiguous(x)
        return x.buffer[x.offset:x.offset + x.size].reshape(shape)

__all__ = ["CudaBackend", "MATMUL_KERNEL", "PLUGGED"]

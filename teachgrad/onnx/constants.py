"""Constants made inside the model whose size follows a dynamic axis.

A model that builds a tensor from a size (``tg.zeros(mask.shape)``, ``tg.arange(T)``)
leaves a constant of the traced size in the graph. Stored as an initializer it would
be right at that size only. Three kinds are still right at every size, and are written
as the operations that make them at run time, with sizes read from the inputs' shapes
(the same second trace that makes reshapes dynamic says which input axis each size
follows, see :mod:`teachgrad.onnx.writer`):

* every element the same (zeros, ones, a fill): ``Expand(value, shape)``;
* ``0, 1, ..., n - 1`` (positions): ``Range(0, n, 1)``;
* a triangle of one value over another (a causal mask): ``Where(Trilu(ones), a, b)``.

Any other such constant is refused, with the way out.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..jit.ir import Node, Ref
from .errors import UnsupportedOperatorError


def write(writer: Any, node: Node, value: np.ndarray, name: str) -> None:
    """Write the constant of get_attr ``node`` (``value``) as the ONNX value ``name``."""
    twin = writer.other.get(node.name) if writer.other is not None else None
    if twin is None or twin.meta[0].shape == node.meta[0].shape:
        writer.initializers.append(writer.onnx.numpy_helper.from_array(value, name))
        return
    other = writer.other_constants[twin.target].detach().cpu().numpy()
    pieces = [size if size == size2 else _input_axis(writer, size, size2)
              for size, size2 in zip(value.shape, other.shape)]
    if None not in pieces:  # (else a size follows no input axis: nothing to read it from)
        triangle = _triangle(value)
        if _filled(value) and _filled(other) and value.flat[0] == other.flat[0]:
            fill = writer.constant(value.flat[0], value.dtype, node.name)
            writer.emit("Expand", [fill, writer.shape_from_pieces(node, pieces)], node, [name])
            return
        if _positions(value) and _positions(other):
            _write_positions(writer, node, pieces, value.dtype, name)
            return
        if triangle is not None and triangle == _triangle(other):
            _write_triangle(writer, node, pieces, triangle, value.dtype, name)
            return
    raise UnsupportedOperatorError(
        f"ONNX export: the constant {node.target!r} {writer.where(node)} has a size that "
        f"follows a dynamic axis ({list(value.shape)} at the example size, "
        f"{list(other.shape)} at another); the file would store one size, and it is none of "
        "one value repeated, the positions 0..n-1, a triangle. Fix: make it from the input with "
        "tensor operations (x * 0 + 1 instead of tg.ones(x.shape)), or keep that axis static.")


def _write_positions(writer: Any, node: Node, pieces: list, dtype: Any, name: str) -> None:
    """``Range(0, n, 1)`` with ``n`` read from an input's shape at run time."""
    start, step = (writer.constant(v, dtype, node.name) for v in (0, 1))
    length = writer.emit("Squeeze", [writer.shape_from_pieces(node, pieces)], node,
                         writer.temp(node, "length"))
    if dtype != np.int64:  # (Range wants its three numbers in the output's dtype)
        length = writer.emit("Cast", [length], node, writer.temp(node, "length"),
                             to=writer.helper.np_dtype_to_tensor_dtype(dtype))
    writer.emit("Range", [start, length, step], node, [name])


def _input_axis(writer: Any, size: int, size2: int) -> tuple[Ref, int] | None:
    """The graph input axis that is ``size`` long here and ``size2`` in the second trace."""
    for holder in writer.graph.placeholders:
        pairs = zip(holder.meta[0].shape, writer.other[holder.name].meta[0].shape)
        for axis, pair in enumerate(pairs):
            if pair == (size, size2):
                return Ref(holder.name), axis
    return None


def _filled(value: np.ndarray) -> bool:
    return value.size > 0 and bool(np.all(value == value.flat[0]))


def _positions(value: np.ndarray) -> bool:
    return value.ndim == 1 and np.array_equal(value, np.arange(value.size))


def _triangle(value: np.ndarray) -> tuple[bool, int, Any, Any] | None:
    """``(upper, k, inside, outside)`` when ``value`` is ``inside`` on ``tril(k)`` (``triu(k)``
    when ``upper``) and ``outside`` elsewhere, both parts non-empty; else None."""
    if value.ndim != 2 or value.size == 0:
        return None
    rows, cols = value.shape
    for upper in (False, True):
        # triu(k) turned by 180 degrees is tril(cols - rows - k): one search serves both
        seen = value[::-1, ::-1] if upper else value
        inside, outside = seen[-1, 0], seen[0, -1]
        if inside == outside:
            continue
        # row i of tril(k) holds i + k + 1 inside values (clipped to 0..cols): one row that
        # is neither empty nor full tells k (none: a single column, k from its first row)
        counts = np.sum(seen == inside, axis=1)
        partial = np.flatnonzero((counts > 0) & (counts < cols))
        i = int(partial[0]) if partial.size else int(np.argmax(counts == cols))
        k = int(counts[i]) - 1 - i
        lower = np.tril(np.ones(seen.shape, dtype=bool), k)
        if np.array_equal(seen, np.where(lower, inside, outside).astype(seen.dtype)):
            return upper, (cols - rows - k if upper else k), inside.item(), outside.item()
    return None


def _write_triangle(writer: Any, node: Node, pieces: list, triangle: tuple, dtype: Any,
                    name: str) -> None:
    """``Where(Trilu(ones of the run-time shape, k), inside, outside)``; for booleans the band
    cast to bool, or its ``Not`` (runtimes lack Trilu and Where kernels for booleans)."""
    upper, k, inside, outside = triangle
    ones = writer.emit("Expand", [writer.constant(1, np.int64, node.name),
                                  writer.shape_from_pieces(node, pieces)], node, writer.temp(node, "ones"))
    band = writer.emit("Trilu", [ones, writer.constant(k, np.int64, node.name)], node,
                       writer.temp(node, "trilu"), upper=int(upper))
    if dtype == np.bool_:  # the band is the mask itself, or its complement
        keep = writer.emit("Cast", [band], node, [name] if inside else writer.temp(node, "keep"),
                           to=writer.onnx.TensorProto.BOOL)
        if not inside:
            writer.emit("Not", [keep], node, [name])
        return
    keep = writer.emit("Cast", [band], node, writer.temp(node, "keep"),
                       to=writer.onnx.TensorProto.BOOL)
    writer.emit("Where", [keep, writer.constant(inside, dtype, node.name),
                          writer.constant(outside, dtype, node.name)], node, [name])

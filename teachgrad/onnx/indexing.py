"""ONNX translations of slicing, ``tril``/``triu`` and ``masked_fill`` (what attention uses):
``x[:, :, a:b]`` -> ``Slice`` (then ``Squeeze`` for integer indices), ``Triangle`` ->
``Trilu``, ``masked_fill(mask, v)`` -> ``Where(mask, v, x)``. Each is a method-like function
``(writer, node, *node.args)`` that the writer's table lists."""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import UnsupportedOperatorError

LAST = np.iinfo(np.int64).max  # "to the end" for a Slice, whatever the axis' length


def _unsupported(writer: Any, node: Any, what: str) -> Exception:
    return UnsupportedOperatorError(
        f"ONNX export: indexing with {what} {writer.where(node)} has no ONNX translation in "
        "teachgrad's exporter (integers and slices do). Fix: index with slices, or index "
        "outside the exported model")


def index(writer: Any, node: Any, x: Any, items: tuple) -> None:
    """Basic indexing (integers and slices, one per leading axis) as ``Slice`` + ``Squeeze``."""
    starts, ends, axes, steps, dropped = [], [], [], [], []
    for axis, item in enumerate(_without_ellipsis(items, len(writer.meta(x).shape))):
        if isinstance(item, slice):
            if item == slice(None):
                continue  # the whole axis: nothing to cut
            step = 1 if item.step is None else item.step
            if step < 1:
                raise _unsupported(writer, node, f"the step {step}")
            start, stop = item.start or 0, LAST if item.stop is None else item.stop
        elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            start, stop, step = int(item), (int(item) + 1) or LAST, 1
            dropped.append(axis)
        else:
            raise _unsupported(writer, node, f"a {type(item).__name__}")
        starts.append(start), ends.append(stop), axes.append(axis), steps.append(step)
    if not axes:
        writer.emit("Identity", [writer.name(x)], node)
        return
    inputs = [writer.name(x)] + [writer.ints(v, node) for v in (starts, ends, axes, steps)]
    if not dropped:
        writer.emit("Slice", inputs, node)
        return
    cut = writer.emit("Slice", inputs, node, writer.temp(node, "slice"))
    writer.emit("Squeeze", [cut, writer.ints(dropped, node)], node)


def _without_ellipsis(items: tuple, rank: int) -> tuple:
    """``x[..., 1]`` as ``x[:, :, 1]``: the ellipsis stands for the axes no other item takes."""
    where = [i for i, item in enumerate(items) if item is Ellipsis]
    if not where:
        return items
    at = where[0]
    rest = items[:at] + items[at + 1:]
    return items[:at] + (slice(None),) * (rank - len(rest)) + items[at + 1:]


def triangle(writer: Any, node: Any, x: Any, diagonal: int, upper: bool) -> None:
    """``tril``/``triu`` -> ``Trilu`` (opset 14 and later)."""
    writer.emit("Trilu", [writer.name(x), writer.constant(int(diagonal), np.int64, node.name)],
                node, upper=int(bool(upper)))


def masked_fill(writer: Any, node: Any, x: Any, mask: Any, value: Any) -> None:
    """``x.masked_fill(mask, value)`` -> ``Where(mask, value, x)``."""
    writer.emit("Where", [writer.name(mask), writer.value(value, node), writer.name(x)], node)

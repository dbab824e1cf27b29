"""AccessMap: who read and wrote each element of a kernel's arrays, from a recorded launch.

::

    record = record_accesses(kernel, blocks, threads, *args)   # teachgrad.kernels.record
    AccessMap(record)                   # every array argument of the kernel
    AccessMap(record, arrays=["bins"])  # just one

One grid per array (rows of at most 32 cells for a 1-D array, each row
labelled with its first index; a 2-D array keeps its shape). A cell's colour is the
block of the thread that wrote it (white: never written, red: written by
several threads without an atomic); its label is that thread's global number
``tN`` (``A`` for atomic updates, with their count), and the small number under
it counts the reads. Everything comes from the recorded launch.
"""
from __future__ import annotations

from typing import Any, Sequence

import ipywidgets as widgets
import numpy as np

from . import _svg
from ._display import StaticSVG

CELL = 30
MAX_COLUMNS = 32


def _cell_label(record: Any, name: str, index: tuple, writers: dict, atomics: np.ndarray) -> tuple[str, str]:
    """(fill colour, label) of one cell."""
    if atomics[index]:
        return _svg.category_colour(7, 0.55), f"A{int(atomics[index])}"
    who = writers.get(index, ())
    if not who:
        return "#ffffff", ""
    if len(who) > 1:
        return _svg.lighten(_svg.RED, 0.35), f"{len(who)}×"
    (access,) = who
    block = access.block[0] + access.block[1] * record.grid[0]
    return _svg.category_colour(block), f"t{record.global_thread(access)}"


def _cells(values: np.ndarray) -> list[tuple[tuple, int, int]]:
    """(index, row, column) of every element: a 1-D array wraps into rows of
    ``MAX_COLUMNS`` cells (so a long one is drawn whole, not cut off); a 2-D
    array keeps its own rows and columns."""
    if values.ndim == 1:
        return [((k,), k // MAX_COLUMNS, k % MAX_COLUMNS) for k in range(values.size)]
    grid = values.reshape(values.shape[0], -1)
    return [((r, c), r, c) for r in range(grid.shape[0]) for c in range(grid.shape[1])]


def draw_access_map(record: Any, arrays: Sequence[str] | None = None) -> str:
    """SVG of an :class:`~teachgrad.kernels.record.AccessRecord` (global arrays only)."""
    names = list(arrays) if arrays is not None else list(record.arrays)
    body, y = [], 14
    body.append(_svg.text(4, y, f"{record.kernel}[{record.grid}, {record.block}]: who wrote "
                                "each element (colour: block, tN: thread; small: reads)",
                          12, "start", "bold"))
    y += 16
    width = 300
    for name in names:
        values = record.arrays[name]
        writers: dict[tuple, list] = {}
        for access in record.of(name, "W"):
            who = writers.setdefault(access.index, [])
            if all(record.global_thread(a) != record.global_thread(access) for a in who):
                who.append(access)
        atomics = record.counts(name, "A")
        reads = record.counts(name, "R")
        body.append(_svg.text(4, y + 6, f"{name} {list(values.shape)}", 11, "start", "bold"))
        y += 14
        cells = _cells(values)
        wrapped = values.ndim == 1 and values.size > MAX_COLUMNS
        left = 34 if wrapped else 10  # room for each wrapped row's first index
        rows = 1 + max((row for _, row, _ in cells), default=0)
        for index, row, col in cells:
            fill, label = _cell_label(record, name, index, writers, atomics)
            x0, y0 = left + col * CELL, y + row * (CELL + 2)
            if wrapped and col == 0:
                body.append(_svg.text(left - 4, y0 + CELL / 2, f"[{index[0]}]", 8, "end",
                                      fill="#666666"))
            tip = f"{name}{list(index)}: written by {label or 'nobody'}, read {int(reads[index])}x"
            body.append(_svg.rect(x0, y0, CELL - 2, CELL, fill, "#999999", title=tip))
            body.append(_svg.text(x0 + CELL / 2 - 1, y0 + CELL * 0.38, label, 8))
            if reads[index]:
                body.append(_svg.text(x0 + CELL / 2 - 1, y0 + CELL * 0.78, str(int(reads[index])),
                                      7, fill="#666666"))
            width = max(width, left + 10 + (col + 1) * CELL)
        y += rows * (CELL + 2) + 10
    return _svg.document(width + 10, y, body, "access-map")


class AccessMap(StaticSVG, widgets.VBox):
    """The picture of one recorded launch (see the module docstring)."""

    def __init__(self, record: Any, arrays: Sequence[str] | None = None) -> None:
        unknown = sorted(set(arrays or ()) - set(record.arrays))
        if unknown:
            raise ValueError(f"no array named {', '.join(unknown)} in this launch; it has "
                             f"{', '.join(record.arrays)}")
        self.record, self.arrays = record, arrays
        self.canvas = widgets.HTML(self.to_svg())
        super().__init__([self.canvas])

    def to_svg(self) -> str:
        return draw_access_map(self.record, self.arrays)

    @classmethod
    def launch(cls, kernel: Any, grid: Any, block: Any, *args: Any,
               arrays: Sequence[str] | None = None) -> widgets.Widget:
        """Record one simulated launch of ``kernel`` and draw it.

        A kernel that is still the learner edition's stub gives a short note
        instead, so a chapter runs top to bottom before its exercises are done.
        """
        from teachgrad.exercises.kernel_runs import is_stub
        from teachgrad.kernels.record import record_accesses

        if is_stub(kernel):
            name = getattr(getattr(kernel, "py_func", kernel), "__name__", "the kernel")
            return widgets.HTML(f"⏳ fill in <code>{name}</code> above to see its recorded launch")
        return cls(record_accesses(kernel, grid, block, *args), arrays)

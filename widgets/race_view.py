"""RaceView: shared-memory races between barriers, with the cells and threads involved.

::

    RaceView()                                  # the block-sum lesson, with/without a barrier
    RaceView.check(kernel, grid, block, *args)  # any kernel of yours

The kernel runs once in numba's CUDA simulator with every shared-memory read
and write logged (:func:`teachgrad.kernels.race.race_check`). The picture has
one row per shared cell and one column per stretch between two barriers; each
box lists which threads wrote (W) and read (R) the cell there. A red box is a
**race**: one thread wrote the cell and another touched it with no barrier in
between, so the result depends on which ran first. A missing
``cuda.syncthreads()`` is the usual cause — and the answer is often right
anyway, which is why looking at answers does not find it.
"""
from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import Any

import ipywidgets as widgets
import numpy as np

from . import _svg
from ._display import StaticSVG


def _thread_name(thread: tuple[int, int, int]) -> str:
    return str(thread[0]) if thread[1:] == (0, 0) else str(thread)


def draw_races(report: Any, block: int = 0) -> str:
    """SVG: shared cells × barrier intervals of one block, races in red."""
    block_id = (block, 0, 0)
    boxes: dict[tuple, dict[str, set]] = defaultdict(lambda: {"W": set(), "R": set()})
    for a in report.accesses:
        if a.block == block_id and a.kind in "RW":
            boxes[(a.array, a.index, a.epoch)][a.kind].add(a.thread)
    racing = {(r.array, r.index, r.epoch) for r in report.races if r.block == block_id}
    cells = sorted({(array, index) for array, index, _ in boxes})
    epochs = range(report.barriers + 1)
    width_box, height_box, left, top = 130, 24, 90, 44
    body = [_svg.text(4, 12, f"block {block}: shared-memory accesses between barriers "
                      "(W = wrote, R = read, by thread)", 12, "start", "bold")]
    for e in epochs:
        if e == 0:
            label = "before barrier 1" if report.barriers else "no barrier"
        else:
            label = f"barrier {e} → {e + 1}" if e < report.barriers else f"after barrier {e}"
        body.append(_svg.text(left + e * width_box + width_box / 2, top - 10, label, 10))
    for row, (array, index) in enumerate(cells):
        y = top + row * height_box
        body.append(_svg.text(left - 6, y + height_box / 2,
                              f"{array}[{', '.join(map(str, index))}]", 10, "end"))
        for e in epochs:
            x = left + e * width_box
            seen = boxes.get((array, index, e))
            race = (array, index, e) in racing
            fill = "#f8c9c9" if race else ("#eef5ea" if seen else "#fafafa")
            words = ""
            if seen:
                parts = [f"{kind} {','.join(_thread_name(t) for t in sorted(seen[kind]))}"
                         for kind in "WR" if seen[kind]]
                words = "  ".join(parts)
            body.append(_svg.rect(x, y, width_box - 2, height_box - 2, fill,
                                  _svg.RED if race else "#dddddd", 2 if race else 1,
                                  title=("RACE: " if race else "") + words,
                                  attrs=f'data-race="{str(race).lower()}"'))
            body.append(_svg.text(x + width_box / 2, y + height_box / 2 - 1, words, 9))
    height = top + max(len(cells), 1) * height_box + 10
    width = max(left + len(epochs) * width_box + 10, 600)  # room for the title
    return _svg.document(width, height, body, "race-view")


def verdict_html(report: Any) -> str:
    """The checker's verdict: green when clean, red with every offending cell otherwise."""
    if report.ok:
        return (f'<div class="teachgrad-race" data-races="0" style="color:#2a7a2a">'
                f"<b>No races.</b> {escape(report.summary())}</div>")
    cells = "; ".join(f"{name}: " + ", ".join("[" + ", ".join(map(str, i)) + "]" for i in found)
                      for name, found in report.offending_indices.items())
    items = "".join(f"<li>{escape(r.describe())}</li>" for r in report.races[:12])
    more = f"<li>… and {len(report.races) - 12} more</li>" if len(report.races) > 12 else ""
    return (f'<div class="teachgrad-race" data-races="{len(report.races)}" style="color:#a11">'
            f"<b>{len(report.races)} race(s) in {escape(report.kernel)}</b> — a missing "
            f"<code>cuda.syncthreads()</code>? Offending cells: {escape(cells)}"
            f"<ul>{items}{more}</ul></div>")


def block_sum_lesson(threads: int, blocks: int,
                     tree_barrier: bool) -> tuple[Any, np.ndarray, np.ndarray]:
    """Race-check the lesson's block sum; returns (report, its answer, numpy's answer)."""
    from teachgrad.kernels.race import block_sum_kernel, race_check

    x = np.arange(1, threads * blocks + 1, dtype=np.float64)
    out = np.zeros(blocks)
    report = race_check(block_sum_kernel(threads, tree_barrier), blocks, threads, x, out)
    return report, out, np.add.reduceat(x, range(0, len(x), threads))


class RaceView(StaticSVG, widgets.VBox):
    """The race checker's findings as a picture.

    With no ``report``, the lesson: a block-wide tree sum whose barrier inside
    the tree loop can be switched off. Pass a :class:`~teachgrad.kernels.race.RaceReport`
    (or use :meth:`check`) to look at your own kernel.
    """

    def __init__(self, report: Any = None, threads: int = 8, blocks: int = 2) -> None:
        self.threads, self.blocks = threads, blocks
        self.barrier_toggle = widgets.ToggleButtons(
            options=[("with the barrier", True), ("without it", False)], value=True,
            description="tree loop", disabled=report is not None)
        self.block_picker = widgets.Dropdown(options=[0], value=0, description="block")
        self.verdict = widgets.HTML()
        self.answer = widgets.HTML()
        self.canvas = widgets.HTML()
        controls = [self.block_picker] if report is not None else [self.barrier_toggle,
                                                                   self.block_picker]
        super().__init__([widgets.HBox(controls), self.verdict, self.answer, self.canvas])
        self.barrier_toggle.observe(lambda change: self.run_lesson(), names="value")
        self.block_picker.observe(lambda change: self._draw(), names="value")
        if report is None:
            self.run_lesson()
        else:
            self.show(report)

    @classmethod
    def check(cls, kernel: Any, grid: Any, block: Any, *args: Any) -> "RaceView":
        """Race-check ``kernel[grid, block](*args)`` and show the report."""
        from teachgrad.kernels.race import race_check

        return cls(race_check(kernel, grid, block, *args))

    def run_lesson(self) -> None:
        """Check the block sum with or without its tree barrier (the toggle)."""
        report, got, expected = block_sum_lesson(self.threads, self.blocks,
                                                 self.barrier_toggle.value)
        if not np.array_equal(got, expected):
            outcome = "different: the race changed the answer this time"
        elif report.ok:
            outcome = "the same"
        else:
            outcome = "the same — a right answer does not prove there is no race"
        self.answer.value = (f"<small>Block sums computed: {got.tolist()}; numpy: "
                             f"{expected.tolist()}: {outcome}.</small>")
        self.show(report)

    def show(self, report: Any) -> None:
        """Show ``report`` (a :class:`~teachgrad.kernels.race.RaceReport`)."""
        self.report = report
        racing_blocks = [r.block[0] for r in report.races]
        blocks = sorted({a.block[0] for a in report.accesses}) or [0]
        # setting the options may fire _draw: the report is in place by then
        self.block_picker.options = blocks
        self.block_picker.value = racing_blocks[0] if racing_blocks else blocks[0]
        self.verdict.value = verdict_html(report)
        self._draw()

    def _draw(self) -> None:
        self.canvas.value = f'<div style="overflow:auto">{self.to_svg()}</div>'

    def to_svg(self) -> str:
        return draw_races(self.report, self.block_picker.value)

"""ThreadMap: which GPU thread handled which element, recorded from a real launch.

::

    ThreadMap(n=40, blocks=2, threads_per_block=8)

Each redraw launches teachgrad's grid-stride elementwise kernel in recording
mode (:func:`teachgrad.kernels.record.record_elementwise`) — on the GPU when
there is one, else in numba's CUDA simulator — and draws what it wrote down:
for every element, the block, the thread and the *pass* of the loop.

Two pictures of the same record:

* **memory order**: the elements as they sit in memory, coloured by owner.
  Neighbouring elements belong to neighbouring threads, on every pass: that is
  what lets a GPU combine their reads (coalescing).
* **threads × passes**: one column per thread of the grid, one row per trip
  of the loop. With fewer threads than elements the table has several rows;
  with more threads than elements, some columns stay empty (idle threads).
"""
from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from . import _svg
from ._display import StaticSVG

#: Slider limits: the simulator runs one OS thread per CUDA thread, so stay small.
MAX_ELEMENTS, MAX_BLOCKS, MAX_THREADS_PER_BLOCK = 128, 8, 32


def owner_colours(record: Any, colour_by: str) -> list[str]:
    """A fill colour per element: by its block, its thread (within the grid) or its pass."""
    if colour_by == "block":
        return [_svg.category_colour(b) for b in record.block.tolist()]
    if colour_by == "thread":
        return [_svg.ramp_colour(g, record.total_threads) for g in record.global_thread.tolist()]
    if colour_by == "pass":
        return [_svg.category_colour(p, 0.35) for p in record.pass_.tolist()]
    raise ValueError(f"colour_by must be 'block', 'thread' or 'pass', not {colour_by!r}")


def draw_thread_map(record: Any, colour_by: str = "block") -> str:
    """SVG of a :class:`~teachgrad.kernels.record.LaunchRecord` (both pictures)."""
    colours = owner_colours(record, colour_by)
    cell = 30 if record.total_threads <= 32 else 22
    font = 10 if cell == 30 else 8
    per_row = 32  # memory-order strip: wrap after this many elements
    body, y = [], 14
    titles = ("Memory order: element i, handled by grid thread tN",
              "Threads × passes of the grid-stride loop (cell: element i)")
    body.append(_svg.text(4, y, titles[0], 12, "start", "bold"))
    y += 12
    for i in range(record.n):
        x0, y0 = 40 + (i % per_row) * cell, y + (i // per_row) * (cell + 4)
        tip = (f"element {i}: block {record.block[i]}, thread {record.thread[i]}, "
               f"pass {record.pass_[i]}")
        body.append(_svg.rect(x0, y0, cell - 1, cell, colours[i], title=tip))
        body.append(_svg.text(x0 + cell / 2, y0 + cell * 0.33, str(i), font, weight="bold"))
        body.append(_svg.text(x0 + cell / 2, y0 + cell * 0.72, f"t{record.global_thread[i]}",
                              font - 1))
    y += ((record.n - 1) // per_row + 1) * (cell + 4) + 18

    body.append(_svg.text(4, y, titles[1], 12, "start", "bold"))
    y += 14
    for b in range(record.blocks):  # block headers over their threads
        x0 = 60 + b * record.threads_per_block * cell
        body.append(_svg.rect(x0, y, record.threads_per_block * cell - 2, 16,
                              _svg.category_colour(b, 0.2) if colour_by == "block" else "#dddddd"))
        body.append(_svg.text(x0 + record.threads_per_block * cell / 2, y + 8, f"block {b}", 10,
                              fill="#ffffff" if colour_by == "block" else "#222222"))
    y += 18
    for g in range(record.total_threads):
        thread_in_block = g % record.threads_per_block
        body.append(_svg.text(60 + g * cell + cell / 2, y + 6, str(thread_in_block), 8))
    y += 14
    where = {(int(p), int(g)): i for i, (p, g) in
             enumerate(zip(record.pass_.tolist(), record.global_thread.tolist()))}
    for p in range(max(record.passes, 1)):
        y0 = y + p * (cell + 2)
        body.append(_svg.text(54, y0 + cell / 2, f"pass {p}", 10, "end"))
        for g in range(record.total_threads):
            x0 = 60 + g * cell
            i = where.get((p, g))
            if i is None:  # this thread had nothing to do on this pass
                body.append(_svg.rect(x0, y0, cell - 2, cell, _svg.IDLE, "#bbbbbb", dashed=True,
                                      title=f"thread {g}: idle on pass {p}"))
            else:
                body.append(_svg.rect(x0, y0, cell - 2, cell, colours[i], title=f"element {i}"))
                body.append(_svg.text(x0 + cell / 2 - 1, y0 + cell / 2, str(i), font))
    height = y + max(record.passes, 1) * (cell + 2) + 8
    title_width = 8 + 7 * max(len(t) for t in titles)  # 12 px bold: about 7 px a character
    width = max(60 + record.total_threads * cell, 40 + min(record.n, per_row) * cell,
                title_width) + 10
    return _svg.document(width, height, body, "thread-map")


def describe(record: Any) -> str:
    """What the launch did, in words (HTML)."""
    total = record.total_threads
    line = (f"{record.n} elements, {record.blocks} block(s) × {record.threads_per_block} "
            f"thread(s) = <b>{total} threads</b>. ")
    if total < record.n:
        line += (f"Fewer threads than elements: thread t handles elements t, t + {total}, "
                 f"t + {2 * total}, … — up to {record.passes} passes; "
                 f"{record.idle_in_last_pass} thread(s) have nothing left on the last pass.")
    elif total > record.n:
        line += (f"More threads than elements: {record.idle_threads} thread(s) find no element "
                 "and do nothing.")
    else:
        line += "Exactly one element per thread: a single pass."
    check = "yes" if record.matches_formula() else "<b style='color:#d62728'>NO</b>"
    return (f"{line}<br><small>Recorded from a real launch of the <code>{record.op}</code> "
            f"kernel on: {record.device}. Matches the grid-stride formula "
            f"(thread = i mod {total}, pass = i div {total}): {check}.</small>")


class ThreadMap(StaticSVG, widgets.VBox):
    """Sliders for the launch, and the recorded owner of every element.

    Args:
        n: number of elements.
        blocks, threads_per_block: the launch configuration.
        colour_by: ``"block"``, ``"thread"`` or ``"pass"``.
        kernel: a map kernel ``kernel(out, x)`` of yours (e.g. ``make_map(fn)``) to launch
            instead of teachgrad's; its record is read from the simulator's access log.

    Attributes:
        record: the latest :class:`~teachgrad.kernels.record.LaunchRecord`.
    """

    def __init__(self, n: int = 40, blocks: int = 2, threads_per_block: int = 8,
                 colour_by: str = "block", op: str = "mul", kernel: Any = None) -> None:
        self.op, self.kernel = op, kernel
        self.n_slider = widgets.IntSlider(n, 1, MAX_ELEMENTS, description="elements",
                                          continuous_update=False)
        self.blocks_slider = widgets.IntSlider(blocks, 1, MAX_BLOCKS, description="blocks",
                                               continuous_update=False)
        self.threads_slider = widgets.IntSlider(
            threads_per_block, 1, MAX_THREADS_PER_BLOCK, description="threads/block",
            continuous_update=False, style={"description_width": "initial"})
        self.colour_picker = widgets.ToggleButtons(options=["block", "thread", "pass"],
                                                   value=colour_by, description="colour by")
        self.summary = widgets.HTML()
        self.canvas = widgets.HTML()
        super().__init__([widgets.HBox([self.n_slider, self.blocks_slider, self.threads_slider]),
                          self.colour_picker, self.summary, self.canvas])
        for slider in (self.n_slider, self.blocks_slider, self.threads_slider):
            slider.observe(lambda change: self.relaunch(), names="value")
        self.colour_picker.observe(lambda change: self._draw(), names="value")
        self.relaunch()

    def relaunch(self) -> None:
        """Launch the kernel with the sliders' configuration and record it."""
        from teachgrad.kernels.record import record_elementwise
        from teachgrad.kernels.record_yours import map_launch_record

        launch = (self.n_slider.value, self.blocks_slider.value, self.threads_slider.value)
        self.record = (record_elementwise(*launch, op=self.op) if self.kernel is None
                       else map_launch_record(self.kernel, *launch))
        self._draw()

    def _draw(self) -> None:
        self.summary.value = describe(self.record)
        self.canvas.value = f'<div style="overflow:auto">{self.to_svg()}</div>'

    def to_svg(self) -> str:
        return draw_thread_map(self.record, self.colour_picker.value)

"""LiveCurves: training curves that grow while the loop runs, from the logging calls.

Feed it the calls you already make, or let a ``SummaryWriter`` feed it::

    curves = LiveCurves()
    writer.add_listener(curves)          # every writer.add_scalar now reaches the chart
    display(curves)
    for step in range(steps):
        ...
        writer.add_scalar("loss/train", loss.item(), step)
    curves.redraw()                      # the final picture

Recording a point is an append to a list. Drawing is the expensive part, so the
chart redraws at most ``max_fps`` times a second (4 by default): a loop of
thousands of steps triggers a handful of redraws, not thousands. Each curve is
drawn with at most ``MAX_DRAWN_POINTS`` points, so a redraw does not grow with
the length of the run (every point is still kept in ``series``).
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable

import ipywidgets as widgets

from ._chart import Panel
from ._display import StaticSVG
from ._svg import PALETTE, document, text

PANEL_W, PANEL_H, COLUMNS = 260, 150, 3
#: A curve is drawn with at most this many points (a panel is ~200 pixels wide), so a
#: redraw costs the same after 100 steps as after 100,000.
MAX_DRAWN_POINTS = 400


def thinned(steps: list[int], values: list[float]) -> tuple[list[int], list[float]]:
    """Every k-th point (and always the last) when there are more than MAX_DRAWN_POINTS."""
    k = -(-len(steps) // MAX_DRAWN_POINTS)
    if k <= 1:
        return steps, values
    keep = list(range(0, len(steps), k))
    if keep[-1] != len(steps) - 1:
        keep.append(len(steps) - 1)
    return [steps[i] for i in keep], [values[i] for i in keep]


class LiveCurves(StaticSVG, widgets.HTML):
    """One small chart per tag (``loss/train``, ``accuracy``, ``lr``), updated live.

    ``series[tag]`` holds the recorded ``(steps, values)``; ``redraws`` counts the
    pictures drawn so far (tests and the chapter read both).
    """

    def __init__(self, max_fps: float = 4.0, clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(max_fps, bool) or not isinstance(max_fps, (int, float)) or max_fps <= 0:
            raise ValueError(f"max_fps must be a positive number of redraws per second, got {max_fps!r}")
        super().__init__()
        self.series: dict[str, tuple[list[int], list[float]]] = {}
        self.min_interval = 1.0 / max_fps
        self.redraws = 0
        self._clock = clock
        self._last_draw = -math.inf
        self._dirty = False
        self.redraw()

    def add_scalar(self, tag: str, scalar_value: Any, global_step: int | None = None,
                   walltime: float | None = None) -> None:
        """Record one point (same signature as ``SummaryWriter.add_scalar``)."""
        if not isinstance(tag, str) or not tag:
            raise TypeError(f"a tag is a non-empty string such as 'loss/train', got {tag!r}")
        value = scalar_value.item() if hasattr(scalar_value, "item") else scalar_value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"LiveCurves.add_scalar('{tag}') needs a number, got {type(value).__name__}")
        steps, values = self.series.setdefault(tag, ([], []))
        steps.append(len(steps) if global_step is None else int(global_step))
        values.append(float(value))
        self._dirty = True
        now = self._clock()
        if now - self._last_draw >= self.min_interval:
            self.redraw()

    def redraw(self) -> None:
        """Draw the current picture now (call once after the loop for the final one)."""
        self.value = self.to_svg()
        self.redraws += 1
        self._last_draw = self._clock()
        self._dirty = False

    def to_svg(self) -> str:
        tags = sorted(self.series)
        if not tags:
            return document(PANEL_W, 40, [text(PANEL_W / 2, 20, "no scalars logged yet",
                                               fill="#888888")], kind="live-curves")
        rows = math.ceil(len(tags) / COLUMNS)
        width = PANEL_W * min(len(tags), COLUMNS)
        body = []
        for k, tag in enumerate(tags):
            steps, values = thinned(*self.series[tag])
            x0 = (k % COLUMNS) * PANEL_W + 45
            y0 = (k // COLUMNS) * PANEL_H + 25
            panel = Panel.fit(x0, y0, PANEL_W - 60, PANEL_H - 55, steps, values)
            last = f"{values[-1]:.4g}" if values else ""
            body += panel.frame(f"{tag}  ({last})", xlabel="step")
            body.append(panel.line(steps, values, PALETTE[k % len(PALETTE)], label=tag))
        return document(width, rows * PANEL_H, body, kind="live-curves")

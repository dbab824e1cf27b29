"""MemoryTimelineView: live device bytes over a training step, stacked by what they are.

Draws a :class:`teachgrad.memory.timeline.MemoryTimeline` recorded by
``tg.cuda.memory.memory_timeline(model, optimizer)``: one sample per allocation
or free, each split by the engine into parameters, optimizer state, gradients,
activations (saved for backward) and other. The phases the program marked
("forward", "backward", "step") are vertical lines; the peak is marked::

    with tg.cuda.memory.memory_timeline(model, optimizer) as timeline:
        timeline.mark("forward"); loss = loss_fn(model(x), y)
        timeline.mark("backward"); loss.backward()
        timeline.mark("step"); optimizer.step()
    MemoryTimelineView(timeline)
"""
from __future__ import annotations

import ipywidgets as widgets

from teachgrad.memory import format_bytes
from teachgrad.memory.timeline import CATEGORIES, MemoryTimeline

from ._chart import GREY, Panel
from ._display import StaticSVG
from ._svg import PALETTE, document, lighten, text

WIDTH, HEIGHT = 620, 260
#: One colour per category, fixed so two pictures compare at a glance.
COLOURS = dict(zip(CATEGORIES, [PALETTE[0], PALETTE[4], PALETTE[2], PALETTE[1], PALETTE[7]]))


def stacked(timeline: MemoryTimeline) -> dict[str, list[int]]:
    """Category -> the top edge of its band at each sample (bands stacked in CATEGORIES order)."""
    series = timeline.series()
    running = [0] * len(timeline.samples)
    tops = {}
    for name in CATEGORIES:
        running = [r + v for r, v in zip(running, series[name])]
        tops[name] = running
    return tops


def phase_starts(timeline: MemoryTimeline) -> list[tuple[int, str]]:
    """(sample index, label) where each marked phase begins."""
    starts, last = [], None
    for s in timeline.samples:
        if s.event == "mark" and s.phase != last:
            starts.append((s.index, s.phase))
            last = s.phase
    return starts


class MemoryTimelineView(StaticSVG, widgets.HTML):
    """A stacked-area chart of a recorded memory timeline (see the module doc)."""

    def __init__(self, timeline: MemoryTimeline, title: str = "Live device memory") -> None:
        if not isinstance(timeline, MemoryTimeline):
            raise TypeError("MemoryTimelineView draws what tg.cuda.memory.memory_timeline() "
                            f"recorded, not a {type(timeline).__name__}")
        super().__init__()
        self.timeline = timeline
        self.title = title
        self.value = self.to_svg()

    def peak(self) -> tuple[int, int]:
        """(sample index, bytes) of the largest total."""
        best = max(self.timeline.samples, key=lambda s: s.total)
        return best.index, best.total

    def to_svg(self) -> str:
        samples = self.timeline.samples
        if not samples:
            return document(WIDTH, 40, [text(WIDTH / 2, 20, "nothing recorded", fill=GREY)],
                            kind="memory-timeline")
        tops = stacked(self.timeline)
        xs = list(range(len(samples)))
        panel = Panel(60, 30, WIDTH - 200, HEIGHT - 70, (0, max(len(samples) - 1, 1)),
                      (0, max(max(tops[CATEGORIES[-1]]), 1)))
        body = panel.frame(self.title, xlabel="allocations and frees, in order", ylabel="bytes")
        below = [0] * len(samples)
        for name in CATEGORIES:
            body.append(self._band(panel, xs, below, tops[name], COLOURS[name], name))
            below = tops[name]
        body += self._phases(panel)
        index, total = self.peak()
        body.append(panel.marker(index, total, "#000000", label=f"peak {format_bytes(total)}"))
        px, py = panel.px(index, total)
        # (written under the phase labels, which sit along the top edge)
        body.append(text(px + 6, py + 26, f"peak {format_bytes(total)}", size=9, anchor="start"))
        body += self._legend(panel.x + panel.w + 15, panel.y)
        return document(WIDTH, HEIGHT, body, kind="memory-timeline")

    @staticmethod
    def _band(panel: Panel, xs, low, high, colour: str, name: str) -> str:
        """One category's band: a polygon along its top edge and back along its bottom."""
        points = [panel.px(x, y) for x, y in zip(xs, high)]
        points += [panel.px(x, y) for x, y in zip(reversed(xs), reversed(low))]
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        return (f'<polygon class="band" data-category="{name}" points="{path}" '
                f'fill="{lighten(colour, 0.25)}" stroke="{colour}" stroke-width="0.5">'
                f"<title>{name}</title></polygon>")

    def _phases(self, panel: Panel) -> list[str]:
        parts = []
        for index, label in phase_starts(self.timeline):
            x, _ = panel.px(index, 0)
            parts.append(f'<line x1="{x:.1f}" y1="{panel.y:.1f}" x2="{x:.1f}" '
                         f'y2="{panel.y + panel.h:.1f}" stroke="{GREY}" stroke-dasharray="3,3"/>')
            parts.append(text(x + 3, panel.y + 12, label, size=9, anchor="start", fill=GREY))
        return parts

    @staticmethod
    def _legend(x: float, y: float) -> list[str]:
        parts = []
        for k, name in enumerate(reversed(CATEGORIES)):  # top band first, as drawn
            parts.append(f'<rect x="{x:.1f}" y="{y + 18 * k:.1f}" width="12" height="12" '
                         f'fill="{lighten(COLOURS[name], 0.25)}"/>')
            parts.append(text(x + 18, y + 18 * k + 10, name, size=10, anchor="start"))
        return parts


__all__ = ["MemoryTimelineView", "stacked", "phase_starts"]

"""RingView: the ring all-reduce step by step, drawn from what each rank recorded.

Each rank runs ``teachgrad.distributed.ring.ring_all_reduce(..., record=steps)``
and sends back its list of steps (phase, step, chunk sent, chunk received, its
data after the step). Start rank ``r`` with the value ``2**r`` everywhere and
every value becomes a *set of contributors*: 5 = 1 + 4 means ranks 0 and 2 have
been added in. The picture shows one row per step and one column per rank,
each rank's data cut into its chunks, labelled with the contributors; the
chunk a rank sent at that step is outlined, the one it received is shaded.
"""
from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from teachgrad.distributed.ring import chunk_bounds

from . import _svg
from ._display import StaticSVG

CELL_W, CELL_H, GAP = 56, 24, 18


def contributors(value: float) -> list[int]:
    """The ranks whose ``2**rank`` add up to ``value``."""
    bits = int(round(value))
    return [r for r in range(bits.bit_length()) if bits >> r & 1]


def draw_ring(records: list[list[dict]], initial: list[list[float]]) -> str:
    """SVG of the recorded steps: ``records[r]`` is rank r's list, ``initial[r]`` its data."""
    p = len(records)
    n = len(initial[0])
    bounds = chunk_bounds(n, p)
    column_w = p * CELL_W + GAP
    rows = [("start", None, [None] * p, [row for row in initial])]
    for k in range(len(records[0])):
        first = records[0][k]
        rows.append((f"{first['phase']} {first['step']}", k,
                     [records[r][k] for r in range(p)], [records[r][k]["data"] for r in range(p)]))
    width, height = 130 + p * column_w, 40 + len(rows) * (CELL_H + 10)
    body = [_svg.text(130 + r * column_w + p * CELL_W / 2, 14, f"rank {r}", 12, weight="bold")
            for r in range(p)]
    for i, (label, _, steps, datas) in enumerate(rows):
        y = 28 + i * (CELL_H + 10)
        body.append(_svg.text(4, y + CELL_H / 2, label, 10, "start"))
        for r in range(p):
            for c, (start, stop) in enumerate(bounds):
                x = 130 + r * column_w + c * CELL_W
                value = datas[r][start] if stop > start else 0
                who = contributors(value)
                full = len(who) == p
                fill = _svg.category_colour(2, 0.3) if full else (
                    _svg.category_colour(1, 0.55) if steps[r] and steps[r]["recv"] == c
                    else "#ffffff")
                sent = bool(steps[r]) and steps[r]["send"] == c
                body.append(_svg.rect(x, y, CELL_W - 3, CELL_H, fill,
                                      stroke="#d62728" if sent else "#999999",
                                      width=2.5 if sent else 1,
                                      title=f"rank {r}, chunk {c}: ranks {who} added in"))
                body.append(_svg.text(x + CELL_W / 2, y + CELL_H / 2,
                                      "+".join(map(str, who)), 10))
    return _svg.document(width, height, body, "ring-view")


class RingView(StaticSVG, widgets.VBox):
    """The recorded steps of a ring all-reduce, with a slider to walk through them.

    Args:
        records: one list of recorded steps per rank (``ring_all_reduce(record=...)``).
        initial: each rank's data before the all-reduce (``2**rank`` everywhere).
    """

    def __init__(self, records: list[list[dict]], initial: list[list[float]]) -> None:
        if len(records) != len(initial) or not records:
            raise ValueError("RingView needs one record list and one initial array per rank")
        self.records, self.initial = records, initial
        self.slider = widgets.IntSlider(len(records[0]), 0, len(records[0]),
                                        description="steps shown")
        self.canvas = widgets.HTML()
        super().__init__([self.slider, self.canvas])
        self.slider.observe(lambda change: self._draw(), names="value")
        self._draw()

    def _draw(self) -> None:
        self.canvas.value = f'<div style="overflow:auto">{self.to_svg()}</div>'

    def to_svg(self) -> str:
        shown = [steps[:self.slider.value] for steps in self.records]
        return draw_ring(shown, self.initial)

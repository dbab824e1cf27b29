"""RankTimeline: what every rank of a distributed job did, on one time axis.

::

    result = dist.launch("train.py", n=2)      # each rank records its timeline
    RankTimeline(result)

One row per rank. Blue bars are the spans the script marked as compute
(``with dist.span("forward+backward"):``); orange bars are collectives, from
the call until the data was in place (for DDP's buckets: from the hook that
launched the all-reduce until backward waited for it, so an orange bar under
a blue one is communication overlapping compute). Gaps are time the rank
spent on anything unmarked. The times are the ranks' own ``perf_counter``
readings, one clock shared by every process of the machine.
"""
from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from . import _svg
from ._display import StaticSVG

KIND_COLOURS = {"compute": _svg.lighten(_svg.PALETTE[0], 0.25),
                "comm": _svg.lighten(_svg.PALETTE[1], 0.15)}
LEFT, RIGHT, ROW, BAR = 64, 230, 34, 12


def _timelines_of(source: Any) -> list[list[dict]]:
    timelines = getattr(source, "timelines", source)
    if not isinstance(timelines, (list, tuple)) or not all(isinstance(t, list) for t in timelines):
        raise TypeError("RankTimeline needs a RunResult from dist.launch, or a list of "
                        "per-rank event lists")
    if not any(timelines):
        raise ValueError("no rank recorded anything: call dist.init_process_group() in the "
                         "script, and mark compute with `with dist.span(name):`")
    return [list(t) for t in timelines]


def totals(events: list[dict]) -> dict[str, float]:
    """Seconds per kind (compute, comm) on one rank."""
    out = {"compute": 0.0, "comm": 0.0}
    for e in events:
        out[e["kind"]] = out.get(e["kind"], 0.0) + e["end"] - e["start"]
    return out


def draw_rank_timeline(timelines: list[list[dict]], width: int = 760) -> str:
    """SVG: one row per rank, compute and communication bars on a shared time axis (ms)."""
    starts = [e["start"] for t in timelines for e in t]
    ends = [e["end"] for t in timelines for e in t]
    t0, span_s = min(starts), max(max(ends) - min(starts), 1e-9)
    scale = (width - LEFT - RIGHT) / span_s
    body = [_svg.text(4, 12, "rank timelines (ms from the first recorded event)", 12, "start",
                      "bold")]
    top = 26
    for rank, events in enumerate(timelines):
        y = top + rank * ROW
        body.append(_svg.text(LEFT - 8, y + ROW / 2, f"rank {rank}", 11, "end"))
        body.append(_svg.rect(LEFT, y + 4, width - LEFT - RIGHT, ROW - 8, _svg.IDLE))
        for e in sorted(events, key=lambda e: e["kind"] != "compute"):  # comm drawn on top
            x = LEFT + (e["start"] - t0) * scale
            w = max((e["end"] - e["start"]) * scale, 1.0)
            lane = y + 5 if e["kind"] == "compute" else y + ROW - 5 - BAR
            tip = f"{e['name']}: {(e['end'] - e['start']) * 1e3:.2f} ms"
            if e.get("bytes"):
                tip += f", {e['bytes'] / 1e6:.3g} MB"
            body.append(_svg.rect(x, lane, w, BAR, KIND_COLOURS.get(e["kind"], "#999999"),
                                  stroke="none", title=tip))
        spent = totals(events)
        body.append(_svg.text(width - RIGHT + 8, y + ROW / 2,
                              f"compute {spent['compute'] * 1e3:.1f} ms, comm "
                              f"{spent['comm'] * 1e3:.1f} ms", 10, "start"))
    axis_y = top + len(timelines) * ROW + 4
    for k in range(6):
        x = LEFT + k * (width - LEFT - RIGHT) / 5
        body.append(_svg.text(x, axis_y + 6, f"{k * span_s / 5 * 1e3:.1f}", 9))
    legend_y = axis_y + 22
    for i, (kind, label) in enumerate([("compute", "compute (marked spans)"),
                                       ("comm", "communication (collectives)")]):
        x = LEFT + i * 220
        body.append(_svg.rect(x, legend_y - 5, 14, 10, KIND_COLOURS[kind], stroke="none"))
        body.append(_svg.text(x + 20, legend_y, label, 10, "start"))
    return _svg.document(width, legend_y + 14, body, "rank-timeline")


class RankTimeline(StaticSVG, widgets.VBox):
    """The per-rank timeline of a launched job (``dist.launch``'s result).

    Args:
        result: a :class:`teachgrad.distributed.RunResult`, or a list with one
            list of recorded events per rank.
    """

    def __init__(self, result: Any) -> None:
        self.timelines = _timelines_of(result)
        self.summary = widgets.HTML(self._summary())
        self.canvas = widgets.HTML(f'<div style="overflow:auto">{self.to_svg()}</div>')
        super().__init__([self.summary, self.canvas])

    def _summary(self) -> str:
        parts = []
        for rank, events in enumerate(self.timelines):
            spent = totals(events)
            busy = spent["compute"] + spent["comm"]
            share = spent["comm"] / busy if busy else 0.0
            parts.append(f"rank {rank}: {share:.0%} of marked time in communication")
        return "; ".join(parts)

    def to_svg(self) -> str:
        return draw_rank_timeline(self.timelines)

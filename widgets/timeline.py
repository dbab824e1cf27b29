"""Timeline: what the host and each stream did, drawn from a recorded run.

::

    with tg.cuda.record_timeline() as rec:   # teachgrad.streams.recording()
        ...                                   # cuda work
    Timeline(rec)

One lane for the host and one per stream (per device and stream, named
``cuda:1 stream 3``, when the run used several devices), time running to the right (ms
since the recording began). On the host lane a tick marks each enqueue and a
red bar each time the host had to **wait** for the device (labelled with what
made it wait: ``Tensor.item``, ``synchronize``...). On a stream lane a bar is
an op running on the device (hover for the op, the kernel and the line that
enqueued it); the grey hatched stretches are the device **idle**, waiting for
work. A CUDA graph's replay is one white bar (the graph launch) holding its
replayed kernels, each marked ``replay:``. Above, the figures that say whether overlap really happened: wall time,
device busy, host waiting, and CPU/wall (about 1: one core at a time; towards
2: host and device ran at once).

Nothing here is simulated by the widget: every bar is an :class:`OpRecord` or
:class:`HostWait` the engine's queue wrote while the code ran.
"""
from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any, Callable

import ipywidgets as widgets

from . import _svg
from ._display import StaticSVG

WAIT = "#e8a0a0"
KIND_COLOURS = {"kernel": _svg.category_colour(0), "h2d": _svg.category_colour(2),
                "event": _svg.category_colour(7), "wait_event": _svg.category_colour(4),
                "graph": "#ffffff", "replay": _svg.category_colour(3)}


@dataclass(frozen=True)
class Bar:
    """One drawn box: a lane, a start and an end in ms since the recording began."""

    lane: str
    start_ms: float
    end_ms: float
    kind: str  #: an op's kind ("kernel", "h2d", ...), "wait" or "idle"
    label: str  #: the whole story, shown on hover
    short: str = ""  #: written inside the bar when it is wide enough


def lane_of(rec: Any, stream: int) -> str:
    """A stream's lane: ``stream 3``, or ``cuda:1 stream 3`` when the run used several devices."""
    if len(rec.devices) > 1:
        return f"cuda:{rec.device_of(stream)} stream {stream}"
    return f"stream {stream}"


def lane_names(rec: Any) -> list[str]:
    """The host lane, then one lane per stream, grouped by device (cuda:0's first)."""
    streams = sorted(rec.streams, key=lambda s: (rec.device_of(s), s))
    return ["host"] + [lane_of(rec, s) for s in streams]


def timeline_bars(rec: Any, min_gap_ms: float = 0.0) -> list[Bar]:
    """The recording as bars: host waits, device ops, and the idle gaps between them."""
    ms = lambda t: (t - rec.began) * 1e3  # noqa: E731
    bars = [Bar("host", ms(w.began), ms(w.ended), "wait", f"waited in {w.reason} ({w.site})",
                f"wait: {w.reason}") for w in rec.waits]
    for op in rec.ops:
        if op.started is None or op.finished is None:
            continue  # not run (yet), or a GPU op without device times
        # a CUDA graph replay: the graph's launch (drawn white) holds its replayed kernels
        replayed = op.replay is not None and op.kind != "graph"
        bars.append(Bar(lane_of(rec, op.stream), ms(op.started), ms(op.finished),
                        "replay" if replayed else op.kind,
                        f"{op.describe()} [{op.status}" + (f", {op.replay}]" if op.replay else "]"),
                        ("replay: " if replayed else "") + (op.op or op.name)))
    for stream in rec.streams:
        for start, end in rec.idle_gaps(stream, min_gap_ms / 1e3):
            bars.append(Bar(lane_of(rec, stream), ms(start), ms(end), "idle", "device idle"))
    return bars


def total_ms(rec: Any) -> float:
    """How long the recording lasted, in ms (at least until its last bar ends)."""
    return max([rec.wall_seconds * 1e3] + [b.end_ms for b in timeline_bars(rec)]) or 1.0


def draw_timeline(rec: Any, width: int = 760, window: tuple[float, float] | None = None) -> str:
    """SVG: host lane (enqueue ticks, waits) above one lane per stream (ops, idle gaps).

    ``window`` = (from_ms, to_ms) zooms in: only what overlaps it is drawn, clipped to it.
    """
    bars = timeline_bars(rec)
    lanes = lane_names(rec)
    t0, t1 = window if window is not None else (0.0, total_ms(rec))
    span = max(t1 - t0, 1e-6)
    left, top, lane_h = 80, 40, 34
    scale = (width - left - 20) / span
    x_of = lambda t: left + (min(max(t, t0), t1) - t0) * scale  # noqa: E731
    body = [_svg.text(4, 12, f"host and device, {t0:.1f} to {t1:.1f} ms (simulated device: "
                      f"{'yes' if rec.simulated else 'no, a GPU'})", 12, "start", "bold")]
    for row, lane in enumerate(lanes):
        y = top + row * lane_h
        body.append(_svg.text(left - 6, y + lane_h / 2, lane, 11, "end"))
        body.append(_svg.rect(left, y, span * scale, lane_h - 6, "#fafafa", "#dddddd"))
    for bar in bars:
        if bar.end_ms < t0 or bar.start_ms > t1:
            continue  # outside the window
        y = top + lanes.index(bar.lane) * lane_h
        fill = {"wait": WAIT, "idle": _svg.IDLE}.get(bar.kind, KIND_COLOURS.get(bar.kind, "#ccc"))
        x0, x1 = x_of(bar.start_ms), x_of(bar.end_ms)
        body.append(_svg.rect(x0, y, max(x1 - x0, 1), lane_h - 6, fill, "#ffffff", 1,
                              dashed=bar.kind == "idle",
                              title=f"{bar.label}: {bar.start_ms:.2f}-{bar.end_ms:.2f} ms",
                              attrs=f'data-kind="{bar.kind}" data-lane="{escape(bar.lane)}"'))
        if bar.short and x1 - x0 > 7 * len(bar.short):  # only where the words fit
            body.append(_svg.text((x0 + x1) / 2, y + lane_h / 2 - 3, bar.short, 9))
    for op in rec.ops:  # the host enqueued it here
        t = (op.enqueued - rec.began) * 1e3
        if not t0 <= t <= t1:
            continue
        x = x_of(t)
        body.append(f'<line x1="{x:.1f}" y1="{top + 4}" x2="{x:.1f}" y2="{top + lane_h - 10}" '
                    f'stroke="#444444" stroke-width="1" data-kind="enqueue"><title>enqueued '
                    f"{escape(op.describe())}</title></line>")
    axis_y = top + len(lanes) * lane_h + 8
    for k in range(6):
        t = t0 + span * k / 5
        body.append(_svg.text(x_of(t), axis_y, f"{t:.0f} ms" if span >= 5 else f"{t:.2f} ms", 9))
    return _svg.document(width, axis_y + 16, body, "timeline")


def summary_html(rec: Any) -> str:
    """Wall, device busy, host waiting and CPU/wall, with what they mean."""
    s = rec.summary()
    wall = s["wall_seconds"] or 1e-12
    overlap = ("host and device ran at once" if s["cpu_per_wall"] > 1.2
               else "about one core busy at a time: little real overlap on this machine")
    return (f'<div class="teachgrad-timeline-summary" data-cpu-per-wall="{s["cpu_per_wall"]:.3f}">'
            f"wall {s['wall_seconds'] * 1e3:.1f} ms · device busy "
            f"{100 * s['device_busy_seconds'] / wall:.0f}% · host waiting "
            f"{100 * s['host_wait_seconds'] / wall:.0f}% · {int(s['ops'])} ops · "
            f"<b>CPU/wall {s['cpu_per_wall']:.2f}</b> ({overlap})</div>")


class Timeline(StaticSVG, widgets.VBox):
    """A recorded run (a ``teachgrad.streams.Recording``) as host and stream lanes.

    The slider picks the stretch of time to draw (all of it at first), to zoom in on a
    few ops of a long run.
    """

    def __init__(self, recording: Any, width: int = 760) -> None:
        self.recording, self.width = recording, width
        self.bars = timeline_bars(recording)
        self.lanes = lane_names(recording)
        end = total_ms(recording)
        self.window = widgets.FloatRangeSlider(value=(0.0, end), min=0.0, max=end,
                                               step=max(end / 200, 1e-3), description="ms",
                                               readout_format=".1f",
                                               layout=widgets.Layout(width="95%"))
        self.summary = widgets.HTML(summary_html(recording))
        self.canvas = widgets.HTML()
        super().__init__([self.summary, self.window, self.canvas])
        self.window.observe(lambda change: self._draw(), names="value")
        self._draw()

    @classmethod
    def of(cls, work: Callable[[], Any], **kwargs: Any) -> "Timeline":
        """Run ``work()`` while recording, then show what happened."""
        from teachgrad.streams import recording

        with recording() as rec:
            work()
        return cls(rec, **kwargs)

    def _draw(self) -> None:
        self.canvas.value = f'<div style="overflow:auto">{self.to_svg()}</div>'

    def to_svg(self) -> str:
        return draw_timeline(self.recording, self.width, tuple(self.window.value))

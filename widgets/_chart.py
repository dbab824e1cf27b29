"""Small line charts in plain SVG, shared by LiveCurves, LayerStats and TuneView.

A :class:`Panel` maps data coordinates to pixels (linear or log axes) and draws
axes, polylines and markers. Plain SVG text keeps the pictures light, static
(the book shows them without a kernel) and easy to test.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Sequence

from ._svg import text

GREY = "#888888"


def _span(values: Sequence[float], log: bool) -> tuple[float, float]:
    finite = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
    if not finite:
        return (0.0, 1.0) if not log else (1.0, 10.0)
    low, high = min(finite), max(finite)
    if low == high:  # a flat line still needs an axis
        pad = abs(low) * 0.1 or 1.0
        low, high = (low / 2, high * 2) if log else (low - pad, high + pad)
    return low, high


@dataclass
class Panel:
    """A plotting area at (x, y) of size w×h, with the data ranges it shows."""

    x: float
    y: float
    w: float
    h: float
    xs: tuple[float, float]
    ys: tuple[float, float]
    xlog: bool = False
    ylog: bool = False

    @classmethod
    def fit(cls, x: float, y: float, w: float, h: float, xs: Sequence[float],
            ys: Sequence[float], xlog: bool = False, ylog: bool = False) -> "Panel":
        return cls(x, y, w, h, _span(xs, xlog), _span(ys, ylog), xlog, ylog)

    def _frac(self, v: float, span: tuple[float, float], log: bool) -> float:
        low, high = span
        if log:
            v, low, high = math.log10(max(v, 1e-300)), math.log10(low), math.log10(high)
        return (v - low) / (high - low) if high != low else 0.5

    def px(self, vx: float, vy: float) -> tuple[float, float]:
        # kept inside the panel: a 0 on a log axis (a dead layer's gradient) sits on the
        # bottom edge instead of falling off the picture
        fx = min(max(self._frac(vx, self.xs, self.xlog), 0.0), 1.0)
        fy = min(max(self._frac(vy, self.ys, self.ylog), 0.0), 1.0)
        return self.x + fx * self.w, self.y + self.h - fy * self.h

    def frame(self, title: str, xlabel: str = "", ylabel: str = "") -> list[str]:
        """Axes box, title, and the ranges written at the ends of each axis."""
        x, y, w, h = self.x, self.y, self.w, self.h
        parts = [f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                 f'fill="#ffffff" stroke="#cccccc"/>',
                 text(x + w / 2, y - 10, title, size=12, weight="bold"),
                 text(x, y + h + 10, f"{self.xs[0]:.3g}", size=9, anchor="start", fill=GREY),
                 text(x + w, y + h + 10, f"{self.xs[1]:.3g}", size=9, anchor="end", fill=GREY),
                 text(x - 3, y + h, f"{self.ys[0]:.3g}", size=9, anchor="end", fill=GREY),
                 text(x - 3, y, f"{self.ys[1]:.3g}", size=9, anchor="end", fill=GREY)]
        if xlabel:
            parts.append(text(x + w / 2, y + h + 22, xlabel, size=10, fill=GREY))
        if ylabel:
            parts.append(text(x - 3, y + h / 2, ylabel, size=10, anchor="end", fill=GREY))
        return parts

    def line(self, xs: Sequence[float], ys: Sequence[float], colour: str, label: str = "",
             width: float = 1.5, dashed: bool = False) -> str:
        points = " ".join(f"{px:.1f},{py:.1f}" for px, py in
                          (self.px(a, b) for a, b in zip(xs, ys) if math.isfinite(b)))
        dash = ' stroke-dasharray="4,3"' if dashed else ""
        tip = f"<title>{escape(label)}</title>" if label else ""
        return (f'<polyline points="{points}" fill="none" stroke="{colour}" '
                f'stroke-width="{width}"{dash}>{tip}</polyline>')

    def marker(self, vx: float, vy: float, colour: str, filled: bool = True, label: str = "",
               cross: bool = False) -> str:
        cx, cy = self.px(vx, vy)
        tip = f"<title>{escape(label)}</title>" if label else ""
        if cross:
            return (f'<path d="M{cx - 4:.1f},{cy - 4:.1f}L{cx + 4:.1f},{cy + 4:.1f}'
                    f'M{cx - 4:.1f},{cy + 4:.1f}L{cx + 4:.1f},{cy - 4:.1f}" stroke="{colour}" '
                    f'stroke-width="2">{tip}</path>')
        fill = colour if filled else "#ffffff"
        return (f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{fill}" stroke="{colour}" '
                f'stroke-width="1.5">{tip}</circle>')

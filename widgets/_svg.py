"""A few helpers to write small SVG pictures by hand (grids of cells with labels).

The kernel widgets draw grids — elements, tiles, shared-memory cells — where
each cell's colour and text come from recorded data. Plain SVG text keeps
them light, static (the book shows them without a kernel) and easy to test.
"""
from __future__ import annotations

import colorsys
from html import escape

#: Matplotlib's "tab10" colours: distinct, and readable with black text once lightened.
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
IDLE = "#f2f2f2"
RED = "#d62728"


def lighten(colour: str, amount: float = 0.5) -> str:
    """Mix ``colour`` with white: 0 keeps it, 1 gives white."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    mix = [round(c + (255 - c) * amount) for c in (r, g, b)]
    return "#" + "".join(f"{c:02x}" for c in mix)


def category_colour(k: int, shade: float = 0.45) -> str:
    """A light colour for category ``k`` (a block, a pass, ...)."""
    return lighten(PALETTE[k % len(PALETTE)], shade)


def ramp_colour(k: int, count: int) -> str:
    """Colour ``k`` of ``count`` along a hue ramp (neighbours look alike: threads)."""
    hue = 0.62 - 0.62 * (k / max(count - 1, 1))
    r, g, b = colorsys.hls_to_rgb(hue, 0.78, 0.65)
    return "#" + "".join(f"{round(c * 255):02x}" for c in (r, g, b))


def rect(x: float, y: float, w: float, h: float, fill: str, stroke: str = "#ffffff",
         width: float = 1, dashed: bool = False, title: str = "", attrs: str = "") -> str:
    dash = ' stroke-dasharray="3,2"' if dashed else ""
    tip = f"<title>{escape(title)}</title>" if title else ""
    return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{width}"{dash} {attrs}>{tip}</rect>')


def text(x: float, y: float, content: str, size: float = 11, anchor: str = "middle",
         weight: str = "normal", fill: str = "#222222") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'font-weight="{weight}" fill="{fill}" dominant-baseline="central">'
            f"{escape(content)}</text>")


def document(width: float, height: float, body: list[str], kind: str = "") -> str:
    """A complete ``<svg>`` element; ``kind`` becomes a class a page or test can find."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="teachgrad-{kind}" '
            f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'font-family="Helvetica, Arial, sans-serif">' + "".join(body) + "</svg>")

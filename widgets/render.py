"""Turn Graphviz DOT text into SVG, with whichever Graphviz this machine has.

Two ways to run Graphviz's ``dot`` layout, tried in this order:

1. ``"dot"``: the ``dot`` program on ``PATH``, called through the ``graphviz``
   Python package (``apt-get install graphviz``, ``brew install graphviz``, ...);
2. ``"pygraphviz"``: the pygraphviz wheel, which carries the Graphviz library
   inside it and lays the graph out in-process, so no program is needed.

Both run the same layout engine and give the same picture. When neither works,
:func:`render_svg` raises :class:`GraphvizUnavailable` whose message says how to
install one; the widgets catch it and show a text view instead, so a missing
binary never crashes a notebook.

Choose a backend explicitly with ``render_svg(dot, backend="pygraphviz")`` or
the environment variable ``TEACHGRAD_GRAPHVIZ`` (``auto``, ``dot``,
``pygraphviz`` or ``none``; ``none`` forces the text view).
"""
from __future__ import annotations

import os
import re
import shutil

BACKENDS = ("dot", "pygraphviz")

INSTALL_HELP = (
    "Graphviz is needed to draw graphs. Install either the pygraphviz wheel "
    "(`pip install pygraphviz`, it carries Graphviz inside) or the Graphviz "
    "programs (`sudo apt-get install graphviz` on Debian/Ubuntu, "
    "`brew install graphviz` on macOS, `conda install -c conda-forge graphviz`), "
    "then re-run the cell."
)


class GraphvizUnavailable(RuntimeError):
    """Neither the ``dot`` program nor pygraphviz could lay out the graph."""


def _render_with_dot(dot_text: str) -> str:
    import graphviz  # the Python package only pipes text to the `dot` program

    if shutil.which("dot") is None:
        raise GraphvizUnavailable("the `dot` program is not on PATH")
    return graphviz.Source(dot_text).pipe(format="svg", encoding="utf-8")


def _render_with_pygraphviz(dot_text: str) -> str:
    import pygraphviz

    graph = pygraphviz.AGraph(string=dot_text)
    svg = graph.draw(format="svg", prog="dot")
    return svg.decode("utf-8") if isinstance(svg, bytes) else svg


_RENDERERS = {"dot": _render_with_dot, "pygraphviz": _render_with_pygraphviz}


def requested_backend(backend: str | None = None) -> str:
    """The backend asked for: the argument, else ``TEACHGRAD_GRAPHVIZ``, else ``"auto"``."""
    choice = (backend or os.environ.get("TEACHGRAD_GRAPHVIZ", "") or "auto").strip().lower()
    if choice not in ("auto", "none", *BACKENDS):
        raise ValueError(
            f"unknown Graphviz backend {choice!r}: use 'auto', 'dot', 'pygraphviz' or 'none' "
            "(argument backend= or the TEACHGRAD_GRAPHVIZ environment variable)"
        )
    return choice


def render_svg_with_backend(dot_text: str, backend: str | None = None) -> tuple[str, str]:
    """Like :func:`render_svg`, but also says which backend drew it: ``(svg, backend)``."""
    choice = requested_backend(backend)
    candidates = BACKENDS if choice == "auto" else () if choice == "none" else (choice,)
    reasons = [] if candidates else ["TEACHGRAD_GRAPHVIZ=none (or backend='none') was requested"]
    for name in candidates:
        try:
            return strip_prolog(_RENDERERS[name](dot_text)), name
        except ImportError as error:
            reasons.append(f"{name}: the Python package is not installed ({error})")
        except Exception as error:  # a failing backend falls through to the next one
            reasons.append(f"{name}: {error}")
    raise GraphvizUnavailable("could not draw the graph (" + "; ".join(reasons) + "). "
                              + INSTALL_HELP)


def render_svg(dot_text: str, backend: str | None = None) -> str:
    """Lay out ``dot_text`` with Graphviz and return the picture as SVG text.

    Args:
        dot_text: a graph in Graphviz's DOT language (e.g. from
            :func:`teachgrad.graph.to_dot`).
        backend: ``"dot"``, ``"pygraphviz"``, ``"auto"`` (the first that works) or
            ``"none"``; default: ``TEACHGRAD_GRAPHVIZ`` or ``"auto"``.

    Raises:
        GraphvizUnavailable: no backend could draw it; the message says how to
            install Graphviz.
    """
    return render_svg_with_backend(dot_text, backend)[0]


def available_backend(backend: str | None = None) -> str | None:
    """The backend :func:`render_svg` would use here, or None when there is none."""
    try:
        return render_svg_with_backend("digraph { a }", backend)[1]
    except GraphvizUnavailable:
        return None


def strip_prolog(svg: str) -> str:
    """Drop the XML declaration and DOCTYPE so the SVG can sit inside HTML."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def text_svg(lines: list[str], title: str = "", width_chars: int = 90) -> str:
    """A plain SVG that shows lines of text: the picture when Graphviz is missing."""
    from html import escape

    line_height, char_width = 16, 7.2
    rows = ([title] if title else []) + lines
    width = int(min(width_chars, max((len(r) for r in rows), default=10)) * char_width) + 20
    height = line_height * len(rows) + 16
    texts = []
    for i, row in enumerate(rows):
        weight = ' font-weight="bold"' if title and i == 0 else ""
        texts.append(f'<text x="10" y="{20 + i * line_height}"{weight}>{escape(row)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="monospace" font-size="12">'
            f'<rect width="100%" height="100%" fill="#fafafa" stroke="#cccccc"/>'
            + "".join(texts) + "</svg>")


def svg_size(svg: str) -> tuple[float, float]:
    """Width and height (in points) that Graphviz wrote on the ``<svg>`` element."""
    found = re.search(r'<svg[^>]*?width="([\d.]+)[a-z]*"[^>]*?height="([\d.]+)[a-z]*"', svg)
    return (float(found.group(1)), float(found.group(2))) if found else (0.0, 0.0)

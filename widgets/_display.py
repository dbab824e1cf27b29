"""How the widgets display: the live widget, plus a static picture for viewers without a kernel."""
from __future__ import annotations

import html
from typing import Any


class StaticSVG:
    """Mixin for a widget with a ``to_svg()`` method.

    Displaying it gives Jupyter the live widget and two static copies of the
    current picture:

    * ``image/svg+xml``, for viewers without the widget's state or a kernel
      (nbviewer, GitHub, a text-only export);
    * ``text/html`` holding the same SVG as an ``<img>``. JupyterLab treats a
      notebook it has not run itself as untrusted and then uses only *safe*
      renderers: not the widget view, not SVG. Sanitised HTML is safe, so a
      chapter opened before its cells are run shows this picture instead of
      the widget's one-line ``repr``. Once the cell runs, the widget replaces it.
    """

    #: Shown under the static picture: the controls need a running kernel.
    STATIC_NOTE = "A picture of the widget: run the cell for its controls."

    def to_svg(self) -> str:  # pragma: no cover - every widget defines its own
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        bundle = super()._repr_mimebundle_(**kwargs)
        svg = self.to_svg()
        bundle["image/svg+xml"] = svg
        bundle["text/html"] = static_html(svg, type(self).__name__, self.STATIC_NOTE)
        return bundle


def static_html(svg: str, name: str, note: str) -> str:
    """The picture as an ``<img>`` with the SVG inlined as a data URI, and a one-line note.

    The SVG stays readable text (not base64), so the stored notebook diffs well
    and nbval's sanitising patterns (node ids, versions) reach into it. A URL
    drops line breaks, so they become spaces; ``%`` and ``#`` are escaped for
    the URL, quotes and ``&`` for the HTML attribute.
    """
    flat = " ".join(svg.split("\n")).replace("\r", " ").replace("\t", " ")
    data = html.escape(flat.replace("%", "%25").replace("#", "%23"), quote=True)
    return (f'<div class="teachgrad-static"><img alt="{html.escape(name)}: a picture of the '
            f'widget" src="data:image/svg+xml;charset=utf-8,{data}">'
            f'<div style="font-size: 0.8em; color: #666">{html.escape(note)}</div></div>')

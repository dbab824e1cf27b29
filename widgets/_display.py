"""How the widgets display: the live widget, plus a static picture for viewers without a kernel."""
from __future__ import annotations

from typing import Any


class StaticSVG:
    """Mixin for a widget with a ``to_svg()`` method.

    Displaying it gives Jupyter both the live widget and an ``image/svg+xml``
    copy of the current picture. JupyterLab shows the widget; a viewer without
    the widget's state or a kernel (nbviewer, GitHub, a text-only export)
    shows the picture instead.
    """

    def to_svg(self) -> str:  # pragma: no cover - every widget defines its own
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["image/svg+xml"] = self.to_svg()
        return bundle

"""Small helpers the widgets share: copying tensors out and printing arrays briefly."""
from __future__ import annotations

from html import escape
from typing import Any

import numpy as np

#: Arrays with more elements than this are summarised (shape, min, max) in panels.
SHOW_VALUES_UP_TO = 36


def to_host(tensor: Any) -> np.ndarray | None:
    """A numpy copy of a tensor's values (None stays None), taken *now*.

    Widgets record copies because the engine may later update a tensor in
    place (a leaf's ``.grad`` accumulates), and a recorded step must show the
    values as they were at that step.
    """
    if tensor is None:
        return None
    return np.array(tensor.detach().cpu().numpy(), copy=True)


def format_array(values: np.ndarray | None) -> str:
    """A short text form of ``values``: every number when small, else a summary."""
    if values is None:
        return "None"
    a = np.asarray(values)
    if a.ndim == 0:
        return f"{a.item():.4g}"
    if a.size <= SHOW_VALUES_UP_TO:
        text = np.array2string(a, precision=4, separator=", ", suppress_small=True)
        return " ".join(text.split())  # one line
    return (f"shape {list(a.shape)}, min {a.min():.4g}, max {a.max():.4g}, "
            f"mean {a.mean():.4g}")


def code(text: str) -> str:
    """``text`` as inline HTML code, escaped."""
    return f"<code>{escape(text)}</code>"

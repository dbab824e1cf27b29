"""``repr(tensor)`` in PyTorch's format: ``tensor([1., 2.], requires_grad=True)``.

The rules follow ``torch/_tensor_str.py`` (default print options): one format
for the whole tensor, chosen from its nonzero finite values, every element
padded to the same width, rows wrapped at 80 characters, and tensors with more
than 1000 elements summarised with ``...`` around their first and last 3 rows.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from . import dtypes

if TYPE_CHECKING:  # pragma: no cover
    # the class tensor.py hands to autograd.function (tensor.py is built on this module)
    from .autograd.function import Tensor

PRECISION = 4  # digits after the point
THRESHOLD = 1000  # more elements than this are summarised
EDGE_ITEMS = 3  # elements kept at each end of a summarised dimension
LINE_WIDTH = 80


class _Formatter:
    """Picks one style for all elements: integer-valued (``1.``), fixed (``1.5000``) or
    scientific (``1.5000e+08``), and the width every element is padded to."""

    def __init__(self, values: np.ndarray) -> None:
        self.floating = values.dtype.kind == "f"
        self.int_mode, self.sci_mode, self.width = True, False, 1
        flat = values.reshape(-1)
        if not self.floating:
            self.width = max((len(str(v)) for v in flat.tolist()), default=1)
            return
        nonzero = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
        if nonzero.size == 0:
            return
        magnitudes = np.abs(nonzero)
        low, high = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(nonzero == np.ceil(nonzero)))
        wide_range = high / low > 1000.0 or high > 1.0e8
        self.sci_mode = wide_range if self.int_mode else (wide_range or low < 1.0e-4)
        if self.sci_mode:
            texts = [f"{v:.{PRECISION}e}" for v in nonzero.tolist()]
        elif self.int_mode:
            texts = [f"{v:.0f}." for v in nonzero.tolist()]
        else:
            texts = [f"{v:.{PRECISION}f}" for v in nonzero.tolist()]
        self.width = max(len(t) for t in texts)

    def format(self, value: float | int | bool) -> str:
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:.{PRECISION}e}"
        elif self.int_mode:
            text = f"{value:.0f}" + ("" if math.isinf(value) or math.isnan(value) else ".")
        else:
            text = f"{value:.{PRECISION}f}"
        return text.rjust(self.width)


def _summarized(a: np.ndarray) -> np.ndarray:
    """Only the elements that will be shown (first and last EDGE_ITEMS of each dimension)."""
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * EDGE_ITEMS:
        a = np.concatenate([a[:EDGE_ITEMS], a[-EDGE_ITEMS:]])
    if a.ndim == 1:
        return a
    return np.stack([_summarized(row) for row in a])


def _vector(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    per_line = max(1, (LINE_WIDTH - indent) // (fmt.width + 2))  # 2 for ", "
    if summarize and a.shape[0] > 2 * EDGE_ITEMS:
        items = [fmt.format(v) for v in a[:EDGE_ITEMS].tolist()] + [" ..."] + \
                [fmt.format(v) for v in a[-EDGE_ITEMS:].tolist()]
    else:
        items = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    rows = range(a.shape[0])
    if summarize and a.shape[0] > 2 * EDGE_ITEMS:
        rows = [*range(EDGE_ITEMS), None, *range(a.shape[0] - EDGE_ITEMS, a.shape[0])]
    parts = ["..." if i is None else _nested(a[i], indent + 1, summarize, fmt) for i in rows]
    # sub-blocks are separated by as many blank lines as they have dimensions beyond rows
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _with_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    """Append ``, dtype=...`` etc., moving one to a new line when the line would pass 80."""
    out = [text]
    line_length = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if line_length + len(suffix) + 2 > LINE_WIDTH:
            out.append(",\n" + " " * indent + suffix)
            line_length = indent + len(suffix)
        else:
            out.append(", " + suffix)
            line_length += len(suffix) + 2
    return "".join(out) + ")"


def tensor_repr(t: "Tensor", name: str = "tensor") -> str:
    prefix = f"{name}("
    indent = len(prefix)
    values = t.detach()._host()
    if t.dtype in dtypes.LOW_PRECISION:  # printed through float32, as PyTorch prints them
        values = values.astype(np.float32)
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    if values.size == 0:
        body = "[]"
        if t.ndim != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype is not dtypes.get_default_dtype():  # nothing to show it by
            suffixes.append(f"dtype={t.dtype}")
    else:
        if t.dtype not in (dtypes.get_default_dtype(), dtypes.int64, dtypes.bool_):
            suffixes.append(f"dtype={t.dtype}")
        summarize = values.size > THRESHOLD
        fmt = _Formatter(_summarized(values) if summarize else values)
        body = _nested(values, indent, summarize, fmt)
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _with_suffixes(prefix + body, suffixes, indent)

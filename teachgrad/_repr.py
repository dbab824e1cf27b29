"""``repr(tensor)`` in PyTorch's format: ``tensor([1., 2.], requires_grad=True)``."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import dtypes

if TYPE_CHECKING:  # pragma: no cover
    from .tensor import Tensor


def _format_values(a: np.ndarray, prefix: str) -> str:
    if a.size == 0:
        return "[]"  # the shape of an empty tensor is added as size=...
    opts = dict(separator=", ", prefix=prefix, threshold=1000, edgeitems=3, max_line_width=80)
    if a.dtype.kind == "f":
        finite = a[np.isfinite(a)]
        integral = finite.size == 0 or bool(np.all(finite == np.round(finite)))
        nonzero = np.abs(finite[finite != 0])
        scientific = nonzero.size > 0 and (nonzero.max() >= 1e8 or (nonzero.min() < 1e-4 and not integral))
        if scientific:
            fmt = "{:.4e}".format
        elif integral:
            fmt = lambda v: f"{v:.0f}."  # noqa: E731
        else:
            fmt = "{:.4f}".format
        show = lambda v: fmt(v) if np.isfinite(v) else str(v)  # noqa: E731
        # like PyTorch, every element gets the width of the widest one
        width = max((len(show(v)) for v in a.flat), default=0)
        opts["formatter"] = {"float_kind": lambda v: show(v).rjust(width)}
    elif a.dtype.kind == "b":
        opts["formatter"] = {"bool": lambda v: "True" if v else "False"}
    text = np.array2string(a, **opts)
    return text


def tensor_repr(t: "Tensor", name: str = "tensor") -> str:
    prefix = f"{name}("
    values = _format_values(t.detach()._host(), prefix)
    extras = []
    if t.device.type != "cpu":
        extras.append(f"device='{t.device.type}:0'")
    if t.numel() == 0 and t.ndim != 1:
        extras.append(f"size={tuple(t.shape)}")
    default = dtypes.get_default_dtype()
    if t.dtype not in (default, dtypes.int64, dtypes.bool_):
        extras.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    tail = "".join(", " + e for e in extras)
    return f"{prefix}{values}{tail})"

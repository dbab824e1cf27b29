"""The samples DataLoader(batch_size=None) is tried on, and a library-neutral description of
what comes out, shared by ``scripts/record_rough_edges.py`` (run with PyTorch) and
``tests/engine/test_rough_edges.py`` (run with teachgrad), so both describe with one function."""
from __future__ import annotations

from collections import namedtuple
from typing import Any, Callable

import numpy as np

Point = namedtuple("Point", ["x", "y"])


def samples() -> list:
    return [
        (np.array([1.5, 2.5], dtype=np.float32), 3),
        {"x": np.arange(3), "label": "cat", "w": 0.5},
        [np.float64(2.0), np.array(True), [np.array([[1, 2]]), "s"], (1.0, np.array([4.0]))],
        Point(np.array([1.0]), 2),
        np.array(["a", "b"]),
        7,
        np.float32(-1.25),
    ]


def describe(value: Any, tensor_type: type, dtype_name: Callable[[Any], str]) -> dict:
    """``value``'s structure and contents as plain data; ``tensor_type`` is the library's
    tensor class and ``dtype_name`` names a tensor's dtype ("float32")."""
    def inner(v: Any) -> dict:
        if isinstance(v, tensor_type):
            return {"tensor": dtype_name(v), "shape": list(v.shape), "values": v.tolist()}
        if isinstance(v, np.ndarray):
            return {"ndarray": v.dtype.str, "values": v.tolist()}
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return {"namedtuple": type(v).__name__,
                    "fields": {k: inner(x) for k, x in zip(v._fields, v)}}
        if isinstance(v, (list, tuple)):
            return {type(v).__name__: [inner(x) for x in v]}
        if isinstance(v, dict):
            return {"dict": {k: inner(x) for k, x in v.items()}}
        if isinstance(v, np.generic):
            return {"numpy scalar": v.dtype.str, "value": v.item()}
        return {"python": type(v).__name__, "value": v}
    return inner(value)

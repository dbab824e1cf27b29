"""Python data to a numpy array for ``tg.tensor``, with PyTorch's errors for bad data."""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)  # a numpy "void"-kind type, but numbers all the same


def host_array(data: Any) -> np.ndarray:
    """``data`` (numbers, nested lists, numpy arrays) as a numpy array of numbers, checked."""
    ragged = (f"can't make a tensor from {type(data).__name__}: the nesting is ragged or "
              "the items are not numbers")
    if isinstance(data, (str, bytes)):
        raise TypeError(f"can't make a tensor from a string ({data!r}): tensors hold numbers. "
                        "Fix: convert first, e.g. tg.tensor(float(text))")
    try:
        arr = np.array(data)
    except (ValueError, OverflowError):  # numpy refuses ragged nested lists
        raise ValueError(ragged) from None
    if arr.dtype == object and _has_none(data):
        raise RuntimeError("Could not infer dtype of NoneType: tensors hold numbers, and None is "
                           "not one. Fix: replace the Nones (e.g. with float('nan'))")
    if arr.dtype == object and _has_huge_int(data):
        raise ValueError("an integer in the data does not fit in int64 (the range is "
                            "-2**63 to 2**63 - 1). Fix: use floats, e.g. tg.tensor(data, "
                            "dtype=tg.float64)")
    if arr.dtype == object and _is_ragged(data):
        raise ValueError(ragged)
    if arr.dtype == object or (arr.dtype.kind not in "biuf" and arr.dtype != _BFLOAT16):
        raise TypeError(ragged)
    return arr


def _is_ragged(data: Any) -> bool:
    """Whether nested lists have rows of different lengths (PyTorch: ValueError)."""
    if not isinstance(data, (list, tuple)):
        return False
    lengths = {len(x) if isinstance(x, (list, tuple)) else -1 for x in data}
    return len(lengths) > 1 or any(_is_ragged(x) for x in data)


def _has_none(data: Any) -> bool:
    if isinstance(data, (list, tuple)):
        return any(_has_none(x) for x in data)
    return data is None


def _has_huge_int(data: Any) -> bool:
    """Whether nested ``data`` holds a Python int outside int64 (numpy makes it an object)."""
    if isinstance(data, (list, tuple)):
        return any(_has_huge_int(x) for x in data)
    return isinstance(data, int) and not -2**63 <= data < 2**63


def check_flag(name: str, value: Any) -> None:
    """``requires_grad`` and friends must be real booleans (``'yes'`` is not True)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, not {type(value).__name__} {value!r}")

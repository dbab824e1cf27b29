"""The recorded PyTorch answers for float16/bfloat16 (``scripts/record_lowprec.py``)."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import ml_dtypes
import numpy as np

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lowprec.npz"
NUMPY_TYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


@lru_cache(maxsize=1)
def load() -> tuple[dict, dict]:
    """(arrays, index) of the fixture file."""
    with np.load(FIXTURE) as data:
        arrays = {k: data[k] for k in data.files}
    return arrays, json.loads(str(arrays.pop("__index__")))


def from_bits(bits: np.ndarray, dtype_name: str) -> np.ndarray:
    """Recorded 16-bit values (stored as their bit patterns) as an array of that dtype."""
    return bits.view(NUMPY_TYPES[dtype_name])

"""Which arrays the compiled CPU loops take (``pointwise_loops``, ``window_loops``,
``batch_norm_loops``): numpy arrays, all of one float dtype.

Everything else (integers, other backends' arrays) keeps the whole-array path,
which every backend runs and the tests hold the loops equal to.
"""
from __future__ import annotations

from typing import Any

import numpy as np

LOOP_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def loops_take(*arrays: Any) -> bool:
    """Whether the compiled loops take these: numpy arrays of one float dtype."""
    dtype = arrays[0].dtype if type(arrays[0]) is np.ndarray else None
    return dtype in LOOP_DTYPES and all(type(a) is np.ndarray and a.dtype == dtype
                                        for a in arrays)

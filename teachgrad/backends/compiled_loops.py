"""Which arrays the compiled CPU loops take (``pointwise_loops``, ``window_loops``,
``batch_norm_loops``): numpy arrays, all of one float dtype.

Everything else (integers, other backends' arrays) keeps the whole-array path,
which every backend runs and the tests hold the loops equal to.
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from . import numba_loading

LOOP_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def numba_loaded() -> bool:
    """Whether numba is imported and free to use now: the small arrays' compiled passes
    (ReLU's, the sigmoid's, Adam's) run only then, so that a program that never loaded
    numba does not pay half a second for them. Not while the numba backend loads in its
    background thread (``numba_loading``): numba is then in ``sys.modules`` before it can
    run, and a pass would wait for the thread, up to half a second, where numpy's calls
    take microseconds."""
    module = sys.modules.get("numba")
    if module is None or getattr(module.__spec__, "_initializing", False):
        return False  # (not imported, or another thread is importing it now)
    return not numba_loading.loading()


def loops_take(*arrays: Any) -> bool:
    """Whether the compiled loops take these: numpy arrays of one float dtype."""
    # (a plain loop, not all() over a generator: this runs once per LSTM step, and the
    # generator's set-up cost as much as the checks)
    first = arrays[0]
    if type(first) is not np.ndarray or first.dtype not in LOOP_DTYPES:
        return False
    dtype = first.dtype
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype is not dtype and a.dtype != dtype:
            return False
    return True

"""The error function ``erf`` for the numpy backend, which numpy itself lacks.

``erf(x) = 2/sqrt(pi) * integral from 0 to x of exp(-t^2) dt`` is what the exact GELU
(``x * Phi(x)``, with ``Phi(x) = (1 + erf(x / sqrt(2))) / 2`` the normal distribution's
CDF) needs. numpy has no ufunc for it and scipy is not a dependency, so this is a loop
over the C library's ``erf`` that numba compiles once per dtype (``cache=True`` keeps the
machine code on disk), the same function the numba backend and (as libdevice's) the GPU
call. It is imported on first use: a program that never asks for ``erf`` never compiles it.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, error_model="numpy")
def _erf_into(out, x):
    for i in range(x.size):
        out[i] = math.erf(x[i])


def erf(x: np.ndarray) -> np.ndarray:
    """``erf`` of every element of a float array, in the array's dtype and shape."""
    if x.dtype not in (np.float32, np.float64):  # float16, bfloat16: computed in float64
        return erf(x.astype(np.float64)).astype(x.dtype)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.shape, x.dtype)
    _erf_into(out, flat)
    return out.reshape(x.shape)

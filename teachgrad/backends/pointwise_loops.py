"""One pass over memory for ``lerp_``, ``addcmul_`` and ``addcdiv_`` on large CPU arrays.

Each of these updates does two or three arithmetic operations per element. numpy has
no operation on three arrays, so the reference path (:meth:`Backend.addcmul_inplace`
and its siblings) makes a temporary array and walks memory two or three times. On an
optimizer's large weights that traffic is most of the cost: for a 784x256 float32
weight, numpy's three passes take about 55 µs where one pass takes about 20.

So the CPU backends hand large contiguous arrays to the loops below: ordinary Python
that numba compiles once per dtype (``cache=True`` keeps the machine code on disk).
Each loop does the reference path's operations in the same order and in the same
dtype, and nothing else: no fused multiply-add (numba asks LLVM for none unless told
``fastmath``), so the results are the same bits as numpy's passes, which the tests check.
The scalar arguments arrive in the arrays' dtype (``np.float32(value)``), so float32
arithmetic stays float32.
"""
from __future__ import annotations

from numba import njit

# error_model="numpy": x / 0 gives ±inf or nan, as numpy's division does, instead of raising
_OPTIONS = dict(cache=True, error_model="numpy")


@njit(**_OPTIONS)
def addcmul(x, a, b, value):
    """``x += (a * b) * value``, element by element; all 1-D, one length and dtype."""
    for i in range(x.size):
        x[i] = x[i] + (a[i] * b[i]) * value


@njit(**_OPTIONS)
def addcdiv(x, a, b, value):
    """``x += (a / b) * value``."""
    for i in range(x.size):
        x[i] = x[i] + (a[i] / b[i]) * value


@njit(**_OPTIONS)
def lerp(x, end, weight, weight_minus_one):
    """``x += (end - x) * weight``, or from the far end, ``end + (end - x) * (weight - 1)``,
    when ``|weight| >= 0.5`` (so a weight of 1 gives ``end`` exactly, as in PyTorch)."""
    if abs(weight) < 0.5:
        for i in range(x.size):
            x[i] = x[i] + (end[i] - x[i]) * weight
    else:
        for i in range(x.size):
            x[i] = (end[i] - x[i]) * weight_minus_one + end[i]

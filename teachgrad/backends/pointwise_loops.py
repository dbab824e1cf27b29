"""One pass over memory for ``lerp_``, ``addcmul_``, ``addcdiv_``, a bias's ``+=`` and its
gradient's sum over rows on large CPU arrays,
and for an LSTM step's gates and new cell (``lstm_gates_forward``, at the end).

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
def add_rows(x, row):
    """``x[r] += row`` for every row of the 2-D ``x`` (a layer's bias added to its output).
    numpy broadcasts ``row`` with an inner loop of one row's length per row: for a
    ``(1024, 192)`` output that is 1024 short loops, about twice this one pass's time."""
    for r in range(x.shape[0]):
        for j in range(x.shape[1]):
            x[r, j] = x[r, j] + row[j]


@njit(**_OPTIONS)
def sum_rows(x, out):
    """``out = x[0] + x[1] + ...`` (the 2-D ``x``'s sum over its first axis: a bias's
    gradient), from 0 and row after row, as numpy's ``add.reduce(x, axis=0)`` adds them,
    so the same bits. numpy's inner loop there is one row long, called once per row; this
    pass runs at memory speed, about twice as fast on a ``(1024, 256)`` gradient."""
    for j in range(x.shape[1]):
        out[j] = 0
    for r in range(x.shape[0]):
        for j in range(x.shape[1]):
            out[j] = out[j] + x[r, j]


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


@njit(**_OPTIONS)
def lstm_gates_forward(gates, c, one, half, c_new):
    """One LSTM step's gates and new cell, in one pass, in place: ``gates`` ``(B, 4, H)``
    arrives as ``tanh(a / 2)`` for i, f, o and ``tanh(a)`` for g (numpy's vectorised tanh
    made it) and leaves as the gates, ``σ(a) = (1 + tanh(a/2)) / 2`` for i, f, o; writes
    ``c' = f c + i g`` into ``c_new`` ``(B, H)``."""
    batch, _, hidden = gates.shape
    for b in range(batch):
        for k in range(hidden):
            i = (one + gates[b, 0, k]) * half
            f = (one + gates[b, 1, k]) * half
            g = gates[b, 2, k]
            gates[b, 0, k], gates[b, 1, k] = i, f
            gates[b, 3, k] = (one + gates[b, 3, k]) * half
            c_new[b, k] = f * c[b, k] + i * g

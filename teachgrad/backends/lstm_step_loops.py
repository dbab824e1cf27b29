"""One float32 LSTM step's gates, cell and output in one compiled pass, with a tanh that
LLVM can vectorise.

``lstm_loops.forward_sequence`` runs a forward step on numpy arrays as five numpy calls
and one compiled pass around the recurrent product: the two shares of the pre-activations
added, numpy's ``tanh`` over all four gates, the pass for the gates and the new cell,
``tanh`` of the cell, ``h' = o·tanh(c')``. Each call walks memory again and costs a few
microseconds of its own; at a batch of 32 and 128 hidden units that is about 23 µs a
step beside a 34 µs product. numba cannot call numpy's vectorised ``tanh``, and its own
``math.tanh`` is a scalar library call per element, so one pass needs a ``tanh`` written
out: Eigen's float32 rational approximation (a degree-13 odd polynomial over a degree-6
even one, the input clamped to ±7.905, where tanh is 1 in float32), within 6 units in
the last place of the exact tanh (the test measures it). The result is within rounding
of the numpy calls, not their bits, so this is the float32 path only; float64 keeps
numpy's ``tanh``.

What makes the pass vectorise: each loop is over one contiguous row and touches few
arrays (with many, LLVM gives up the run-time checks that the arrays do not overlap and
runs the scalar loop: the same arithmetic in one loop per element took 87 µs a step,
against 13 in these short loops), the clamp as selects, not branches,
and ``error_model="numpy"`` (the default puts a zero-division check before ``p / q``).
"""
from __future__ import annotations

import numpy as np
from numba import njit

_OPTIONS = dict(cache=True, error_model="numpy")

# Eigen's generic_fast_tanh_float coefficients (float32 constants keep the arithmetic
# float32: a Python float would promote every operation to float64)
_CLAMP = np.float32(7.90531110763549805)
_P = tuple(np.float32(v) for v in (-2.76076847742355e-16, 2.00018790482477e-13,
                                   -8.60467152213735e-11, 5.12229709037114e-08,
                                   1.48572235717979e-05, 6.37261928875436e-04,
                                   4.89352455891786e-03))
_Q = tuple(np.float32(v) for v in (1.19825839466702e-06, 1.18534705686654e-04,
                                   2.26843463243900e-03, 4.89352518554385e-03))
_P13, _P11, _P9, _P7, _P5, _P3, _P1 = _P
_Q6, _Q4, _Q2, _Q0 = _Q


@njit(inline="always", **_OPTIONS)
def tanh_float32(x):
    """tanh(x) for a float32 ``x``: ``x·p(x²) / q(x²)``, by Horner's rule. The clamp is two
    selects that keep a NaN (``min``/``max`` would turn it into ±7.9, and tanh into ±1)."""
    x = _CLAMP if x > _CLAMP else x
    x = -_CLAMP if x < -_CLAMP else x
    x2 = x * x
    p = x2 * _P13 + _P11
    p = x2 * p + _P9
    p = x2 * p + _P7
    p = x2 * p + _P5
    p = x2 * p + _P3
    p = x2 * p + _P1
    q = x2 * _Q6 + _Q4
    q = x2 * q + _Q2
    q = x2 * q + _Q0
    return x * p / q


@njit(**_OPTIONS)
def tanh_float32_array(x, out):
    """``tanh_float32`` of every element of a 1-D array (for the tests)."""
    for i in range(x.size):
        out[i] = tanh_float32(x[i])


@njit(**_OPTIONS)
def lstm_step_forward(recurrent, gates_x, t, batch_first, c, gates, c_new, tanh_c, output):
    """One step, in place: ``a = recurrent + gates_x[t]`` (both with the σ gates'
    quarters halved, ``lstm_loops.scaled_gates``), the gates ``σ(a) = (1 + tanh(a/2))/2``
    for i, f, o and ``tanh(a)`` for g into ``gates`` ``(B, 4, H)``, ``c' = f c + i g`` into
    ``c_new``, ``tanh(c')`` into ``tanh_c`` and ``h' = o tanh(c')`` into step ``t`` of
    ``output``. ``gates_x`` ``(T, B, 4H)`` and ``output`` ``(T, B, H)`` are whole
    sequences (``(B, T, ...)`` with ``batch_first``), so each row the loops read is
    contiguous."""
    batch, four_hidden = recurrent.shape
    hidden = four_hidden // 4
    one = np.float32(1)
    half = np.float32(0.5)
    for b in range(batch):
        shares = recurrent[b]
        from_input = gates_x[b, t] if batch_first else gates_x[t, b]
        gate = gates[b]
        for quarter in range(4):
            start = quarter * hidden
            if quarter == 2:  # g: tanh(a)
                for k in range(hidden):
                    gate[2, k] = tanh_float32(shares[start + k] + from_input[start + k])
            else:  # i, f, o: σ(a) = (1 + tanh(a/2)) / 2
                for k in range(hidden):
                    gate[quarter, k] = (one + tanh_float32(shares[start + k]
                                                           + from_input[start + k])) * half
        cell, new_cell, tanh_cell = c[b], c_new[b], tanh_c[b]
        for k in range(hidden):
            new_cell[k] = gate[1, k] * cell[k] + gate[0, k] * gate[2, k]
        for k in range(hidden):
            tanh_cell[k] = tanh_float32(new_cell[k])
        h = output[b, t] if batch_first else output[t, b]
        for k in range(hidden):
            h[k] = gate[3, k] * tanh_cell[k]

"""An LSTM step on numpy arrays as one compiled pass each way: forward (float32) the gates,
cell and output, with a tanh that LLVM can vectorise; backward the gate gradients, written
into the whole sequence's gradient in place.

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


@njit(**_OPTIONS)
def lstm_step_backward(gates, c_before, tanh_c, dh_next, grad_output, dc, t, batch_first,
                       grad_gates_x, dc_before, dh_row, dc_row):
    """One step's backward through its gates, the arithmetic of ``ops/lstm.py``'s
    ``gates_backward`` in the order of the pass that used to run it (so the same bits), but in
    short loops over contiguous rows and reading the output's gradient and writing the
    gates' gradient at step ``t`` of the whole sequences (``(T, B, ...)``, or ``(B, T, ...)``
    with ``batch_first``): no copies of a batch-first step's strided rows, and loops LLVM
    vectorises. ``dh_row`` and ``dc_row`` are ``(H,)`` scratch."""
    batch, _, hidden = gates.shape
    one = gates.dtype.type(1)
    for b in range(batch):
        gate, tanh_cell = gates[b], tanh_c[b]
        from_output = grad_output[b, t] if batch_first else grad_output[t, b]
        from_next, dc_next = dh_next[b], dc[b]
        for k in range(hidden):  # h' = o tanh(c'): the gradient reaches c' from h' and after
            dh_row[k] = from_next[k] + from_output[k]
        for k in range(hidden):
            o, s = gate[3, k], tanh_cell[k]
            dc_row[k] = dc_next[k] + dh_row[k] * (o * (one - s * s))
        grad = grad_gates_x[b, t] if batch_first else grad_gates_x[t, b]
        cell = c_before[b]
        for k in range(hidden):  # i: ∂c'/∂i = g, σ' = σ(1 - σ)
            i = gate[0, k]
            grad[k] = dc_row[k] * gate[2, k] * (i * (one - i))
        for k in range(hidden):  # f: ∂c'/∂f = c
            f = gate[1, k]
            grad[hidden + k] = dc_row[k] * cell[k] * (f * (one - f))
        for k in range(hidden):  # g: ∂c'/∂g = i, tanh' = (1 + tanh)(1 - tanh)
            g = gate[2, k]
            grad[2 * hidden + k] = dc_row[k] * gate[0, k] * ((one + g) * (one - g))
        for k in range(hidden):  # o: ∂h'/∂o = tanh(c')
            o = gate[3, k]
            grad[3 * hidden + k] = dh_row[k] * tanh_cell[k] * (o * (one - o))
        before = dc_before[b]
        for k in range(hidden):  # c reaches the step before through f
            before[k] = dc_row[k] * gate[1, k]

"""An LSTM layer's loop over time on numpy arrays, with every step's results written
straight into arrays made once per sequence.

``ops/lstm.py`` is the readable LSTM: each step makes its own small arrays through the
backend's primitives, keeps them in lists, and joins the lists into sequences at the
end. That is the path every backend takes and the one to read first. On numpy arrays
this module runs the same arithmetic, step for step and in the same order (so the same
bits, but for float32's forward tanh, below), the way a cuDNN-style kernel lays out its
memory:

- the output ``(T, B, H)`` (or ``(B, T, H)``), the gates ``(T, B, 4, H)``, the cells and
  their tanh are made once, and each step writes its part of them in place (``out=``):
  no joins after the loop, no fresh small arrays in it;
- a step is the recurrent product and compiled passes, with no backend methods between
  them: at a batch of 32 and 128 hidden units a step's arithmetic takes microseconds,
  so the calls around it are what cost;
- the σ gates' ½ (``σ(a) = (1 + tanh(a/2)) / 2``) is in the operands before the loop, in
  the input's share and in the copy of ``W_hh`` (``scaled_gates``: exact), so a step adds
  its two shares straight into its gate slot and takes their tanh, with no pass to scale;
- in float32 the rest of a forward step is one compiled pass (``lstm_step_loops.py``, with
  its own vectorised tanh: within rounding of numpy's, not its bits); float64 keeps
  numpy's ``tanh``, a few numpy calls and ``pointwise_loops.lstm_gates_forward``;
- ``forward_layer`` also makes the input's share itself, from the layer's input, for
  ``LSTMLayer`` (``ops/lstm.py``: the input's projection and the loop as one node);
- backward writes each step's gate gradients straight into their slot of the gradient
  of the input's share ``(T, B, 4H)`` (one compiled pass a step, ``lstm_step_loops.py``,
  reading and writing the sequences' rows in place, batch-first too), and ``W_hh``'s
  gradient is then one matrix product over every step, ``Σ_t grad_a[t]ᵀ h_before[t]``,
  with the states each step started from gathered into one array by the forward.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np


class SavedSequence(NamedTuple):
    """What the forward keeps for the backward: time-major, one slot per step."""
    gates: np.ndarray        # (T, B, 4, H): i, f, g, o after σ / tanh
    cells: np.ndarray        # (T, B, H): each step's new cell c'
    tanh_cells: np.ndarray   # (T, B, H): tanh(c')
    h_before: np.ndarray | None  # the h each step started from, in the output's layout


def forward_layer(x: np.ndarray, h0: np.ndarray, c0: np.ndarray, weight_ih: np.ndarray,
                  weight_hh: np.ndarray, bias: np.ndarray | None, reverse: bool,
                  batch_first: bool, keep_h_before: bool
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, SavedSequence]:
    """``forward_sequence`` from the layer's input ``x``: the input's share of every step,
    ``x @ W_ihᵀ + b`` (``b = b_ih + b_hh``), as one product first, as ``F.linear`` makes it,
    but with the σ gates' ½ already in it (``scaled_gates`` says why that is exact)."""
    scales = gate_scales(x.dtype, weight_hh.shape[1]).reshape(-1)
    scaled_weight_ih = np.empty(weight_ih.shape, x.dtype)  # row-major, as a parameter is
    np.multiply(weight_ih, scales[:, None], out=scaled_weight_ih)
    rows = x.reshape(-1, x.shape[-1])
    gates_x = np.matmul(rows, scaled_weight_ih.T)
    if bias is not None:
        np.add(gates_x, bias * scales, out=gates_x)
    return forward_sequence(gates_x.reshape(*x.shape[:-1], weight_ih.shape[0]), h0, c0,
                            weight_hh, reverse, batch_first, keep_h_before)


def scaled_gates(gates_x: np.ndarray) -> np.ndarray:
    """The input's share of the gates with the σ gates' quarters halved, as
    ``forward_sequence`` takes it: ``σ(a) = (1 + tanh(a/2)) / 2``, so the loop wants
    ``a/2`` for i, f, o (and ``a`` for g). Halving is exact in binary floating point, and
    ``(u + v)/2 = u/2 + v/2`` exactly, so scaling the two shares of ``a`` apart (this, and
    ``W_hh``'s copy in the loop) gives the same bits as scaling their sum in every step."""
    hidden = gates_x.shape[-1] // 4
    scales = gate_scales(gates_x.dtype, hidden).reshape(-1)
    return np.multiply(gates_x, scales)


def forward_sequence(gates_x: np.ndarray, h0: np.ndarray, c0: np.ndarray,
                     weight_hh: np.ndarray, reverse: bool, batch_first: bool,
                     keep_h_before: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                   SavedSequence]:
    """``(output, h_T, c_T, saved)`` of one direction; the arithmetic of
    ``LSTMSequence.forward`` (``ops/lstm.py``), whose docstring has the equations.
    ``gates_x`` arrives with the σ gates' quarters halved (``scaled_gates``)."""
    from .pointwise_loops import lstm_gates_forward  # (here: importing numba takes a while)
    batch, hidden = h0.shape
    steps = gates_x.shape[1 if batch_first else 0]
    dtype = gates_x.dtype
    # (H, 4H) row-major, for h @ W_hh.T: OpenBLAS multiplies a small h by it faster
    # than by the transposed view; its σ gates' columns halved as gates_x's are
    w_hh_t = np.empty((hidden, 4 * hidden), dtype)
    np.multiply(weight_hh.T, gate_scales(dtype, hidden).reshape(-1), out=w_hh_t)
    output = np.empty(_sequence_shape(batch, steps, hidden, batch_first), dtype)
    gates = np.empty((steps, batch, 4, hidden), dtype)
    cells = np.empty((steps, batch, hidden), dtype)
    tanh_cells = np.empty((steps, batch, hidden), dtype)
    a = np.empty((batch, 4 * hidden), dtype)
    one = dtype.type(1)
    half = one / 2
    h, c = h0, c0
    if dtype == np.float32:  # one compiled pass per step, its own vectorised tanh
        from .lstm_step_loops import lstm_step_forward
        gates_x = np.ascontiguousarray(gates_x)
        for t in time_order(steps, reverse):
            np.matmul(h, w_hh_t, out=a)
            lstm_step_forward(a, gates_x, t, batch_first, c, gates[t], cells[t],
                              tanh_cells[t], output)
            h, c = _step(output, t, batch_first), cells[t]
        return _finish(output, h, c, h0, SavedSequence(gates, cells, tanh_cells, None),
                       reverse, batch_first, keep_h_before)
    for t in time_order(steps, reverse):
        np.matmul(h, w_hh_t, out=a)
        gate = gates[t]
        # a/2 for i, f, o and a for g, then σ(a) = (1 + tanh(a/2)) / 2 for i, f, o and
        # tanh(a) for g: one tanh for all four
        np.add(a, _step(gates_x, t, batch_first), out=gate.reshape(batch, 4 * hidden))
        np.tanh(gate, out=gate)
        lstm_gates_forward(gate, c, one, half, cells[t])  # the gates, and c' = f c + i g
        c = cells[t]
        np.tanh(c, out=tanh_cells[t])
        h = _step(output, t, batch_first)
        np.multiply(gate[:, 3], tanh_cells[t], out=h)  # h' = o tanh(c')
    return _finish(output, h, c, h0, SavedSequence(gates, cells, tanh_cells, None), reverse,
                   batch_first, keep_h_before)


def _finish(output: np.ndarray, h: np.ndarray, c: np.ndarray, h0: np.ndarray,
            saved: SavedSequence, reverse: bool, batch_first: bool, keep_h_before: bool
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, SavedSequence]:
    """``forward_sequence``'s results once the loop is done: the states each step started
    from gathered for ``W_hh``'s gradient (if it wants one), and ``h_T``, ``c_T`` as copies
    (the user may change them in place; backward reads the originals)."""
    if keep_h_before:
        saved = saved._replace(h_before=_states_before(output, h0, reverse, batch_first))
    return output, h.copy(), c.copy(), saved


def backward_sequence(saved: SavedSequence, c0: np.ndarray, weight_hh: np.ndarray,
                      grad_output: np.ndarray, grad_h_last: np.ndarray,
                      grad_c_last: np.ndarray, reverse: bool, batch_first: bool,
                      keep_grad_h0: bool = True
                      ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None]:
    """``(grad of gates_x, grad of h0 or None, grad of c0, grad of W_hh or None)``: the
    arithmetic of ``LSTMSequence.backward`` (``ops/lstm.py``). Without ``keep_grad_h0``
    the last step visited skips its product through ``W_hh``, which only ``h0``'s
    gradient needs (one recurrent product of the loop's 32, when ``h0`` is zeros that
    ``nn.LSTM`` made)."""
    from .lstm_step_loops import lstm_step_backward
    steps, batch, _, hidden = saved.gates.shape
    dtype = saved.gates.dtype
    grad_gates_x = np.empty(_sequence_shape(batch, steps, 4 * hidden, batch_first), dtype)
    grad_output = np.ascontiguousarray(grad_output)  # (the pass reads its rows in place)
    dh, dc = grad_h_last, grad_c_last
    dh_buffer = np.empty((batch, hidden), dtype)
    dc_buffers = (np.empty((batch, hidden), dtype), np.empty((batch, hidden), dtype))
    dh_row, dc_row = np.empty(hidden, dtype), np.empty(hidden, dtype)
    for n, t in enumerate(reversed(time_order(steps, reverse))):
        dc_before = dc_buffers[n % 2]
        lstm_step_backward(saved.gates[t], _state_before(saved.cells, c0, t, reverse),
                           saved.tanh_cells[t], dh, grad_output, dc, t, batch_first,
                           grad_gates_x, dc_before, dh_row, dc_row)
        dc = dc_before
        if n == steps - 1 and not keep_grad_h0:
            break  # nothing before the first step: the product would only be h0's gradient
        # to the step before, through W_hh
        dh = np.matmul(_step(grad_gates_x, t, batch_first), weight_hh, out=dh_buffer)
    grad_weight_hh = None
    if saved.h_before is not None:  # Σ_t grad_a[t]ᵀ @ h_before[t]: one product over all t
        grad_weight_hh = np.matmul(grad_gates_x.reshape(steps * batch, 4 * hidden).T,
                                   saved.h_before.reshape(steps * batch, hidden))
    grad_h0 = dh.copy() if keep_grad_h0 else None
    return grad_gates_x, grad_h0, dc.copy(), grad_weight_hh


def input_projection_grads(grad_gates_x: np.ndarray, x: np.ndarray, weight_ih: np.ndarray,
                           needs_x: bool, needs_weight: bool, needs_bias: bool
                           ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """``(grad of x, grad of W_ih, grad of b)`` from the gradient of the input's share
    ``x @ W_ihᵀ + b``: the products and the sum ``Linear``'s backward makes, all steps at once."""
    rows = grad_gates_x.reshape(-1, grad_gates_x.shape[-1])
    grad_x = np.matmul(rows, weight_ih).reshape(x.shape) if needs_x else None
    grad_weight = np.matmul(rows.T, x.reshape(-1, x.shape[-1])) if needs_weight else None
    grad_bias = rows.sum(0) if needs_bias else None
    return grad_x, grad_weight, grad_bias


@lru_cache(maxsize=16)
def gate_scales(dtype: Any, hidden: int) -> np.ndarray:
    """``(4, H)`` factors for ``(B, 4, H)`` pre-activations (``reshape(-1)``: one per gate
    column of ``W``'s ``4H``): ½ for the σ gates i, f, o (``σ(a) = (1 + tanh(a/2)) / 2``),
    1 for the cell candidate g (``tanh(a)``). A full row rather than a ``(4, 1)`` column:
    numpy multiplies by a contiguous row about twice as fast as it broadcasts a column
    along it."""
    scales = np.repeat(np.array([[0.5], [0.5], [1.0], [0.5]], dtype=dtype), hidden, axis=1)
    scales.flags.writeable = False  # shared by every call
    return scales


def time_order(steps: int, reverse: bool) -> list[int]:
    """The order a direction visits the time steps in."""
    return list(range(steps - 1, -1, -1)) if reverse else list(range(steps))


def _sequence_shape(batch: int, steps: int, features: int, batch_first: bool) -> tuple:
    return (batch, steps, features) if batch_first else (steps, batch, features)


def _step(sequence: np.ndarray, t: int, batch_first: bool) -> np.ndarray:
    """Time step ``t`` of a ``(T, B, F)`` (or ``(B, T, F)``) sequence, as a view."""
    return sequence[:, t] if batch_first else sequence[t]


def _state_before(states: np.ndarray, start: np.ndarray, t: int, reverse: bool) -> np.ndarray:
    """The state step ``t`` started from: the previous step's in the direction's order,
    or ``start`` for its first step."""
    previous = t + 1 if reverse else t - 1
    return states[previous] if 0 <= previous < len(states) else start


def _states_before(output: np.ndarray, h0: np.ndarray, reverse: bool,
                   batch_first: bool) -> np.ndarray:
    """The h every step started from, in the output's layout: the output shifted by one
    step in the direction's order, ``h0`` in the first step's slot."""
    h_before = np.empty_like(output)
    time = (slice(None),) if batch_first else ()
    first, rest, previous = (-1, slice(None, -1), slice(1, None)) if reverse else \
        (0, slice(1, None), slice(None, -1))
    h_before[time + (rest,)] = output[time + (previous,)]
    h_before[time + (first,)] = h0
    return h_before

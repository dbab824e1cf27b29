"""One LSTM layer over a whole sequence, as one differentiable operation.

An LSTM written with ordinary tensor operations records a dozen small nodes
per time step (a slice per gate, two sigmoids, a tanh, the products...), and
backward then visits each of them: for a 32-step sequence that is hundreds
of tiny operations, most of their time spent in Python, not arithmetic.

This Function does what cuDNN does instead. The input's part of the gates,
``x_t @ W_ih.T + b``, is computed *before* it, for every time step at once
(one big matmul, by the caller). Forward then runs the short loop over time
that only the recurrence needs, and keeps each step's gate values. Backward
walks the same loop backwards with the chain rule written out by hand for
all four gates at once, and computes ``W_hh``'s gradient at the end as one
matmul over every time step.

Gate order is PyTorch's: the ``4H`` gate columns are ``i, f, g, o`` (input,
forget, cell candidate, output), so ``weight_hh`` has shape ``(4H, H)``.
Everything runs on backend primitives, so every device computes it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..autograd.function import Context, Function
from ..tensor import Tensor


class LSTMSequence(Function):
    """``(output, h_T, c_T)`` of one LSTM layer in one direction.

    ``gates_x`` is ``(T, B, 4H)``: ``x_t @ W_ih.T + b_ih + b_hh`` for every step.
    Each step (``t`` from 0 up, or from ``T - 1`` down when ``reverse``)::

        i, f, g, o = σ(a_i), σ(a_f), tanh(a_g), σ(a_o)   where a = gates_x[t] + h @ W_hh.T
        c = f * c + i * g
        h = o * tanh(c)

    ``output[t]`` is the ``h`` of step ``t`` (in the input's time order either way).
    """

    rule = ("c' = f*c + i*g, h' = o*tanh(c'):  ∂c'/∂c = f, ∂h'/∂o = tanh(c'), ∂c'/∂i = g, "
            "∂c'/∂f = c, ∂c'/∂g = i; σ' = σ(1-σ), tanh' = 1-tanh²")

    @staticmethod
    def forward(ctx: Context, gates_x: Tensor, h0: Tensor, c0: Tensor, weight_hh: Tensor,
                reverse: bool):
        bk = ctx.backend
        steps, batch, four_h = gates_x.shape
        hidden = four_h // 4
        dtype = gates_x.dtype.numpy
        w_hh_t = bk.permute(weight_hh._array, (1, 0))  # (H, 4H): h @ W_hh.T
        scale, shift = _gate_scale_and_shift(bk, dtype)
        # what backward needs, for every step: the gates' values, the cell, the output
        gates = bk.zeros((steps, batch, 4, hidden), dtype)
        cells = bk.zeros((steps, batch, hidden), dtype)
        output = bk.zeros((steps, batch, hidden), dtype)
        h, c = h0._array, c0._array
        for t in _time_order(steps, reverse):
            a = bk.matmul(h, w_hh_t)
            bk.binary_inplace("add", a, bk.getitem(gates_x._array, (t,)))
            a = bk.reshape(a, (batch, 4, hidden))
            # σ(a) = (1 + tanh(a/2)) / 2, so one tanh computes all four gates:
            # i, f, o = σ of their quarter, g = tanh of its own (its scale 1, shift 0)
            act = bk.binary("add", bk.binary("mul", bk.unary("tanh", bk.binary("mul", a, scale)),
                                             scale), shift)
            i, f, g, o = (bk.getitem(act, (slice(None), k)) for k in range(4))
            c = bk.binary("add", bk.binary("mul", f, c), bk.binary("mul", i, g))
            h = bk.binary("mul", o, bk.unary("tanh", c))
            bk.setitem(gates, (t,), act)
            bk.setitem(cells, (t,), c)
            bk.setitem(output, (t,), h)
        ctx.arrays = (gates, cells, output, h0._array, c0._array, weight_hh._array)
        ctx.reverse = reverse
        return output, h, c

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor, grad_h_last: Tensor, grad_c_last: Tensor):
        bk = ctx.backend
        gates, cells, output, h0, c0, weight_hh = ctx.arrays
        steps, batch, _, hidden = bk.shape(gates)
        dtype = bk.dtype(gates)
        # Each step's local derivatives do not depend on the incoming gradient: compute
        # them for all steps at once (a few big array operations instead of many small).
        # ∂c'/∂a_i = g σ'(a_i), ∂c'/∂a_f = c σ'(a_f), ∂c'/∂a_g = i tanh'(a_g), ∂h'/∂a_o = tanh(c') σ'(a_o)
        every = slice(None)
        i, f, g, o = (bk.getitem(gates, (every, every, k)) for k in range(4))
        tanh_c = bk.unary("tanh", cells)
        slopes = bk.binary("mul", gates, bk.binary("sub", 1.0, gates))  # σ' = σ(1 - σ)
        bk.setitem(slopes, (every, every, 2), _one_minus_square(bk, g))  # g's is tanh'
        partners = bk.concatenate([_as_gate(bk, p) for p in
                                   (g, _state_before_each_step(bk, cells, c0, ctx.reverse), i, tanh_c)],
                                  axis=2)
        local = bk.binary("mul", partners, slopes)
        h_to_c = bk.binary("mul", o, _one_minus_square(bk, tanh_c))  # ∂h'/∂c'

        grad_gates = bk.zeros((steps, batch, 4, hidden), dtype)
        dh, dc = grad_h_last._array, grad_c_last._array
        for t in reversed(_time_order(steps, ctx.reverse)):
            dh = bk.binary("add", dh, bk.getitem(grad_output._array, (t,)))
            dc = bk.binary("add", dc, bk.binary("mul", dh, bk.getitem(h_to_c, (t,))))
            # i, f, g reach the loss through c', o through h'
            both = bk.concatenate([_as_gate(bk, dc)] * 3 + [_as_gate(bk, dh)], axis=1)
            grad_a = bk.binary("mul", both, bk.getitem(local, (t,)))
            bk.setitem(grad_gates, (t,), grad_a)
            # what flows on to the step before: through W_hh to h, through f to c
            dh = bk.matmul(bk.reshape(grad_a, (batch, 4 * hidden)), weight_hh)
            dc = bk.binary("mul", dc, bk.getitem(f, (t,)))

        grad_gates = bk.reshape(grad_gates, (steps, batch, 4 * hidden))
        grad_weight_hh = None
        if ctx.needs_input_grad[3]:  # Σ_t grad_a[t].T @ h_before[t], one matmul over all t
            h_before = _state_before_each_step(bk, output, h0, ctx.reverse)
            grad_weight_hh = bk.matmul(
                bk.permute(bk.reshape(grad_gates, (steps * batch, 4 * hidden)), (1, 0)),
                bk.reshape(h_before, (steps * batch, hidden)))
        device = grad_output.device
        return (Tensor._make(grad_gates, bk, device), Tensor._make(dh, bk, device),
                Tensor._make(dc, bk, device),
                None if grad_weight_hh is None else Tensor._make(grad_weight_hh, bk, device), None)


def _gate_scale_and_shift(bk: Any, dtype: Any) -> tuple[Any, Any]:
    """``(4, 1)`` columns that turn ``tanh`` into the gates: ``act = tanh(a * s) * s + shift``
    is ``σ(a)`` where ``s = 1/2, shift = 1/2`` (i, f, o) and ``tanh(a)`` where ``s = 1,
    shift = 0`` (g)."""
    scale = np.array([[0.5], [0.5], [1.0], [0.5]], dtype=dtype)
    shift = np.array([[0.5], [0.5], [0.0], [0.5]], dtype=dtype)
    return bk.from_numpy(scale), bk.from_numpy(shift)


def _as_gate(bk: Any, x: Any) -> Any:
    """``(..., B, H)`` as ``(..., B, 1, H)``: one gate's slot of the ``(B, 4, H)`` layout."""
    shape = tuple(bk.shape(x))
    return bk.reshape(x, shape[:-1] + (1, shape[-1]))


def _time_order(steps: int, reverse: bool) -> list[int]:
    """The order a direction visits the time steps in."""
    return list(range(steps - 1, -1, -1)) if reverse else list(range(steps))


def _one_minus_square(bk: Any, t: Any) -> Any:
    """``tanh'(a) = 1 - tanh(a)²``, from ``t = tanh(a)``."""
    return bk.binary("sub", 1.0, bk.binary("mul", t, t))


def _state_before_each_step(bk: Any, states: Any, start: Any, reverse: bool) -> Any:
    """``(T, B, H)``: the state (h or c) each step started from: ``start``, then the
    steps' own states shifted by one step in the direction's order."""
    steps = bk.shape(states)[0]
    first = bk.reshape(start, (1,) + tuple(bk.shape(start)))
    if reverse:
        return bk.concatenate([bk.getitem(states, (slice(1, steps),)), first], axis=0)
    return bk.concatenate([first, bk.getitem(states, (slice(0, steps - 1),))], axis=0)

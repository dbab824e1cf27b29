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

    rule = ("c' = f*c + i*g, h' = o*tanh(c'):  ∂c/∂c_prev = f, ∂h/∂o = tanh(c'), "
            "∂c'/∂i = g, ∂c'/∂f = c_prev, ∂c'/∂g = i; σ' = σ(1-σ), tanh' = 1-tanh²")

    @staticmethod
    def forward(ctx: Context, gates_x: Tensor, h0: Tensor, c0: Tensor, weight_hh: Tensor,
                reverse: bool):
        bk = ctx.backend
        steps, batch, four_h = gates_x.shape
        hidden = four_h // 4
        dtype = gates_x.dtype.numpy
        w_hh_t = bk.permute(weight_hh._array, (1, 0))  # (H, 4H): h @ W_hh.T
        # what backward needs, for every step: the gate values and the cell before and after
        gates = bk.zeros((steps, batch, 4, hidden), dtype)
        cells_before = bk.zeros((steps, batch, hidden), dtype)
        cells = bk.zeros((steps, batch, hidden), dtype)
        output = bk.zeros((steps, batch, hidden), dtype)
        h, c = h0._array, c0._array
        for t in _time_order(steps, reverse):
            a = bk.binary("add", bk.getitem(gates_x._array, (t,)), bk.matmul(h, w_hh_t))
            a = bk.reshape(a, (batch, 4, hidden))
            # one sigmoid for all four gates, then g's quarter again through tanh
            act = bk.unary("sigmoid", a)
            bk.setitem(act, (slice(None), 2), bk.unary("tanh", bk.getitem(a, (slice(None), 2))))
            i, f, g, o = (bk.getitem(act, (slice(None), k)) for k in range(4))
            bk.setitem(cells_before, (t,), c)
            c = bk.binary("add", bk.binary("mul", f, c), bk.binary("mul", i, g))
            h = bk.binary("mul", o, bk.unary("tanh", c))
            bk.setitem(gates, (t,), act)
            bk.setitem(cells, (t,), c)
            bk.setitem(output, (t,), h)
        ctx.arrays = (gates, cells_before, cells, output, h0._array, weight_hh._array)
        ctx.reverse = reverse
        return output, h, c

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor, grad_h_last: Tensor, grad_c_last: Tensor):
        bk = ctx.backend
        gates, cells_before, cells, output, h0, weight_hh = ctx.arrays
        steps, batch, _, hidden = bk.shape(gates)
        dtype = bk.dtype(gates)
        # The parts of each step's local derivatives that do not depend on the incoming
        # gradient, for all steps at once (a few big array operations instead of many small):
        i, f, g, o = (bk.getitem(gates, (slice(None), slice(None), k)) for k in range(4))
        tanh_c = bk.unary("tanh", cells)
        slope_o = _times_sigmoid_slope(bk, tanh_c, o)                   # ∂h/∂a_o
        h_to_c = bk.binary("mul", o, _one_minus_square(bk, tanh_c))     # ∂h/∂c
        c_to_gates = bk.concatenate([                                   # ∂c/∂a_i, a_f, a_g
            bk.reshape(_times_sigmoid_slope(bk, g, i), (steps, batch, 1, hidden)),
            bk.reshape(_times_sigmoid_slope(bk, cells_before, f), (steps, batch, 1, hidden)),
            bk.reshape(bk.binary("mul", i, _one_minus_square(bk, g)), (steps, batch, 1, hidden)),
        ], axis=2)

        grad_gates = bk.zeros((steps, batch, 4, hidden), dtype)
        dh, dc = grad_h_last._array, grad_c_last._array
        for t in reversed(_time_order(steps, ctx.reverse)):
            dh = bk.binary("add", dh, bk.getitem(grad_output._array, (t,)))
            dc = bk.binary("add", dc, bk.binary("mul", dh, bk.getitem(h_to_c, (t,))))
            dc_column = bk.reshape(dc, (batch, 1, hidden))
            bk.setitem(grad_gates, (t, slice(None), slice(0, 3)),
                       bk.binary("mul", dc_column, bk.getitem(c_to_gates, (t,))))
            bk.setitem(grad_gates, (t, slice(None), 3), bk.binary("mul", dh, bk.getitem(slope_o, (t,))))
            # what flows on to the step before: through W_hh to h, through f to c
            dh = bk.matmul(bk.reshape(bk.getitem(grad_gates, (t,)), (batch, 4 * hidden)), weight_hh)
            dc = bk.binary("mul", dc, bk.getitem(f, (t,)))

        grad_gates = bk.reshape(grad_gates, (steps, batch, 4 * hidden))
        grad_weight_hh = None
        if ctx.needs_input_grad[3]:  # Σ_t grad_gates[t].T @ h_before[t], one matmul over all t
            h_before = _hidden_before_each_step(bk, output, h0, ctx.reverse)
            grad_weight_hh = bk.matmul(bk.permute(bk.reshape(grad_gates, (steps * batch, 4 * hidden)), (1, 0)),
                                       bk.reshape(h_before, (steps * batch, hidden)))
        device = grad_output.device
        return (Tensor._make(grad_gates, bk, device), Tensor._make(dh, bk, device),
                Tensor._make(dc, bk, device),
                None if grad_weight_hh is None else Tensor._make(grad_weight_hh, bk, device), None)


def _time_order(steps: int, reverse: bool) -> list[int]:
    """The order a direction visits the time steps in."""
    return list(range(steps - 1, -1, -1)) if reverse else list(range(steps))


def _times_sigmoid_slope(bk: Any, factor: Any, s: Any) -> Any:
    """``factor * σ'`` where ``s = σ(a)``: ``σ'(a) = s (1 - s)``."""
    return bk.binary("mul", factor, bk.binary("mul", s, bk.binary("sub", 1.0, s)))


def _one_minus_square(bk: Any, t: Any) -> Any:
    """``tanh'(a) = 1 - tanh(a)²``, from ``t = tanh(a)``."""
    return bk.binary("sub", 1.0, bk.binary("mul", t, t))


def _hidden_before_each_step(bk: Any, output: Any, h0: Any, reverse: bool) -> Any:
    """``(T, B, H)``: the hidden state each step started from (h0, then the outputs shifted
    by one step in the direction's order)."""
    steps = bk.shape(output)[0]
    first = bk.reshape(h0, (1,) + tuple(bk.shape(h0)))
    if reverse:
        return bk.concatenate([bk.getitem(output, (slice(1, steps),)), first], axis=0)
    return bk.concatenate([first, bk.getitem(output, (slice(0, steps - 1),))], axis=0)

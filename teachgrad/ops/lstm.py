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
Everything below runs on backend primitives, so every device computes it: this is the
path to read. On CPU (numpy) arrays ``backends/lstm_loops.py`` runs the same steps with
every step's results written straight into whole-sequence arrays and each step's gate
arithmetic as one compiled pass (``tests/engine/test_lstm_loops.py`` holds the two
paths equal). There ``nn.LSTM`` goes one step further: ``LSTMLayer`` is the input's
projection and the loop as one node (``tests/engine/test_lstm_layer_node.py``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..autograd.function import Context, Function
from ..backends.compiled_loops import loops_take
from ..backends import lstm_loops
from ..backends.lstm_loops import time_order
from ..tensor import Tensor


class LSTMSequence(Function):
    """``(output, h_T, c_T)`` of one LSTM layer in one direction.

    ``gates_x`` is ``(T, B, 4H)`` (``(B, T, 4H)`` with ``batch_first``; the output
    then too, so nobody copies a transposed sequence): ``x_t @ W_ih.T + b_ih + b_hh``
    for every step.
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
                reverse: bool, batch_first: bool = False):
        bk = ctx.backend
        ctx.reverse, ctx.batch_first = reverse, batch_first
        ctx.in_place = loops_take(gates_x._array, h0._array, c0._array, weight_hh._array)
        if ctx.in_place:  # numpy arrays: the same steps, written into whole-sequence arrays
            output, h, c, saved = lstm_loops.forward_sequence(
                lstm_loops.scaled_gates(gates_x._array), h0._array, c0._array,
                weight_hh._array, reverse, batch_first, keep_h_before=ctx.needs_input_grad[3])
            ctx.arrays = (saved, c0._array, weight_hh._array)
            return output, h, c
        batch, hidden = h0.shape
        steps = gates_x.shape[1 if batch_first else 0]
        # (H, 4H), for h @ W_hh.T; copied row-major once: OpenBLAS multiplies a small h by
        # it several times faster than by the transposed view
        w_hh_t = bk.contiguous(bk.permute(weight_hh._array, (1, 0)))
        # Per step, what backward needs: the gates' values, the cell and its tanh. Small
        # arrays, one per step, joined into sequences only where a sequence is needed.
        gates: list[Any] = [None] * steps
        cells: list[Any] = [None] * steps
        tanh_cells: list[Any] = [None] * steps
        hiddens: list[Any] = [None] * steps
        h, c = h0._array, c0._array
        for t in time_order(steps, reverse):
            a = bk.matmul(h, w_hh_t)
            bk.binary_inplace("add", a, bk.getitem(gates_x._array, _step(t, batch_first)))
            act, c = gates_forward(bk, bk.reshape(a, (batch, 4, hidden)), c)
            tanh_c = bk.unary("tanh", c)
            h = bk.binary("mul", bk.getitem(act, (slice(None), 3)), tanh_c)  # h' = o tanh(c')
            gates[t], cells[t], tanh_cells[t], hiddens[t] = act, c, tanh_c, h
        ctx.arrays = (gates, cells, tanh_cells, hiddens, h0._array, c0._array, weight_hh._array)
        output = _sequence(bk, hiddens, batch_first)
        return output, h, c

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor, grad_h_last: Tensor, grad_c_last: Tensor):
        bk = ctx.backend
        device = grad_output.device
        if ctx.in_place:
            saved, c0, weight_hh = ctx.arrays
            grads = lstm_loops.backward_sequence(saved, c0, weight_hh, grad_output._array,
                                                 grad_h_last._array, grad_c_last._array,
                                                 ctx.reverse, ctx.batch_first,
                                                 keep_grad_h0=ctx.needs_input_grad[1])
            return tuple(None if g is None else Tensor._make(g, bk, device) for g in grads) + \
                (None, None)
        gates, cells, tanh_cells, hiddens, h0, c0, weight_hh = ctx.arrays
        batch, _, hidden = bk.shape(gates[0])
        steps = len(gates)
        grad_gates: list[Any] = [None] * steps
        dh, dc = grad_h_last._array, grad_c_last._array
        first_step = time_order(steps, ctx.reverse)[0]
        for t in reversed(time_order(steps, ctx.reverse)):
            # h' reaches the loss through the step after (dh) and the output at t
            grad_a, dc = gates_backward(bk, gates[t], _state_before(cells, c0, t, ctx.reverse),
                                        tanh_cells[t], dh,
                                        bk.getitem(grad_output._array, _step(t, ctx.batch_first)), dc)
            grad_a = bk.reshape(grad_a, (batch, 4 * hidden))
            grad_gates[t] = grad_a
            if t == first_step and not ctx.needs_input_grad[1]:
                dh = None  # the product through W_hh would only be h0's gradient
                break
            dh = bk.matmul(grad_a, weight_hh)  # on to the step before, through W_hh

        grad_gates_x = _sequence(bk, grad_gates, ctx.batch_first)
        grad_weight_hh = None
        if ctx.needs_input_grad[3]:  # Σ_t grad_a[t].T @ h_before[t]: one matmul over all t
            h_before = [_state_before(hiddens, h0, t, ctx.reverse) for t in range(steps)]
            grad_weight_hh = bk.matmul(
                bk.permute(bk.reshape(grad_gates_x, (steps * batch, 4 * hidden)), (1, 0)),
                bk.reshape(_sequence(bk, h_before, ctx.batch_first), (steps * batch, hidden)))
        return (Tensor._make(grad_gates_x, bk, device),
                None if dh is None else Tensor._make(dh, bk, device),
                Tensor._make(dc, bk, device),
                None if grad_weight_hh is None else Tensor._make(grad_weight_hh, bk, device), None, None)


class LSTMLayer(Function):
    """``(output, h_T, c_T)`` of one LSTM layer in one direction from the layer's input
    ``x`` (``(T, B, F)``, or ``(B, T, F)`` with ``batch_first``) and its four weights:
    ``LSTMSequence.apply(F.linear(x, W_ih, b_ih + b_hh), h0, c0, W_hh, ...)`` as one node,
    on numpy arrays only (``nn.LSTM`` takes this path where ``backends/lstm_loops.py``
    runs; that composition is the path to read, and every other backend's).

    Why one node: the input's share of the gates then arrives with the σ gates' ½ in
    it (from a halved copy of ``W_ih``, made in the same product), which saves a pass
    over the gates in every step, and the bias's sum, ``Linear``'s node and the graph's
    walk between the two nodes go. The same products and sums in the same order: the
    same bits (``tests/engine/test_lstm_loops.py``).
    """

    rule = LSTMSequence.rule + "; a = x W_ihᵀ + b_ih + b_hh + h W_hhᵀ: ∂a/∂x = W_ih, ∂a/∂W_ih = x"

    @staticmethod
    def forward(ctx: Context, x: Tensor, h0: Tensor, c0: Tensor, weight_ih: Tensor,
                weight_hh: Tensor, bias_ih: Tensor | None, bias_hh: Tensor | None,
                reverse: bool, batch_first: bool):
        ctx.reverse, ctx.batch_first = reverse, batch_first
        bias = None if bias_ih is None else np.add(bias_ih._array, bias_hh._array)
        output, h, c, saved = lstm_loops.forward_layer(
            x._array, h0._array, c0._array, weight_ih._array, weight_hh._array, bias, reverse,
            batch_first, keep_h_before=ctx.needs_input_grad[4])
        ctx.arrays = (saved, x._array, c0._array, weight_ih._array, weight_hh._array)
        return output, h, c

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor, grad_h_last: Tensor, grad_c_last: Tensor):
        saved, x, c0, weight_ih, weight_hh = ctx.arrays
        needs_x, needs_h0, _, needs_w_ih, _, needs_b_ih, needs_b_hh = ctx.needs_input_grad[:7]
        grad_gates_x, grad_h0, grad_c0, grad_w_hh = lstm_loops.backward_sequence(
            saved, c0, weight_hh, grad_output._array, grad_h_last._array, grad_c_last._array,
            ctx.reverse, ctx.batch_first, keep_grad_h0=needs_h0)
        grad_x, grad_w_ih, grad_b = lstm_loops.input_projection_grads(
            grad_gates_x, x, weight_ih, needs_x, needs_w_ih, needs_b_ih or needs_b_hh)
        # both biases add to every gate: the same gradient, an array each
        grad_b_hh = None if grad_b is None or not needs_b_hh else grad_b.copy()
        grads = (grad_x, grad_h0, grad_c0, grad_w_ih, grad_w_hh,
                 grad_b if needs_b_ih else None, grad_b_hh)
        bk, device = ctx.backend, grad_output.device
        return tuple(None if g is None else Tensor._make(g, bk, device) for g in grads) + \
            (None, None)


def gates_forward(bk: Any, a: Any, c: Any) -> tuple[Any, Any]:
    """One step's gates ``(B, 4, H)`` from their pre-activations ``a``, and the new cell
    ``c' = f c + i g``.

    σ of all four quarters at once, as ``(1 + tanh(a/2)) / 2`` (three passes with plain
    numbers, where σ's own formula takes seven), then g's quarter is tanh.
    """
    squashed = bk.unary("tanh", bk.binary("mul", a, 0.5))
    g = bk.unary("tanh", bk.getitem(a, (slice(None), 2)))
    gates = bk.binary("mul", bk.binary("add", squashed, 1.0), 0.5)
    bk.setitem(gates, (slice(None), 2), g)
    i, f, g, _ = (bk.getitem(gates, (slice(None), k)) for k in range(4))
    return gates, bk.binary("add", bk.binary("mul", f, c), bk.binary("mul", i, g))


def gates_backward(bk: Any, gates: Any, c_before: Any, tanh_c: Any, dh_next: Any,
                   dh_output: Any, dc: Any) -> tuple[Any, Any]:
    """One step's backward through its gates: ``(grad of the pre-activations a (B, 4, H),
    grad reaching the cell before the step)``, from the gradient reaching h' (``dh_next``
    from the step after plus ``dh_output`` from the output at this step) and ``dc``
    (reaching c' from the step after).

    On numpy arrays ``backends/lstm_loops.py`` runs the same arithmetic as one compiled
    pass per step (``lstm_step_loops.lstm_step_backward``).
    """
    dh = bk.binary("add", dh_next, dh_output)
    i, f, g, o = (bk.getitem(gates, (slice(None), k)) for k in range(4))
    # h' = o tanh(c'): the gradient reaches c' from h' and from the step after
    dc = bk.binary("add", dc, bk.binary("mul", dh, bk.binary("mul", o, _one_minus_square(bk, tanh_c))))
    # ∂c'/∂i = g, ∂c'/∂f = c, ∂c'/∂g = i, ∂h'/∂o = tanh(c'); then through each gate's own
    # function: σ' = σ(1 - σ) and tanh' = (1 + tanh)(1 - tanh), that is (k + s)(1 - s)
    # with k = 0 for the σ gates and 1 for g
    partners = bk.concatenate([_as_gate(bk, p) for p in (g, c_before, i, tanh_c)], axis=1)
    incoming = bk.concatenate([_as_gate(bk, dc)] * 3 + [_as_gate(bk, dh)], axis=1)
    slopes = bk.binary("mul", bk.binary("add", gates, _tanh_shift(bk, bk.dtype(gates))),
                       bk.binary("sub", 1.0, gates))
    grad_a = bk.binary("mul", bk.binary("mul", incoming, partners), slopes)
    return grad_a, bk.binary("mul", dc, f)  # c reaches the step before through f


def _tanh_shift(bk: Any, dtype: Any) -> Any:
    """A ``(4, 1)`` column, one value per gate i, f, g, o: 1 for g, 0 for the others.

    The slope of a gate's value ``s`` is then ``(tanh_shift + s)(1 - s)`` for all four:
    ``σ' = σ(1 - σ)`` and ``tanh' = (1 + tanh)(1 - tanh)``.
    """
    return bk.from_numpy(np.array([[0.0], [0.0], [1.0], [0.0]], dtype=dtype))


def _as_gate(bk: Any, x: Any) -> Any:
    """``(B, H)`` as ``(B, 1, H)``: one gate's slot of the ``(B, 4, H)`` layout."""
    batch, hidden = bk.shape(x)
    return bk.reshape(x, (batch, 1, hidden))


def _step(t: int, batch_first: bool) -> tuple:
    """The index of time step ``t`` in a ``(T, B, F)`` (or ``(B, T, F)``) sequence."""
    return (slice(None), t) if batch_first else (t,)


def _sequence(bk: Any, steps: list, batch_first: bool) -> Any:
    """``(B, F)`` arrays, one per time step, joined into ``(T, B, F)`` (or ``(B, T, F)``)."""
    batch, features = bk.shape(steps[0])
    shape = (batch, 1, features) if batch_first else (1, batch, features)
    return bk.concatenate([bk.reshape(x, shape) for x in steps], axis=1 if batch_first else 0)


def _state_before(states: list, start: Any, t: int, reverse: bool) -> Any:
    """The state (h or c) step ``t`` started from: the previous step's in the direction's
    order, or ``start`` for its first step."""
    previous = t + 1 if reverse else t - 1
    return states[previous] if 0 <= previous < len(states) else start


def _one_minus_square(bk: Any, t: Any) -> Any:
    """``tanh'(a) = 1 - tanh(a)²``, from ``t = tanh(a)``."""
    return bk.binary("sub", 1.0, bk.binary("mul", t, t))

"""One time step of each recurrent network, and the cells ``RNNCell``, ``LSTMCell``, ``GRUCell``.

A recurrent layer (``recurrent.py``) is a loop over time of one of these
steps. Every step first needs ``x_t @ W_ih.T + b_ih``, which does not depend
on the previous step: the layers compute it for all time steps at once (one
big matmul) and hand each step its slice, ``x_part``. The step adds the part
that does depend on the past, ``h @ W_hh.T + b_hh``, and applies the gates.

Weights follow PyTorch: the gates are stacked along the rows, ``weight_ih``
is ``(gates * hidden, input)``, ``weight_hh`` is ``(gates * hidden, hidden)``,
and every parameter starts uniform on ``±1/sqrt(hidden_size)``.
"""
from __future__ import annotations

import math
from typing import Any

import teachgrad as tg
from teachgrad.autograd import function
from teachgrad.autograd.parts import plugged_parts
from teachgrad.backends.compiled_loops import loops_take
from teachgrad.ops.lstm import LSTMLayer, LSTMSequence
from teachgrad.tensor import Tensor

from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter
from .recurrent_checks import check_cell_states, check_input, check_nonlinearity, check_size


def rnn_step(x_part: Tensor, h: Tensor, weight_hh: Tensor, bias_hh: Tensor | None,
             nonlinearity: str) -> Tensor:
    """Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""
    pre_activation = x_part + F.linear(h, weight_hh, bias_hh)
    return tg.tanh(pre_activation) if nonlinearity == "tanh" else tg.relu(pre_activation)


def gru_step(x_part: Tensor, h: Tensor, weight_hh: Tensor, bias_hh: Tensor | None) -> Tensor:
    """GRU, gates ``r, z, n`` in that order along the rows of the weights::

        r  = σ(x_r + h W_hr^T + b_hr)            reset gate
        z  = σ(x_z + h W_hz^T + b_hz)            update gate
        n  = tanh(x_n + r * (h W_hn^T + b_hn))   candidate (r scales the h part *with* its bias)
        h' = (1 - z) * n + z * h
    """
    hidden = h.shape[-1]
    h_part = F.linear(h, weight_hh, bias_hh)
    r = tg.sigmoid(x_part[..., :hidden] + h_part[..., :hidden])
    z = tg.sigmoid(x_part[..., hidden:2 * hidden] + h_part[..., hidden:2 * hidden])
    n = tg.tanh(x_part[..., 2 * hidden:] + r * h_part[..., 2 * hidden:])
    return n + z * (h - n)  # = (1 - z) * n + z * h, one operation fewer


def lstm_layer(x: Tensor, h0: Tensor, c0: Tensor, weights: list[Tensor | None],
               reverse: bool = False, batch_first: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """LSTM over a ``(T, B, input)`` sequence (``(B, T, input)`` with ``batch_first``):
    ``(output, h_T, c_T)``. Gates ``i, f, g, o``::

        i = σ(x W_ii^T + b_ii + h W_hi^T + b_hi)     input gate
        f = σ(x W_if^T + b_if + h W_hf^T + b_hf)     forget gate
        g = tanh(x W_ig^T + b_ig + h W_hg^T + b_hg)  cell candidate
        o = σ(x W_io^T + b_io + h W_ho^T + b_ho)     output gate
        c' = f * c + i * g
        h' = o * tanh(c')

    The loop over time, with the gate gradients written out by hand, is one
    Function (``ops/lstm.py``): an LSTM is the network people time.
    """
    weight_ih, weight_hh, bias_ih, bias_hh = weights
    if _one_node_fits(x, h0, c0, weights):
        return LSTMLayer.apply(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, reverse,
                               batch_first)
    bias = None if bias_ih is None else bias_ih + bias_hh  # both biases add to every gate
    return LSTMSequence.apply(F.linear(x, weight_ih, bias), h0, c0, weight_hh, reverse, batch_first)


def _one_node_fits(x: Tensor, h0: Tensor, c0: Tensor, weights: list[Tensor | None]) -> bool:
    """Whether ``LSTMLayer`` (the input's projection and the loop as one node, the same
    numbers) computes ``lstm_layer`` here: numpy arrays of one float dtype, autocast off
    (``F.linear`` is a cast point), and no learner's backward plugged into the two nodes
    it stands for."""
    arrays = [t._array for t in (x, h0, c0, *weights) if t is not None]
    if function.cast_policy is not None or not loops_take(*arrays):
        return False
    plugged = plugged_parts()
    return not plugged or not any(f"backward:{op}" in plugged
                                  for op in ("Linear", "LSTMSequence", "Add"))


class RNNCellBase(Module):
    """The parameters every cell has: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.input_size = check_size("input_size", input_size)
        self.hidden_size = check_size("hidden_size", hidden_size)
        self.bias = bool(bias)
        rows = num_chunks * hidden_size
        for name, shape in gate_parameter_shapes(rows, input_size, hidden_size, bias):
            setattr(self, name, Parameter(tg.empty(shape, device=device, dtype=dtype)))
        if not bias:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every parameter uniform on ``±1/sqrt(hidden_size)`` (PyTorch's start)."""
        uniform_start_(self.parameters(), self.hidden_size)

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            text += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += f", nonlinearity={self.nonlinearity}"
        return text

    def _states(self, input: Tensor, hx: Tensor | tuple | None, count: int) -> tuple[tuple, bool]:
        """The checked input and states as a batch (a 1-D input becomes a batch of one),
        zeros where ``hx`` is None, and whether the input was batched."""
        name = type(self).__name__
        batched = check_input(name, input, self.input_size, self.weight_ih, cell=True)
        if hx is None:
            shape = (input.shape[0], self.hidden_size) if batched else (self.hidden_size,)
            zeros = tg.zeros(shape, dtype=input.dtype, device=input.device)
            states = (zeros,) * count
        else:
            states = tuple(hx) if count > 1 else (hx,)
            if count > 1 and len(states) != count:
                raise ValueError(f"{name}: hx must be a pair (h_0, c_0), got {len(states)} tensors")
            check_cell_states(name, states, input, self.hidden_size, self.weight_ih)
        if not batched:
            input, states = input.unsqueeze(0), tuple(s.unsqueeze(0) for s in states)
        return (input, *states), batched

    def _x_part(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight_ih, self.bias_ih)


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None) -> None:
        check_nonlinearity(nonlinearity)
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        (x, h), batched = self._states(input, hx, 1)
        h = rnn_step(self._x_part(x), h, self.weight_hh, self.bias_hh, self.nonlinearity)
        return h if batched else h.squeeze(0)


class GRUCell(RNNCellBase):
    __doc__ = "One step of a GRU.\n\n" + gru_step.__doc__.split("\n", 1)[1]

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        (x, h), batched = self._states(input, hx, 1)
        h = gru_step(self._x_part(x), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    __doc__ = "One step of an LSTM: returns ``(h', c')``.\n\n" + lstm_layer.__doc__.split("\n", 1)[1]

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        (x, h, c), batched = self._states(input, hx, 2)
        weights = [self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh]
        _, h, c = lstm_layer(x.unsqueeze(0), h, c, weights)  # a sequence of one step
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


def gate_parameter_shapes(rows: int, input_size: int, hidden_size: int,
                          bias: bool) -> list[tuple[str, tuple[int, ...]]]:
    """``(name, shape)`` of a cell's parameters, in PyTorch's order."""
    shapes = [("weight_ih", (rows, input_size)), ("weight_hh", (rows, hidden_size))]
    if bias:
        shapes += [("bias_ih", (rows,)), ("bias_hh", (rows,))]
    return shapes


def uniform_start_(parameters: Any, hidden_size: int) -> None:
    """Every parameter uniform on ``±1/sqrt(hidden_size)``."""
    bound = 1.0 / math.sqrt(hidden_size)
    for p in parameters:
        init.uniform_(p, -bound, bound)

"""Recurrent layers: ``RNN``, ``LSTM`` and ``GRU``, as in ``torch.nn``.

A recurrent layer reads a sequence one step at a time and carries a hidden
state ``h`` (an LSTM also a cell state ``c``) from each step to the next.
The equations of one step are in ``recurrent_cells.py``; this file stacks
them:

* **over time**: a loop, ``h_t = step(x_t, h_{t-1})``; the outputs are every ``h_t``;
* **in depth** (``num_layers``): layer ``k + 1`` reads layer ``k``'s outputs,
  with dropout in between while training;
* **in both directions** (``bidirectional``): a second set of weights reads
  the sequence back to front; the two outputs are concatenated per step.

Shapes are PyTorch's: input ``(T, B, input_size)`` (``(B, T, ...)`` with
``batch_first``, ``(T, input_size)`` for one unbatched sequence); output
``(T, B, directions * hidden)``; final states ``(layers * directions, B, hidden)``
(never batch-first). Parameter names are PyTorch's too (``weight_ih_l0``,
``bias_hh_l1_reverse``...), so a PyTorch ``state_dict`` loads.
"""
from __future__ import annotations

from typing import Any

import teachgrad as tg
from teachgrad.tensor import Tensor

from . import functional as F
from .module import Module
from .parameter import Parameter
from .recurrent_cells import gate_parameter_shapes, gru_step, lstm_layer, rnn_step, uniform_start_
from .recurrent_checks import (
    check_dropout, check_input, check_nonlinearity, check_size, check_states,
)

GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


class RNNBase(Module):
    """What the three layers share: their parameters, checks and the loops over layers and
    directions. ``mode`` is ``"LSTM"``, ``"GRU"``, ``"RNN_TANH"`` or ``"RNN_RELU"``."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        check_size("input_size", input_size)
        check_size("hidden_size", hidden_size)
        check_size("num_layers", num_layers)
        dropout = check_dropout(dropout, num_layers)
        if proj_size != 0:
            raise NotImplementedError(
                f"{type(self).__name__}: teachgrad does not implement proj_size (LSTM with "
                "projections). Fix: leave proj_size=0 and add an nn.Linear after the layer.")
        super().__init__()
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first = bool(bias), bool(batch_first)
        self.dropout, self.bidirectional, self.proj_size = dropout, bool(bidirectional), 0
        self._all_weights: list[list[str]] = []
        rows = GATES[mode] * hidden_size
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else self.num_directions * hidden_size
            for suffix in ["", "_reverse"][:self.num_directions]:
                names = []
                for name, shape in gate_parameter_shapes(rows, layer_input, hidden_size, bias):
                    names.append(f"{name}_l{layer}{suffix}")
                    setattr(self, names[-1], Parameter(tg.empty(shape, device=device, dtype=dtype)))
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """The parameters per layer and direction: ``[[w_ih, w_hh, b_ih, b_hh], ...]``."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def _weights(self, k: int) -> list[Tensor | None]:
        """``[w_ih, w_hh, b_ih, b_hh]`` of layer-and-direction ``k`` (None for no bias)."""
        weights = self.all_weights[k]
        return weights if self.bias else weights + [None, None]

    def reset_parameters(self) -> None:
        """Every parameter uniform on ``±1/sqrt(hidden_size)`` (PyTorch's start)."""
        uniform_start_(self.parameters(), self.hidden_size)

    def flatten_parameters(self) -> None:
        """Does nothing: PyTorch packs the weights into one buffer for cuDNN here;
        teachgrad has no cuDNN, so there is nothing to pack (kept so that code calling
        it runs unchanged)."""

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        for option, default in (("num_layers", 1), ("bias", True), ("batch_first", False),
                                ("dropout", 0.0), ("bidirectional", False)):
            if getattr(self, option) != default:
                text += f", {option}={getattr(self, option)}"
        return text

    # -- forward ----------------------------------------------------------------
    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, Any]:
        name = type(self).__name__
        first_weight = getattr(self, self._all_weights[0][0])
        batched = check_input(name, input, self.input_size, first_weight, cell=False)
        count = 2 if self.mode == "LSTM" else 1
        steps_axis = 1 if batched and self.batch_first else 0
        if input.shape[steps_axis] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        batch = input.shape[1 - steps_axis] if batched else 1
        starts = self._initial_states(input, hx, batched, batch, count, first_weight)
        # one sequence is a batch of one; the time axis stays where the caller has it
        # (transposing a batch-first sequence would cost a copy, forward and backward)
        x = input if batched else input.unsqueeze(1)
        output, finals = self._run_layers(x, starts, count, time_axis=steps_axis)
        # (layers * directions, B, H) each; one layer and direction needs no copy, a view
        finals = tuple(f[0].unsqueeze(0) if len(f) == 1 else tg.stack(f, 0) for f in finals)
        if not batched:
            output, finals = output.squeeze(1), tuple(f.squeeze(1) for f in finals)
        return output, (finals if count == 2 else finals[0])

    def _initial_states(self, input: Tensor, hx: Any, batched: bool, batch: int, count: int,
                        weight: Tensor) -> list[tuple[Tensor, ...]]:
        """Each layer and direction's starting states (``count`` of them, ``(B, H)`` each):
        ``hx`` checked and batched, or zeros (one ``(B, H)`` tensor for all of them: no
        ``(layers * directions, B, H)`` array to index, no indexing in the graph)."""
        layers = self.num_layers * self.num_directions
        shape = (layers, batch, self.hidden_size)
        if hx is None:
            zero = tg.zeros((batch, self.hidden_size), dtype=input.dtype, device=input.device)
            return [(zero,) * count] * layers
        if count == 2 and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise RuntimeError(f"{type(self).__name__}: hx must be a tuple (h_0, c_0) of two "
                               f"tensors, got {type(hx).__name__}")
        states = tuple(hx) if count == 2 else (hx,)
        check_states(type(self).__name__, states, batched, shape, weight)
        if not batched:
            states = tuple(s.unsqueeze(1) for s in states)
        return [tuple(s[k] for s in states) for k in range(layers)]

    def _run_layers(self, x: Tensor, starts: list[tuple[Tensor, ...]], count: int,
                    time_axis: int) -> tuple[Tensor, list]:
        """Every layer, every direction over ``x`` (time along ``time_axis``, batch along
        the other of the first two); returns the last layer's output and each state's
        final value per layer and direction (in PyTorch's order)."""
        finals: list[list[Tensor]] = [[] for _ in range(count)]
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0:
                x = F.dropout(x, self.dropout, self.training)
            outputs = []
            for direction in range(self.num_directions):
                k = layer * self.num_directions + direction
                out, ends = self._run_direction(x, starts[k], self._weights(k), direction == 1,
                                                time_axis)
                outputs.append(out)
                for final, end in zip(finals, ends):
                    final.append(end)
            x = outputs[0] if len(outputs) == 1 else tg.cat(outputs, dim=2)
        return x, finals

    def _run_direction(self, x: Tensor, start: tuple[Tensor, ...], weights: list,
                       reverse: bool, time_axis: int) -> tuple[Tensor, tuple[Tensor, ...]]:
        """One layer in one direction over the whole sequence: ``(output, final states)``."""
        if self.mode == "LSTM":
            output, h, c = lstm_layer(x, start[0], start[1], weights, reverse, time_axis == 1)
            return output, (h, c)
        weight_ih, weight_hh, bias_ih, bias_hh = weights
        x_parts = F.linear(x, weight_ih, bias_ih)  # the input's share, all steps at once
        h = start[0]
        steps = x.shape[time_axis]
        outputs: list[Tensor] = [None] * steps  # type: ignore[list-item]
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            x_part = x_parts[:, t] if time_axis == 1 else x_parts[t]
            if self.mode == "GRU":
                h = gru_step(x_part, h, weight_hh, bias_hh)
            else:
                h = rnn_step(x_part, h, weight_hh, bias_hh, self.nonlinearity)
            outputs[t] = h
        return tg.stack(outputs, time_axis), (h,)


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``, per layer and
    direction (``nonlinearity="relu"`` for ReLU). Returns ``(output, h_n)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        mode = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}[check_nonlinearity(nonlinearity)]
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory: returns ``(output, (h_n, c_n))``. One step, gates ``i, f, g, o``::

        i = σ(x W_ii^T + b_ii + h W_hi^T + b_hi),   f = σ(x W_if^T + b_if + h W_hf^T + b_hf)
        g = tanh(x W_ig^T + b_ig + h W_hg^T + b_hg), o = σ(x W_io^T + b_io + h W_ho^T + b_ho)
        c' = f * c + i * g
        h' = o * tanh(c')

    ``hx`` is ``(h_0, c_0)``. ``proj_size`` is not implemented.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device: Any = None, dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit: returns ``(output, h_n)``. One step, gates ``r, z, n``::

        r = σ(x W_ir^T + b_ir + h W_hr^T + b_hr)
        z = σ(x W_iz^T + b_iz + h W_hz^T + b_hz)
        n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn))
        h' = (1 - z) * n + z * h
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)

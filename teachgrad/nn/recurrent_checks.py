"""The argument checks of the recurrent layers and cells, with PyTorch's messages.

Every check runs before any arithmetic: a wrong shape fails at once, naming
both shapes, not somewhere inside the loop over time.
"""
from __future__ import annotations

import warnings
from typing import Any

from teachgrad.tensor import Tensor

PACKED_MESSAGE = (
    "{name}: teachgrad does not implement PackedSequence inputs. Fix: pad the batch with "
    "tg.nn.utils.rnn.pad_sequence(sequences, batch_first=...) and run the padded tensor "
    "through the layer; then read each sequence's output at its own last step "
    "(output[length - 1, i] for sequence i) and mask the padded steps out of the loss. "
    "For a bidirectional layer, run sequences of different lengths in separate batches "
    "(padding would reach the backward direction first)."
)


def refuse_packed(name: str, input: Any) -> None:
    """A PackedSequence (anything with ``batch_sizes``) is refused with what to do instead."""
    if hasattr(input, "batch_sizes"):
        raise NotImplementedError(PACKED_MESSAGE.format(name=name))
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")


def check_size(name: str, value: Any) -> int:
    """A layer size (``hidden_size``, ``num_layers``...): an int above zero."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be greater than zero")
    return value


def check_dropout(dropout: Any, num_layers: int) -> float:
    """A probability; with one layer it would never be used, which PyTorch warns about."""
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
        raise ValueError("dropout should be a number in range [0, 1] representing the "
                         "probability of an element being zeroed")
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                      "non-zero dropout expects num_layers greater than 1, but got "
                      f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
    return float(dropout)


def check_nonlinearity(nonlinearity: Any) -> str:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
    return nonlinearity


def check_like_weight(name: str, what: str, t: Tensor, weight: Tensor) -> None:
    """``t`` (the input or a state) must have the weights' dtype and device."""
    if t.device != weight.device:
        raise RuntimeError(
            f"{name}: {what} is on {t.device} but the layer's weights are on {weight.device}. "
            f"Fix: move the layer with .to('{t.device}') or the {what} with .to('{weight.device}').")
    if t.dtype is not weight.dtype:
        raise ValueError(
            f"{name} {what} dtype ({t.dtype}) does not match weight dtype ({weight.dtype}). "
            f"Convert {what}: {what}.to({weight.dtype}), or convert model: model.to({t.dtype})")


def check_input(name: str, input: Any, input_size: int, weight: Tensor, cell: bool) -> bool:
    """Checks the input of a layer (3-D, or 2-D for one sequence) or of a cell (2-D, or
    1-D for one example); returns whether it is batched."""
    refuse_packed(name, input)
    low, high = (1, 2) if cell else (2, 3)
    if input.ndim not in (low, high):
        raise ValueError(f"{name}: Expected input to be {low}D or {high}D, got {input.ndim}D instead")
    if input.shape[-1] != input_size:
        got = input.shape[-1]
        raise RuntimeError(f"input has inconsistent input_size: got {got} expected {input_size}"
                           if cell else f"input.size(-1) must be equal to input_size. Expected "
                           f"{input_size}, got {got}")
    check_like_weight(name, "input", input, weight)
    return input.ndim == high


def check_states(name: str, states: tuple[Tensor, ...], batched: bool, expected: tuple[int, ...],
                 weight: Tensor) -> None:
    """Initial states: 3-D for a batched input, 2-D for one sequence, and of ``expected``
    shape (``(layers * directions, batch, hidden)``)."""
    for s in states:
        if not isinstance(s, Tensor):
            raise TypeError(f"{name}: initial states must be Tensors, got {type(s).__name__}")
    dims = 3 if batched else 2
    if any(s.ndim != dims for s in states):
        kind = "batched 3-D" if batched else "unbatched 2-D"
        got = ", ".join(f"{s.ndim}-D" for s in states)
        which, got = ("hx", f"{got} tensor") if len(states) == 1 else ("hx and cx", f"({got}) tensors")
        raise RuntimeError(f"For {kind} input, {which} should also be {dims}-D but got {got}")
    shape = expected if batched else (expected[0], expected[2])
    for k, s in enumerate(states):
        if tuple(s.shape) != shape:
            label = "hidden" if len(states) == 1 else f"hidden[{k}]"
            raise RuntimeError(f"Expected {label} size {shape}, got {list(s.shape)}")
        check_like_weight(name, "hx", s, weight)


def check_cell_states(name: str, states: tuple[Tensor, ...], input: Tensor, hidden_size: int,
                      weight: Tensor) -> None:
    """A cell's states: one ``(batch, hidden)`` row per input row (1-D for a 1-D input)."""
    for k, s in enumerate(states):
        if not isinstance(s, Tensor):
            raise TypeError(f"{name}: hx must be a Tensor, got {type(s).__name__}")
        if s.ndim != input.ndim:
            raise RuntimeError(f"{name}: for a {input.ndim}-D input, hx should also be "
                               f"{input.ndim}-D but got a {s.ndim}-D tensor")
        if input.ndim == 2 and s.shape[0] != input.shape[0]:
            raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{k} "
                               f"batch size {s.shape[0]}")
        if s.shape[-1] != hidden_size:
            raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {s.shape[-1]}, "
                               f"expected {hidden_size}")
        check_like_weight(name, "hx", s, weight)

"""Argument checks the layers share: pairs like ``kernel_size=3`` and tensors that must
match the input's dtype and device."""
from __future__ import annotations

from typing import Any

from teachgrad.tensor import Tensor

Pair = tuple[int, int]


def pair(value: Any, name: str, minimum: int) -> Pair:
    """``3`` or ``(3, 3)`` as a checked pair of ints, each at least ``minimum``."""
    values = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(values) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise TypeError(f"{name} must be an int or a pair of ints, got {value!r}")
    if any(v < minimum for v in values):
        kind = "positive" if minimum == 1 else "non-negative"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return values  # type: ignore[return-value]


def check_like(name: str, input: Tensor, tensors: dict[str, Tensor | None]) -> None:
    """The layer's tensors must have the input's device and dtype (PyTorch does not promote)."""
    for what, t in tensors.items():
        if t is None or t.dtype is input.dtype and t.device is input.device:
            continue  # (the usual case, by identity: a layer's own tensors beside its input)
        if t.device != input.device:
            raise RuntimeError(
                f"{name}: input is on {input.device} but {what} is on {t.device}. Fix: move the "
                f"layer with .to('{input.device}') (or the input to {t.device})."
            )
        if t.dtype != input.dtype:
            raise RuntimeError(
                f"{name}: input type ({input.dtype}) and {what} type ({t.dtype}) should be the "
                f"same. Fix: convert the input with .to({t.dtype}) or the layer with .float() / "
                ".double()."
            )


def check_conv_layer(name: str, in_channels: int, out_channels: int, groups: Any,
                     padding_mode: str) -> None:
    """A convolution layer's channel counts split evenly into ``groups``; zero padding only."""
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError("groups must be a positive integer")
    if in_channels % groups != 0:
        raise ValueError("in_channels must be divisible by groups")
    if out_channels % groups != 0:
        raise ValueError("out_channels must be divisible by groups")
    if padding_mode != "zeros":
        raise NotImplementedError(f"{name}: teachgrad supports only padding_mode='zeros', "
                                  f"got {padding_mode!r}")

"""``teachgrad.nn.init``: fill a parameter with starting values, in place.

Why initialisation matters: if the weights are too large, activations grow
layer after layer; too small, and they shrink to nothing. The schemes below
pick a spread that keeps the variance of activations roughly constant from
layer to layer, given how many inputs (``fan_in``) or outputs (``fan_out``)
each unit has.

Every function works in place under ``no_grad`` (filling a parameter is not
part of the model's computation) and returns the tensor, as in PyTorch.
"""
from __future__ import annotations

import math
from typing import Any

import teachgrad as tg
from teachgrad.tensor import Tensor

from .module import Module
from .parameter import Parameter

_LINEAR_LIKE = ("linear", "conv1d", "conv2d", "conv3d", "sigmoid")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The factor that makes up for what a nonlinearity does to the variance.

    ReLU zeroes half its inputs, so it halves the variance: its gain is sqrt(2).
    """
    if nonlinearity in _LINEAR_LIKE:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4  # PyTorch's value: it keeps SELU networks' activations at unit variance
    raise ValueError(
        f"unsupported nonlinearity {nonlinearity!r}: use one of "
        "'linear', 'sigmoid', 'tanh', 'relu', 'leaky_relu', 'selu'"
    )


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """For a weight of shape ``(out, in, *kernel)``: ``(in * kernel, out * kernel)``."""
    if tensor.ndim < 2:
        raise ValueError(
            f"fan in and fan out need a tensor with at least 2 dimensions, got shape "
            f"{tuple(tensor.shape)}"
        )
    receptive_field = 1
    for size in tensor.shape[2:]:
        receptive_field *= size
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    """Fill ``tensor`` with values drawn uniformly from ``[a, b)``."""
    with tg.no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: Any = None) -> Tensor:
    """Fill ``tensor`` with values drawn from a normal distribution."""
    with tg.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill ``tensor`` with ``val``."""
    with tg.no_grad():
        return tensor.fill_(val)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with zeros."""
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with ones."""
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot/Xavier: uniform with variance ``2 / (fan_in + fan_out)`` times ``gain**2``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    bound = math.sqrt(3.0) * std  # a uniform on [-b, b] has variance b**2 / 3
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot/Xavier: normal with variance ``2 / (fan_in + fan_out)`` times ``gain**2``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    return normal_(tensor, 0.0, std)


def kaiming_uniform_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> Tensor:
    """He/Kaiming: uniform on ``[-bound, bound]`` with ``bound = gain * sqrt(3 / fan)``.

    ``nn.Linear`` calls this with ``a=sqrt(5)``, which works out to
    ``bound = 1 / sqrt(fan_in)``: PyTorch's historical default.
    """
    fan = _fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> Tensor:
    """He/Kaiming: normal with ``std = gain / sqrt(fan)``."""
    fan = _fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std)


def default_weight_and_bias_(weight: Tensor, bias: Tensor | None) -> None:
    """PyTorch's default start for ``Linear`` and ``Conv2d``: both uniform on ``±1/sqrt(fan_in)``.

    (``kaiming_uniform_`` with ``a=sqrt(5)`` gives exactly that bound for the weight.)
    """
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        uniform_(bias, -bound, bound)


def add_weight_and_bias(module: Module, weight_shape: tuple[int, ...], bias: bool, device: Any,
                        dtype: Any) -> None:
    """Give ``module`` a ``weight`` of ``weight_shape`` and a ``bias`` of one value per output
    (``weight_shape[0]``), or ``bias=None``, then its ``reset_parameters()`` start."""
    module.weight = Parameter(tg.empty(weight_shape, device=device, dtype=dtype))
    if bias:
        module.bias = Parameter(tg.empty((weight_shape[0],), device=device, dtype=dtype))
    else:
        module.register_parameter("bias", None)
    module.reset_parameters()

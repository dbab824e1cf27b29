"""More activations: ``Hardtanh``, ``ReLU6``, ``SELU``, ``Mish``, ``Hardswish``,
``Hardsigmoid``, ``LogSigmoid``, as layers and as the functions ``F.hardtanh`` (and
``F.hardtanh_``), ``F.relu6``, ``F.selu`` (and ``F.selu_``), ``F.mish``, ``F.hardswish``,
``F.hardsigmoid``, ``F.logsigmoid``.

* ``hardtanh`` clips to ``[min_val, max_val]``; ``relu6`` is ``hardtanh`` on ``[0, 6]``
  (a ReLU that cannot grow past 6, kind to low-precision arithmetic);
* ``hardsigmoid`` and ``hardswish`` are straight-line stand-ins for the sigmoid and SiLU;
* ``selu`` is ELU scaled by fixed constants chosen so that activations keep mean 0 and
  variance 1 from layer to layer ("self-normalising" networks);
* ``mish`` is ``x * tanh(softplus(x))``, a smooth cousin of SiLU;
* ``logsigmoid`` is ``log(sigmoid(x))`` without forming the sigmoid (finite for any ``x``).

The Functions and their derivatives are in :mod:`teachgrad.ops.hard_activations`
(``logsigmoid``'s is binary cross-entropy's, :mod:`teachgrad.ops.binary_cross_entropy`).
"""
from __future__ import annotations

from typing import Any

from teachgrad.ops import hard_activations as ha
from teachgrad.ops.binary_cross_entropy import LogSigmoid as LogSigmoidFunction
from teachgrad.tensor import Tensor

from .activations import _check_input, _check_number
from .inplace import inplace_result as _result
from .module import Module


def _check_clip_input(name: str, input: Any) -> None:
    """hardtanh is a clamp, so PyTorch allows integers too, but not bool."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, "
                        f"not {type(input).__name__}")
    if input.dtype.name == "bool":
        raise RuntimeError("Bool inputs not supported for hardtanh. Fix: convert the input "
                           "first, e.g. input.float()")


def _bounds_for(input: Tensor, min_val: float, max_val: float) -> tuple[Any, Any]:
    """The bounds in the input's kind of number (an integer tensor stays integer)."""
    if input.dtype.is_floating_point:
        return min_val, max_val
    return int(min_val), int(max_val)


# -- as functions --------------------------------------------------------------------------

def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """``input`` clipped to ``[min_val, max_val]``; its gradient is 1 strictly inside, else 0."""
    _check_clip_input("hardtanh", input)
    _check_number("hardtanh", "min_val", min_val)
    _check_number("hardtanh", "max_val", max_val)
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    low, high = _bounds_for(input, min_val, max_val)
    return _result(input, ha.Hardtanh.apply(input, low, high), inplace)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """:func:`hardtanh` written over ``input``."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``: :func:`hardtanh` on ``[0, 6]``."""
    _check_clip_input("relu6", input)
    return hardtanh(input, 0.0, 6.0, inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * x`` for positives, ``scale * alpha * (exp(x) - 1)`` below, with PyTorch's
    ``alpha`` = 1.6733 and ``scale`` = 1.0507."""
    _check_input("selu", input)
    return _result(input, ha.Selu.apply(input), inplace)


def selu_(input: Tensor) -> Tensor:
    """:func:`selu` written over ``input``."""
    return selu(input, inplace=True)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    _check_input("mish", input)
    return _result(input, ha.Mish.apply(input), inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``: 0 below -3, ``x`` above 3, a parabola between."""
    _check_input("hardswish", input)
    return _result(input, ha.Hardswish.apply(input), inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``: 0 below -3, 1 above 3, a straight line between."""
    _check_input("hardsigmoid", input)
    return _result(input, ha.Hardsigmoid.apply(input), inplace)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|))``: no exponent can overflow."""
    _check_input("logsigmoid", input)
    return LogSigmoidFunction.apply(input)


# -- as layers ------------------------------------------------------------------------------

class _InplaceActivation(Module):
    """A layer that only holds ``inplace`` (shown in its repr when True, as PyTorch does)."""

    function: Any = None  # the functional form, set by each subclass
    show_inplace = True

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return type(self).function(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace and self.show_inplace else ""


class Hardtanh(Module):
    """``input`` clipped to ``[min_val, max_val]``: see :func:`hardtanh`."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        _check_number("Hardtanh", "min_val", min_val)
        _check_number("Hardtanh", "max_val", max_val)
        if not max_val > min_val:  # (the layer asks for a strictly positive width)
            raise ValueError(f"max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input: Tensor) -> Tensor:
        return hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return (f"min_val={self.min_val}, max_val={self.max_val}"
                + (", inplace=True" if self.inplace else ""))


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)``: :class:`Hardtanh` on ``[0, 6]``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class SELU(_InplaceActivation):
    """Scaled ELU: see :func:`selu`."""

    function = staticmethod(selu)


class Mish(_InplaceActivation):
    """``x * tanh(softplus(x))``: see :func:`mish`."""

    function = staticmethod(mish)


class Hardswish(_InplaceActivation):
    """``x * relu6(x + 3) / 6``: see :func:`hardswish`."""

    function = staticmethod(hardswish)
    show_inplace = False  # (PyTorch's repr leaves it out)


class Hardsigmoid(_InplaceActivation):
    """``relu6(x + 3) / 6``: see :func:`hardsigmoid`."""

    function = staticmethod(hardsigmoid)
    show_inplace = False  # (PyTorch's repr leaves it out)


class LogSigmoid(Module):
    """``log(sigmoid(x))``: see :func:`logsigmoid`."""

    def forward(self, input: Tensor) -> Tensor:
        return logsigmoid(input)

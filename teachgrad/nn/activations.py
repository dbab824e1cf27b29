"""The smooth and leaky activations: ``GELU``, ``SiLU``, ``LeakyReLU``, ``ELU``, ``Softplus``,
as layers and as the functions ``F.gelu``, ``F.silu``, ``F.leaky_relu``, ``F.elu``,
``F.softplus`` (and ``F.leaky_relu_``, ``F.elu_``, in place).

ReLU's kink at 0 and its flat zero for negatives are what these soften: GELU and SiLU
weight ``x`` by a smooth "how positive is it" (the normal CDF, the sigmoid), ELU and
LeakyReLU keep a slope below 0, Softplus is a smooth ``max(x, 0)``. Each is one
Function with its derivative beside it, in :mod:`teachgrad.ops.pointwise_activation`.
"""
from __future__ import annotations

from typing import Any

from teachgrad.ops import pointwise_activation as pa
from teachgrad.tensor import Tensor

from .inplace import inplace_result as _result
from .module import Module

APPROXIMATIONS = ("none", "tanh")


def _check_input(name: str, input: Any) -> None:
    """A floating-point tensor, as PyTorch's kernels require (they have no integer version)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, "
                        f"not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(
            f'"{name}" not implemented for {input.dtype}: it is defined for floating-point '
            f"tensors only. Fix: convert the input first, e.g. input.float()")


def _check_number(name: str, what: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}(): argument '{what}' must be a number, not {type(value).__name__}")


def _check_approximate(approximate: Any) -> None:
    if approximate not in APPROXIMATIONS:
        raise RuntimeError(f"approximate argument must be either none or tanh (got "
                           f"{approximate!r}). Fix: approximate='none' (exact, with erf) or "
                           "approximate='tanh'")


# -- as functions --------------------------------------------------------------------------

def gelu(input: Tensor, *, approximate: str = "none") -> Tensor:
    """``x * Phi(x)``, with ``Phi`` the standard normal CDF (``approximate='none'``), or its
    tanh approximation ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``."""
    _check_input("gelu", input)
    _check_approximate(approximate)
    return (pa.GeluTanh if approximate == "tanh" else pa.Gelu).apply(input)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)`` (also called swish)."""
    _check_input("silu", input)
    return _result(input, pa.Silu.apply(input), inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``negative_slope * x``."""
    _check_input("leaky_relu", input)
    _check_number("leaky_relu", "negative_slope", negative_slope)
    return _result(input, pa.LeakyRelu.apply(input, negative_slope), inplace)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """:func:`leaky_relu` written over ``input``."""
    return leaky_relu(input, negative_slope, inplace=True)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``: smooth, and bounded below by ``-alpha``."""
    _check_input("elu", input)
    _check_number("elu", "alpha", alpha)
    return _result(input, pa.Elu.apply(input, alpha), inplace)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """:func:`elu` written over ``input``."""
    return elu(input, alpha, inplace=True)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, a smooth ``relu``; ``x`` itself where
    ``beta * x > threshold`` (where the two agree to within rounding)."""
    _check_input("softplus", input)
    _check_number("softplus", "beta", beta)
    _check_number("softplus", "threshold", threshold)
    return pa.Softplus.apply(input, beta, threshold)


# -- as layers ------------------------------------------------------------------------------

class GELU(Module):
    """``x * Phi(x)``: see :func:`gelu` (``approximate='tanh'`` for the tanh formula)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        _check_approximate(approximate)  # (PyTorch checks at the first call)
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """``x * sigmoid(x)``: see :func:`silu`."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return silu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """``x`` for positives, ``negative_slope * x`` below: see :func:`leaky_relu`."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        _check_number("LeakyReLU", "negative_slope", negative_slope)
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    """``x`` for positives, ``alpha * (exp(x) - 1)`` below: see :func:`elu`."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        _check_number("ELU", "alpha", alpha)
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        return elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``: see :func:`softplus`."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        _check_number("Softplus", "beta", beta)
        _check_number("Softplus", "threshold", threshold)
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"

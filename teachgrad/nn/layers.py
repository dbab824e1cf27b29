"""Layers: ``Linear``, the activations, ``Flatten`` and ``Dropout``.

Each layer keeps its hyperparameters (and parameters, for ``Linear``) and
calls the matching function of :mod:`teachgrad.nn.functional` in ``forward``.
"""
from __future__ import annotations

from typing import Any

from teachgrad.tensor import Tensor

from . import functional as F
from . import init
from .module import Module


class Linear(Module):
    """``y = x @ W.T + b``, with ``W`` of shape ``(out_features, in_features)``.

    Initialised as in PyTorch: ``W`` and ``b`` uniform on
    ``[-1/sqrt(in_features), 1/sqrt(in_features)]``.
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True,
        device: Any = None, dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        init.add_weight_and_bias(self, (out_features, in_features), bias, device, dtype)

    def reset_parameters(self) -> None:
        """Draw fresh starting values (PyTorch's default scheme)."""
        init.default_weight_and_bias_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        has_bias = self.bias is not None
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={has_bias}"


class ReLU(Module):
    """``max(x, 0)``: passes positives, zeroes negatives."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    """``tanh(x)``: squashes to ``(-1, 1)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``: squashes to ``(0, 1)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class Softmax(Module):
    """``softmax(x, dim)``: turns scores into probabilities along ``dim``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """``log_softmax(x, dim)``: log-probabilities, ready for :class:`NLLLoss`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)


class Flatten(Module):
    """Merge dimensions ``start_dim`` to ``end_dim`` into one (keeps the batch dim by default).

    An image batch ``(N, 1, 28, 28)`` becomes ``(N, 784)``, ready for ``Linear``.
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Dropout(Module):
    """While training, zero each element with probability ``p`` and scale the rest by ``1/(1-p)``.

    In eval mode (``model.eval()``) it passes its input through unchanged.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        F._check_probability(p)
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout2d(Dropout):
    """While training, zero whole channels of an ``(N, C, H, W)`` input with probability
    ``p`` and scale the rest by ``1/(1-p)`` (see ``F.dropout2d``); identity in eval mode."""

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Identity(Module):
    """Returns its input: a placeholder where a layer is optional."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input

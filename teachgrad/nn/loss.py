"""Loss modules: one number that says how wrong the model is.

Each loss computes a per-element loss and then applies ``reduction``:
``"mean"`` (the default) averages, ``"sum"`` adds up, ``"none"`` returns the
per-element losses unreduced, which is handy for looking at single samples.
"""
from __future__ import annotations

from teachgrad.tensor import Tensor

from . import functional as F
from .module import Module


class _Loss(Module):
    """Holds and checks ``reduction`` for every loss."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        F._check_reduction(reduction)
        self.reduction = reduction


class MSELoss(_Loss):
    """Mean squared error ``(input - target) ** 2``: the usual regression loss."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error ``|input - target|``: less sensitive to outliers than MSE."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_Loss):
    """Negative log-likelihood of log-probabilities (pair it with ``LogSoftmax``)."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(_Loss):
    """Cross-entropy from raw scores (logits) of shape ``(N, C)`` and class indices ``(N,)``.

    Do not put a softmax before it: it applies ``log_softmax`` itself, in a
    numerically stable way.
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, reduction=self.reduction)

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

    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)  # moves with .to(), saved in state_dict
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_Loss):
    """Cross-entropy from raw scores (logits) of shape ``(N, C)`` and class indices ``(N,)``.

    Do not put a softmax before it: it applies ``log_softmax`` itself, in a
    numerically stable way. ``weight``, ``ignore_index`` and ``label_smoothing``
    are PyTorch's.
    """

    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)  # moves with .to(), saved in state_dict
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                               self.label_smoothing)

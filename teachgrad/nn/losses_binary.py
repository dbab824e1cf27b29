"""Binary cross-entropy, from probabilities (``BCELoss``, ``F.binary_cross_entropy``) and
from logits (``BCEWithLogitsLoss``, ``F.binary_cross_entropy_with_logits``).

For a predicted probability ``p`` that the answer is 1 and a target ``y`` in ``[0, 1]``
the loss is ``-(y log p + (1 - y) log(1 - p))``. Two numerical cares, both PyTorch's:

* from probabilities, ``log p`` is clamped at -100, so a confident wrong answer
  (``p = 0``, ``y = 1``) costs 100 rather than infinity;
* from logits ``x`` (``p = sigmoid(x)``), ``log p`` is ``log_sigmoid(x)``, computed without
  forming ``p``, and ``log(1 - p) = log_sigmoid(x) - x``. That stays finite where
  ``sigmoid(x)`` rounds to 0 or 1, which is why the logits form is the one to train with.

``weight`` rescales each element's loss; ``pos_weight`` (logits only) rescales the
positive term ``y log p``, one factor per class along the last dimension.
"""
from __future__ import annotations

from typing import Any

import teachgrad as tg
from teachgrad.autograd.cast_points import cast_point
from teachgrad.ops.binary_cross_entropy import BinaryCrossEntropy, LogSigmoid
from teachgrad.tensor import Tensor

from .loss_reduction import _check_loss_options, _check_reduction, _reduce
from .module import Module


def _check_pair(name: str, input: Any, target: Any, size_message: str) -> None:
    """Both tensors, the same shape, the same floating dtype and device (PyTorch's checks)."""
    for what, t in (("input", input), ("target", target)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): argument '{what}' must be Tensor, not {type(t).__name__}")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(size_message.format(target=target.shape, input=input.shape))
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"{name}" not implemented for {input.dtype}: the input must '
                                  "hold floating-point values. Fix: input.float()")
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {target.dtype} but expected {input.dtype}: the target "
                           "must have the input's dtype. Fix: target.to(input.dtype)")
    if target.device != input.device:
        raise RuntimeError(f"{name}: input is on {input.device} but target is on "
                           f"{target.device}. Fix: move one of them with .to()")


def _check_factor(name: str, what: str, factor: Any, input: Tensor) -> None:
    """A ``weight`` or ``pos_weight`` must be a tensor that broadcasts to the input."""
    if factor is None:
        return
    if not isinstance(factor, Tensor):
        raise TypeError(f"{name}(): argument '{what}' must be Tensor, not {type(factor).__name__}")
    if factor.requires_grad and tg.is_grad_enabled():
        raise RuntimeError(f"The function '{name}' is not differentiable with respect to argument "
                           f"'{what}'. This input cannot have requires_grad True. Fix: pass "
                           f"{what}.detach()")
    if factor.device != input.device:
        raise RuntimeError(f"{name}: input is on {input.device} but {what} is on "
                           f"{factor.device}. Fix: move {what} with .to('{input.device}')")
    shape, extra = tuple(input.shape), tuple(factor.shape)
    aligned = shape[len(shape) - len(extra):] if len(extra) <= len(shape) else None
    if aligned is None or any(f not in (1, s) for f, s in zip(extra, aligned)):
        raise RuntimeError(f"{name}: {what} of shape {extra} does not broadcast to the input's "
                           f"shape {shape}. Fix: give one factor per element, or per class "
                           "(the last dimension)")


@cast_point("binary_cross_entropy")
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         reduction: str = "mean", **options: Any) -> Tensor:
    """``-weight * (y log p + (1 - y) log(1 - p))`` with each log clamped at -100, then reduced.

    ``input`` holds probabilities in ``[0, 1]`` (a sigmoid's output); ``target`` the same
    shape, in ``[0, 1]`` too (soft labels are allowed).
    """
    _check_loss_options("binary_cross_entropy", reduction, options)
    _check_pair("binary_cross_entropy", input, target,
                "Using a target size ({target}) that is different to the input size ({input}) "
                "is deprecated. Please ensure they have the same size.")
    _check_factor("binary_cross_entropy", "weight", weight, input)
    if input.device.type == "cuda" and tg.is_autocast_enabled("cuda"):
        # float16 probabilities round to 0 and 1 long before their logits are large
        raise RuntimeError(UNSAFE_TO_AUTOCAST)
    if input.numel() and not _within_zero_and_one(input):
        raise RuntimeError("all elements of input should be between 0 and 1. Fix: pass "
                           "probabilities (apply .sigmoid() first), or use "
                           "binary_cross_entropy_with_logits on the raw scores")
    loss = BinaryCrossEntropy.apply(input, target)
    return _reduce(loss if weight is None else loss * weight, reduction)


# PyTorch's refusal under CUDA autocast (aten/src/ATen/autocast_mode.cpp), word for word
UNSAFE_TO_AUTOCAST = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast.")


def _within_zero_and_one(input: Tensor) -> bool:
    """Every element in ``[0, 1]`` (NaN is not)."""
    backend, x = input._backend, input._array  # a check outside any graph
    inside = backend.binary("mul", backend.binary("ge", x, 0), backend.binary("le", x, 1))
    return bool(backend.to_numpy(backend.reduce("min", inside, None, False)))


@cast_point("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     reduction: str = "mean", pos_weight: Tensor | None = None,
                                     **options: Any) -> Tensor:
    """Binary cross-entropy of ``sigmoid(input)``, computed from the logits ``input``:
    ``(1 - y) x - (1 + (pos_weight - 1) y) log_sigmoid(x)``, times ``weight``, then reduced."""
    _check_loss_options("binary_cross_entropy_with_logits", reduction, options)
    _check_pair("binary_cross_entropy_with_logits", input, target,
                "Target size ({target}) must be the same as input size ({input})")
    _check_factor("binary_cross_entropy_with_logits", "weight", weight, input)
    _check_factor("binary_cross_entropy_with_logits", "pos_weight", pos_weight, input)
    log_p = LogSigmoid.apply(input)
    if pos_weight is not None:
        log_p = log_p * ((pos_weight - 1) * target + 1)
    loss = (1 - target) * input - log_p
    return _reduce(loss if weight is None else loss * weight, reduction)


class _WeightedLoss(Module):
    """Holds and checks ``reduction``, and ``weight`` as a buffer (it moves with ``.to()`` and
    is saved in ``state_dict``), as PyTorch's ``_WeightedLoss``."""

    def __init__(self, weight: Tensor | None, reduction: str) -> None:
        super().__init__()
        _check_reduction(reduction)
        self.reduction = reduction
        self.register_buffer("weight", weight)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities (put a ``Sigmoid`` before it, or better, use
    :class:`BCEWithLogitsLoss` on the raw scores). See :func:`binary_cross_entropy`."""

    def __init__(self, weight: Tensor | None = None, reduction: str = "mean") -> None:
        super().__init__(weight, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    """A sigmoid and binary cross-entropy in one numerically stable step.
    See :func:`binary_cross_entropy_with_logits`."""

    def __init__(self, weight: Tensor | None = None, reduction: str = "mean",
                 pos_weight: Tensor | None = None) -> None:
        super().__init__(weight, reduction)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return binary_cross_entropy_with_logits(input, target, self.weight, self.reduction,
                                                self.pos_weight)

"""Normalisation layers: ``BatchNorm1d``, ``BatchNorm2d`` and ``LayerNorm``.

Both kinds subtract a mean and divide by a standard deviation, then scale and
shift with learned ``weight`` and ``bias``. They differ in *what* they average
over:

* batch norm: over the batch (and the positions), once per channel. In
  training it uses the batch's own statistics and keeps a running average of
  them for evaluation, where a batch may be a single sample;
* layer norm: over the last dimensions of each sample, the same in training
  and evaluation (so no running statistics).

Batch norm in evaluation is written with ordinary tensor operations (mean,
subtract, square, sqrt): autograd differentiates them. Batch norm in training is one
operation with its backward written out (:mod:`teachgrad.ops.batch_norm`), which
needs far fewer passes over the input; so is layer norm, in every transformer block
(:mod:`teachgrad.ops.normalization`).
"""
from __future__ import annotations

from typing import Any, Sequence

import teachgrad as tg
from teachgrad.autograd.cast_points import cast_point
from teachgrad.ops.batch_norm import BatchNormTraining, batch_statistics
from teachgrad.ops.normalization import LayerNorm as LayerNormFunction
from teachgrad.tensor import Tensor

from .arguments import check_like
from .module import Module
from .parameter import Parameter


def _check_channels(name: str, input: Tensor, tensors: dict[str, Tensor | None]) -> int:
    """``input``'s channel count (dimension 1), after checking every per-channel tensor has it."""
    if not isinstance(input, Tensor) or input.ndim < 2:
        shape = list(input.shape) if isinstance(input, Tensor) else type(input).__name__
        raise ValueError(f"{name}: expected an input of shape (N, C, ...), got {shape}")
    channels = input.shape[1]
    for what, t in tensors.items():
        if t is not None and tuple(t.shape) != (channels,):
            raise RuntimeError(
                f"{name}: {what} should contain {channels} elements (one per channel of the "
                f"input's dimension 1), not shape {tuple(t.shape)}. Fix: build the layer with "
                f"num_features={channels}."
            )
    check_like(name, input, tensors)
    return channels


def _check_numbers(name: str, **values: Any) -> None:
    for what, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise TypeError(f"{name}: {what} must be a non-negative number, got {value!r}")


def _check_batch(input: Tensor) -> None:
    """Training statistics need at least two values per channel (a variance of one is 0)."""
    if input.numel() // input.shape[1] <= 1:
        raise ValueError(
            f"Expected more than 1 value per channel when training, got input size "
            f"{list(input.shape)}. Fix: use a batch of 2 or more, or call model.eval() first."
        )


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dimension 1) of ``input``, as ``torch.nn.functional.batch_norm``.

    In training it uses the batch's statistics and, when running tensors are
    given, moves them in place towards the batch's: ``running = (1 - momentum) *
    running + momentum * batch`` (with the *unbiased* variance, as PyTorch). In
    evaluation it uses ``running_mean`` and ``running_var``.
    """
    channels = _check_channels("batch_norm", input, {
        "running_mean": running_mean, "running_var": running_var, "weight": weight, "bias": bias})
    _check_numbers("batch_norm", momentum=momentum, eps=eps)
    if not training and (running_mean is None or running_var is None):
        raise ValueError("batch_norm: running_mean and running_var must be given when "
                         "training=False. Fix: pass them, or training=True.")
    if training:
        _check_batch(input)
    per_channel = (1, channels) + (1,) * (input.ndim - 2)  # broadcasts against the input
    if training:
        with tg.no_grad():  # (BatchNormTraining's backward differentiates through these)
            mean, centered, var = batch_statistics(input)  # (var: biased, for normalising)
        if running_mean is not None and running_var is not None:
            count = input.numel() // channels
            with tg.no_grad():
                running_mean.mul_(1 - momentum).add_(mean.reshape(channels) * momentum)
                unbiased = var.reshape(channels) * (count / (count - 1))
                running_var.mul_(1 - momentum).add_(unbiased * momentum)
        # one operation with its backward written out: a few passes over the input,
        # where the formula below would take a dozen backward steps
        return BatchNormTraining.apply(input, centered, var, weight, bias, float(eps))
    mean, var = running_mean.reshape(per_channel), running_var.reshape(per_channel)
    out = (input - mean) / (var + eps).sqrt()
    if weight is not None:
        out = out * weight.reshape(per_channel)
    if bias is not None:
        out = out + bias.reshape(per_channel)
    return out


@cast_point("layer_norm")
def layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each sample over its last ``len(normalized_shape)`` dimensions, as
    ``torch.nn.functional.layer_norm``."""
    shape = _normalized_shape(normalized_shape)
    _check_numbers("layer_norm", eps=eps)
    first = input.ndim - len(shape) if isinstance(input, Tensor) else -1
    if first < 0 or input.shape[first:] != shape:  # (a Size is a tuple: compared as one)
        got = list(input.shape) if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape "
            f"[*, {', '.join(map(str, shape))}], but got input of size{got}. Fix: normalized_shape "
            "names the last dimensions of the input."
        )
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.shape != shape:
            raise RuntimeError(f"layer_norm: {what} must have shape {shape} (normalized_shape), "
                               f"got {tuple(t.shape)}")
    check_like("layer_norm", input, {"weight": weight, "bias": bias})
    axes = tuple(range(first, input.ndim))
    # one Function with its backward written out (ops/normalization.py): the same numbers
    # as mean, subtract, square, sqrt and divide, at a fraction of their backward's passes
    return LayerNormFunction.apply(input, weight, bias, axes, float(eps))


def _normalized_shape(normalized_shape: Any) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape):
        raise TypeError(f"normalized_shape must be a positive int or a non-empty sequence of "
                        f"positive ints, got {normalized_shape!r}")
    return shape


class _BatchNorm(Module):
    """What ``BatchNorm1d`` and ``BatchNorm2d`` share; they differ only in the input they accept."""

    #: the input dimensions the layer accepts, and how to say so
    accepted_dims: tuple[int, ...] = ()
    accepted_text = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if not isinstance(num_features, int) or isinstance(num_features, bool) or num_features < 1:
            raise ValueError(f"num_features must be a positive int, got {num_features!r}")
        if momentum is not None and not 0.0 <= momentum <= 1.0:
            raise ValueError(f"momentum must be in [0, 1] (or None for a cumulative average), "
                             f"got {momentum!r}")
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(tg.ones(num_features, device=device, dtype=dtype))
            self.bias = Parameter(tg.zeros(num_features, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", tg.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", tg.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tg.tensor(0, dtype=tg.int64, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1.0)
            self.num_batches_tracked.zero_()

    def forward(self, input: Tensor) -> Tensor:
        if not isinstance(input, Tensor) or input.ndim not in self.accepted_dims:
            got = f"{input.ndim}D input" if isinstance(input, Tensor) else type(input).__name__
            raise ValueError(f"expected {self.accepted_text} input (got {got})")
        _check_channels(type(self).__name__, input, {
            "running_mean": self.running_mean, "running_var": self.running_var,
            "weight": self.weight, "bias": self.bias})
        # batch statistics in training, and whenever there are no running ones to use
        use_batch = self.training or not self.track_running_stats
        if use_batch:
            _check_batch(input)  # before the counter below moves
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a plain average of every batch so far
                factor = 1.0 / self.num_batches_tracked.item()
        return batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                          use_batch, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch norm over ``(N, C)`` or ``(N, C, L)`` inputs: one mean and variance per channel."""

    accepted_dims, accepted_text = (2, 3), "2D or 3D"


class BatchNorm2d(_BatchNorm):
    """Batch norm over ``(N, C, H, W)`` images: one mean and variance per channel."""

    accepted_dims, accepted_text = (4,), "4D"


class LayerNorm(Module):
    """Normalise each sample over its last dimensions (``normalized_shape``), see :func:`layer_norm`."""

    def __init__(self, normalized_shape: Any, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = _normalized_shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(tg.ones(self.normalized_shape, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(tg.zeros(self.normalized_shape, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")

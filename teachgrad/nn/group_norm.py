"""Group normalisation: ``GroupNorm`` and ``F.group_norm``.

Batch norm averages each channel over the batch, so it needs a batch; layer norm
averages each sample over all its channels. Group norm sits between: it splits a
sample's ``C`` channels into ``num_groups`` groups and normalises each group (its
channels and positions) on its own, the same in training and evaluation and for a
batch of one. ``num_groups=1`` is layer norm over ``(C, ...)``; ``num_groups=C`` is
instance norm. Then, as the other norms, a learned ``weight`` and ``bias`` per channel.

Written with ordinary tensor operations (reshape, mean, sqrt): autograd
differentiates them, no backward of its own is needed.
"""
from __future__ import annotations

from typing import Any

import teachgrad as tg
from teachgrad.tensor import Tensor

from .arguments import check_like
from .module import Module
from .norm import _check_numbers
from .parameter import Parameter


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each group of ``num_groups`` channels of each sample, as ``F.group_norm``."""
    if not isinstance(input, Tensor):
        raise TypeError(f"group_norm(): argument 'input' (position 1) must be Tensor, "
                        f"not {type(input).__name__}")
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.ndim}. Fix: group_norm takes (N, C, ...)")
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
        raise ValueError(f"group_norm: num_groups must be a positive int, got {num_groups!r}")
    channels = input.shape[1]
    if channels % num_groups != 0:
        raise RuntimeError(
            f"Expected number of channels in input to be divisible by num_groups, but got input "
            f"of shape {list(input.shape)} and num_groups={num_groups}")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.shape[0] != channels):
            raise RuntimeError(
                f"Expected {what} to be a vector of size equal to the number of channels in "
                f"input, but got {what} of shape {list(t.shape)} and input of shape "
                f"{list(input.shape)}. Fix: build the layer with num_channels={channels}")
    _check_numbers("group_norm", eps=eps)
    check_like("group_norm", input, {"weight": weight, "bias": bias})
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"group_norm" not implemented for {input.dtype}. '
                                  "Fix: input.float()")
    n = input.shape[0]
    groups = input.reshape(n, num_groups, -1)  # each row: one group's channels and positions
    mean = groups.mean(dim=2, keepdim=True)
    var = ((groups - mean) ** 2).mean(dim=2, keepdim=True)  # biased, as PyTorch normalises
    out = ((groups - mean) / (var + eps).sqrt()).reshape(*input.shape)
    per_channel = (1, channels) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(per_channel)
    if bias is not None:
        out = out + bias.reshape(per_channel)
    return out


class GroupNorm(Module):
    """Normalise groups of channels within each sample (see :func:`group_norm`).

    ``weight`` starts at ones and ``bias`` at zeros (with ``affine=True``; ``bias=False``
    keeps the weight only), as in PyTorch.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device: Any = None, dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        for what, value in (("num_groups", num_groups), ("num_channels", num_channels)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GroupNorm: {what} must be a positive int, got {value!r}")
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        _check_numbers("GroupNorm", eps=eps)
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(tg.ones(num_channels, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(tg.zeros(num_channels, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        """Ones and zeros again."""
        if self.weight is not None:
            with tg.no_grad():
                self.weight.fill_(1.0)
                if self.bias is not None:
                    self.bias.zero_()

    def forward(self, input: Tensor) -> Tensor:
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")

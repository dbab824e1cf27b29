"""Convolution and pooling over images: ``Conv2d``, ``MaxPool2d``, ``AvgPool2d``.

All three read the image's sliding windows (:mod:`teachgrad.ops.conv`):

* a convolution copies every window out as a column (``im2col``, through
  strided views) and is then one matrix product of the filters with the columns
  (plus the bias, in one operation), the backend's matmul (on ``cuda``, the same
  tiled kernel the GPU chapter builds);
* average-pooling is the mean of each column; max-pooling needs no columns: it
  is the elementwise maximum of the ``kh * kw`` strided slices that hold one
  element of every window.

Images are ``(N, C, H, W)`` (or ``(C, H, W)`` for one image), as in PyTorch.
"""
from __future__ import annotations

import math
from typing import Any

import teachgrad as tg
from teachgrad.autograd.cast_points import cast_point
from teachgrad.ops.conv import FiltersTimesColumns, Im2Col, output_size
from teachgrad.ops.conv import MaxPool2d as MaxPool2dFunction
from teachgrad.tensor import Tensor

from . import init
from .arguments import Pair, check_conv_layer, check_like, pair
from .module import Module

NO_INDICES = ("max_pool2d: teachgrad does not support return_indices=True (there is no "
              "max_unpool2d to use them).")
AVG_DEFAULTS_ONLY = ("avg_pool2d: teachgrad supports only count_include_pad=True and "
                     "divisor_override=None (the defaults).")


def _batched(name: str, input: Tensor) -> tuple[Tensor, bool]:
    """``input`` as ``(N, C, H, W)``, and whether it was one unbatched ``(C, H, W)`` image."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
    if input.ndim not in (3, 4):
        raise RuntimeError(
            f"{name}: expected 3D (unbatched) or 4D (batched) input, but got input of size: "
            f"{list(input.shape)}. Fix: images are (N, C, H, W); add a channel dimension with "
            ".unsqueeze(1) if yours are (N, H, W)."
        )
    return (input.unsqueeze(0), True) if input.ndim == 3 else (input, False)


def _windows(name: str, image: Tensor, kernel: Pair, stride: Pair, dilation: Pair,
             padding: tuple[Pair, Pair], pad_value: float, function: Any = Im2Col) -> tuple[Tensor, Pair]:
    """``function`` (default: the ``(N, C, kh*kw, L)`` columns) of ``image``'s windows, and
    the output size ``(out_h, out_w)``, after checking that a window fits."""
    out = tuple(output_size(size, k, s, d, before, after) for size, k, s, d, (before, after)
                in zip(image.shape[2:], kernel, stride, dilation, padding))
    if min(out) < 1:
        raise RuntimeError(
            f"{name}: calculated output size {list(out)} is too small: the input's spatial size "
            f"{list(image.shape[2:])} (plus padding {[sum(p) for p in padding]}) is smaller than "
            f"the kernel {list(kernel)} with dilation {list(dilation)}. Fix: use a smaller "
            "kernel, more padding, or a larger input."
        )
    return function.apply(image, kernel, stride, dilation, padding, pad_value), out


def _conv_padding(padding: Any, kernel: Pair, stride: Pair, dilation: Pair) -> tuple[Pair, Pair]:
    """``padding`` (int, pair, 'valid' or 'same') as ``((top, bottom), (left, right))``."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0), (0, 0))
        if padding != "same":
            raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
        if stride != (1, 1):
            raise ValueError("padding='same' is not supported for strided convolutions. "
                             "Fix: use stride=1, or give the padding as numbers.")
        # PyTorch puts the odd extra cell of padding after (bottom, right)
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple((t // 2, t - t // 2) for t in totals)  # type: ignore[return-value]
    top, left = pair(padding, "padding", 0)
    return ((top, top), (left, left))


@cast_point("conv2d")
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-D cross-correlation (what deep learning calls convolution), as ``torch.nn.functional.conv2d``.

    ``weight`` is ``(out_channels, in_channels / groups, kh, kw)``. Computed as
    im2col then one batched matrix product: ``weight`` flattened to
    ``(out, in * kh * kw)`` times each image's columns, the bias added in the same
    operation (:class:`teachgrad.ops.conv.FiltersTimesColumns`); with groups, a
    ``tg.matmul`` of ``(groups, out / groups, in / groups * kh * kw)`` filters. On
    ``cuda`` the product runs the GPU chapter's tiled matmul kernel.
    """
    image, unbatched = _batched("conv2d", input)
    if not isinstance(weight, Tensor) or weight.ndim != 4:
        got = list(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__
        raise RuntimeError(f"conv2d: weight must be a 4-D tensor (out_channels, in_channels / groups, "
                           f"kh, kw), got {got}")
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"conv2d: groups must be a positive integer, got {groups!r}")
    out_channels, group_in, kh, kw = weight.shape
    n, channels = image.shape[:2]
    if channels != group_in * groups or out_channels % groups != 0:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
            f"{list(image.shape)} to have {group_in * groups} channels, but got {channels} "
            f"channels instead (and out_channels {out_channels} must be divisible by groups). "
            "Fix: make the layer's in_channels match the input's dimension 1."
        )
    if bias is not None and tuple(bias.shape) != (out_channels,):
        raise RuntimeError(f"conv2d: bias must have shape ({out_channels},) (one per output "
                           f"channel), got {tuple(bias.shape)}")
    check_like("conv2d", image, {"weight": weight, "bias": bias})
    stride_, dilation_ = pair(stride, "stride", 1), pair(dilation, "dilation", 1)
    pads = _conv_padding(padding, (kh, kw), stride_, dilation_)
    columns, (out_h, out_w) = _windows("conv2d", image, (kh, kw), stride_, dilation_, pads, 0.0)
    # Each image's columns are a (C*kh*kw, L) matrix; per group, the filters flattened
    # to (out/groups, C/groups*kh*kw) multiply it. A batched matmul over the images gives
    # (N, out_channels, L) directly: the output's own memory order, so nothing is copied
    # on the way in or out (as PyTorch, which also runs one product per image).
    rows, positions = group_in * kh * kw, out_h * out_w
    if groups == 1:  # the product and the bias as one operation (the bias added in place)
        out = FiltersTimesColumns.apply(weight.reshape(out_channels, rows),
                                        columns.reshape(n, rows, positions), bias)
        out = out.reshape(n, out_channels, out_h, out_w)
    else:
        filters = weight.reshape(groups, out_channels // groups, rows)
        out = tg.matmul(filters, columns.reshape(n, groups, rows, positions))
        out = out.reshape(n, out_channels, out_h, out_w)
        if bias is not None:
            out = out + bias.reshape(1, out_channels, 1, 1)
    return out.squeeze(0) if unbatched else out


def _pool_args(name: str, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
               ceil_mode: bool) -> tuple[Pair, Pair, Pair, Pair]:
    kernel = pair(kernel_size, "kernel_size", 1)
    stride_ = kernel if stride is None or stride == () else pair(stride, "stride", 1)
    padding_, dilation_ = pair(padding, "padding", 0), pair(dilation, "dilation", 1)
    if ceil_mode:
        raise NotImplementedError(f"{name}: teachgrad does not support ceil_mode=True. "
                                  "Fix: pad the input so the windows fit, and use ceil_mode=False.")
    for p, k, d in zip(padding_, kernel, dilation_):
        if p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(f"{name}: pad should be at most half of effective kernel size, but "
                               f"got pad={p}, kernel_size={k} and dilation={d}")
    return kernel, stride_, padding_, dilation_


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """The largest value in each window (padding counts as -inf), as ``F.max_pool2d``.

    The gradient goes to the first largest element of each window, as in PyTorch.
    """
    if return_indices:
        raise NotImplementedError(NO_INDICES)
    image, unbatched = _batched("max_pool2d", input)
    kernel, stride_, pad, dilation_ = _pool_args("max_pool2d", kernel_size, stride, padding,
                                                 dilation, ceil_mode)
    lowest = -math.inf if image.dtype.is_floating_point else int(-(2**63))
    pooled, _ = _windows("max_pool2d", image, kernel, stride_, dilation_,
                         tuple((p, p) for p in pad), lowest, MaxPool2dFunction)
    return pooled.squeeze(0) if unbatched else pooled


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """The mean of each window (zero padding counted), as ``F.avg_pool2d``."""
    if not count_include_pad or divisor_override is not None:
        raise NotImplementedError(AVG_DEFAULTS_ONLY)
    image, unbatched = _batched("avg_pool2d", input)
    kernel, stride_, pad, dilation_ = _pool_args("avg_pool2d", kernel_size, stride, padding, 1,
                                                 ceil_mode)
    columns, out = _windows("avg_pool2d", image, kernel, stride_, dilation_,
                            tuple((p, p) for p in pad), 0.0)
    pooled = columns.mean(dim=2).reshape(*image.shape[:2], *out)
    return pooled.squeeze(0) if unbatched else pooled


class Conv2d(Module):
    """A bank of ``out_channels`` learned filters slid over the image (see :func:`conv2d`).

    Initialised as in PyTorch: weight and bias uniform on ``±1/sqrt(fan_in)``
    with ``fan_in = in_channels / groups * kh * kw``.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_conv_layer("Conv2d", in_channels, out_channels, groups, padding_mode)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = pair(kernel_size, "kernel_size", 1)
        self.stride, self.dilation = pair(stride, "stride", 1), pair(dilation, "dilation", 1)
        _conv_padding(padding, self.kernel_size, self.stride, self.dilation)  # checked now
        self.padding = padding if isinstance(padding, str) else pair(padding, "padding", 0)
        self.padding_mode = padding_mode
        shape = (out_channels, in_channels // groups, *self.kernel_size)
        init.add_weight_and_bias(self, shape, bias, device, dtype)

    def reset_parameters(self) -> None:
        """PyTorch's default scheme (the same as :class:`Linear`'s, with the kernel in fan_in)."""
        init.default_weight_and_bias_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                      self.groups)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding not in ((0, 0), "valid"):
            text += f", padding={self.padding}"
        if self.dilation != (1, 1):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        return text + (", bias=False" if self.bias is None else "")


class MaxPool2d(Module):
    """Keep the largest value of each ``kernel_size`` window (see :func:`max_pool2d`)."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        _pool_args("MaxPool2d", kernel_size, stride, padding, dilation, ceil_mode)
        if return_indices:
            raise NotImplementedError(NO_INDICES)
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """Average each ``kernel_size`` window (see :func:`avg_pool2d`)."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        _pool_args("AvgPool2d", kernel_size, stride, padding, 1, ceil_mode)
        if not count_include_pad or divisor_override is not None:
            raise NotImplementedError(AVG_DEFAULTS_ONLY)
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return avg_pool2d(input, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

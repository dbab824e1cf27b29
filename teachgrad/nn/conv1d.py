"""``Conv1d`` and ``F.conv1d``: convolution along one axis (sequences, audio, time series).

A 1-D convolution of ``(N, C, L)`` signals is a 2-D convolution of ``(N, C, 1, L)``
images with ``(out, C / groups, 1, k)`` filters: one row of pixels, windows one row high.
So this file only checks the arguments (with PyTorch's messages for ``conv1d``), adds the
unit height, calls :func:`teachgrad.nn.conv.conv2d` (im2col + matmul, on every device)
and removes the height again. The gradients come from the 2-D convolution's.
"""
from __future__ import annotations

from typing import Any

from teachgrad.autograd.cast_points import cast_point
from teachgrad.tensor import Tensor

from . import init
from .arguments import check_conv_layer, check_like
from .conv import conv2d
from .module import Module

PADDING_STRINGS = ("valid", "same")
SAME_STRIDED = "padding='same' is not supported for strided convolutions"


def single(value: Any, name: str, minimum: int) -> int:
    """``3`` or ``(3,)`` as a checked int, at least ``minimum``."""
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(values) != 1 or not isinstance(values[0], int) or isinstance(values[0], bool):
        raise TypeError(f"{name} must be an int or a tuple of one int, got {value!r}")
    if values[0] < minimum:
        kind = "positive" if minimum == 1 else "non-negative"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return values[0]


def _check_padding(padding: Any, stride: int, error: type) -> Any:
    """``'valid'``, ``'same'`` (stride 1 only) or a checked int, in ``error``'s class."""
    if isinstance(padding, str):
        if padding not in PADDING_STRINGS:
            raise error(f"Invalid padding string: {padding!r}. Fix: use 'valid', 'same' or a number")
        if padding == "same" and stride != 1:
            raise error(f"{SAME_STRIDED}. Fix: use stride=1, or give the padding as a number")
        return padding
    return single(padding, "padding", 0)


def _check_shapes(signal: Tensor, weight: Any, bias: Any, groups: int, padding: Any,
                  dilation: int) -> None:
    """PyTorch's checks of ``conv1d``'s tensors, with its messages (shapes in 1-D terms)."""
    if not isinstance(weight, Tensor) or weight.ndim != 3:
        dims = weight.ndim if isinstance(weight, Tensor) else type(weight).__name__
        shape = list(weight.shape) if isinstance(weight, Tensor) else weight
        raise RuntimeError(f"Expected {dims}-dimensional input for {dims}-dimensional weight "
                           f"{shape}, but got {signal.ndim}-dimensional input of size "
                           f"{list(signal.shape)} instead. Fix: conv1d's weight is "
                           "(out_channels, in_channels / groups, kernel_size)")
    out_channels, group_in, _ = weight.shape
    if signal.shape[-2] != group_in * groups or out_channels % groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected "
                           f"input{list(signal.shape)} to have {group_in * groups} channels, but "
                           f"got {signal.shape[-2]} channels instead")
    if bias is not None and (not isinstance(bias, Tensor) or tuple(bias.shape) != (out_channels,)):
        got = list(bias.shape) if isinstance(bias, Tensor) else type(bias).__name__
        raise RuntimeError(f"Given weight of size {list(weight.shape)}, expected bias to be "
                           f"1-dimensional with {out_channels} elements, but got bias of size "
                           f"{got} instead")
    reach = dilation * (weight.shape[-1] - 1) + 1  # the extent of one dilated window
    added = {"valid": 0, "same": reach - 1}  # ('same' pads exactly enough)
    padded = signal.shape[-1] + (added[padding] if isinstance(padding, str) else 2 * padding)
    if padded < reach:
        raise RuntimeError(f"Calculated padded input size per channel: ({padded}). "
                           f"Kernel size: ({reach}). Kernel size can't be greater than actual "
                           "input size")


@cast_point("conv1d")
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D cross-correlation of ``(N, C, L)`` (or ``(C, L)``) with ``(out, C / groups, k)``
    filters, as ``torch.nn.functional.conv1d``: a :func:`conv2d` one pixel high."""
    if not isinstance(input, Tensor):
        raise TypeError(f"conv1d(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to conv1d, but got "
                           f"input of size: {list(input.shape)}")
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise RuntimeError(f"non-positive groups is not supported (got {groups!r})")
    stride_, dilation_ = single(stride, "stride", 1), single(dilation, "dilation", 1)
    padding_ = _check_padding(padding, stride_, RuntimeError)
    _check_shapes(input, weight, bias, groups, padding_, dilation_)
    check_like("conv1d", input, {"weight": weight, "bias": bias})
    padding_2d = padding_ if isinstance(padding_, str) else (0, padding_)
    out = conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, (1, stride_), padding_2d,
                 (1, dilation_), groups)
    return out.squeeze(-2)


class Conv1d(Module):
    """``out_channels`` learned filters slid along a sequence (see :func:`conv1d`).

    Initialised as in PyTorch: weight and bias uniform on ``±1/sqrt(fan_in)`` with
    ``fan_in = in_channels / groups * kernel_size``.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_conv_layer("Conv1d", in_channels, out_channels, groups, padding_mode)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = (single(kernel_size, "kernel_size", 1),)
        self.stride = (single(stride, "stride", 1),)
        self.dilation = (single(dilation, "dilation", 1),)
        padding_ = _check_padding(padding, self.stride[0], ValueError)
        self.padding = padding_ if isinstance(padding_, str) else (padding_,)
        self.padding_mode = padding_mode
        shape = (out_channels, in_channels // groups, self.kernel_size[0])
        init.add_weight_and_bias(self, shape, bias, device, dtype)

    def reset_parameters(self) -> None:
        """PyTorch's default scheme (the same as :class:`Linear`'s, with the kernel in fan_in)."""
        init.default_weight_and_bias_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        padding = self.padding if isinstance(self.padding, str) else self.padding[0]
        return conv1d(input, self.weight, self.bias, self.stride[0], padding, self.dilation[0],
                      self.groups)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,):  # (PyTorch shows 'valid' and 'same' too, unquoted)
            text += f", padding={self.padding}"
        if self.dilation != (1,):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        return text + (", bias=False" if self.bias is None else "")

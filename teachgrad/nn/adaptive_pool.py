"""Adaptive pooling: ``AdaptiveAvgPool2d`` and ``AdaptiveMaxPool2d``, and their functions.

Ordinary pooling fixes the window and lets the output size follow; adaptive pooling
fixes the output size (``output_size=(1, 1)``: one number per channel, whatever the
image's size) and works out the windows. Output row ``i`` of ``out`` rows over ``size``
input rows pools rows ``start = floor(i * size / out)`` up to ``end = ceil((i + 1) *
size / out)`` (exclusive), PyTorch's formula: the windows cover every row, and
neighbours overlap by a row where ``out`` does not divide ``size``.

* The average over a window of rows and columns is the average of the rows' averages
  of the columns: a matrix ``P`` (``out x size``, ``1/len`` on each window) per
  direction, and ``P_rows @ image @ P_cols.T`` is the whole pooling, two matrix products
  autograd differentiates as any other.
* The maximum needs the windows themselves: each output cell's window is read out with
  one integer index (windows shorter than the longest repeat their last element, which
  cannot change a maximum), then ``max`` over it. Its gradient goes to the one element
  that won (the first, on ties), as in PyTorch.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import teachgrad as tg
from teachgrad.tensor import Tensor

from .module import Module

OutputSize = Any  # an int, None, or a pair of ints and Nones


def window_bounds(size: int, out: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each of the ``out`` windows over ``size`` positions (PyTorch's formula)."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def _output_pair(name: str, output_size: OutputSize, image_size: tuple[int, int]) -> tuple[int, int]:
    """``output_size`` as two ints (``None`` keeps the input's size in that direction)."""
    if isinstance(output_size, (list, tuple)):
        sizes = tuple(output_size)
        if len(sizes) != 2:
            raise RuntimeError(f"{name}: output_size must be 2 (one size per spatial dimension), "
                               f"got {output_size!r}")
    elif output_size is None or (isinstance(output_size, int) and not isinstance(output_size, bool)):
        if output_size is None:
            raise TypeError(f"{name}: output_size must be an int or a pair, got None (None may "
                            "stand for one of the pair's sizes, e.g. (None, 7))")
        sizes = (output_size, output_size)
    else:
        raise TypeError(f"{name}: output_size must be an int or a pair of ints (or None), got "
                        f"{output_size!r}")
    for s in sizes:
        if s is not None and (isinstance(s, bool) or not isinstance(s, int)):
            raise TypeError(f"{name}: output_size must hold ints or None, got {output_size!r}")
    chosen = tuple(given if s is None else s for s, given in zip(sizes, image_size))
    if min(chosen) < 0:
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal to 0 "
                           f"but received {{{chosen[0]}, {chosen[1]}}}")
    return chosen  # type: ignore[return-value]


def _image(name: str, input: Any) -> tuple[Tensor, bool]:
    """``input`` as ``(N, C, H, W)`` and whether it was one ``(C, H, W)`` image, after the checks."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, "
                        f"not {type(input).__name__}")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{name}(): Expected 3D or 4D tensor, but got {list(input.shape)}. "
                           "Fix: images are (N, C, H, W) or (C, H, W)")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"{name}" not implemented for {input.dtype}: it pools '
                                  "floating-point tensors only. Fix: input.float()")
    for dim in range(input.ndim - 2, input.ndim):
        if input.shape[dim] == 0:
            raise RuntimeError(
                f"{name}(): Expected input to have non-zero size for non-batch dimensions, but "
                f"input has sizes {list(input.shape)} with dimension {dim} being empty")
    return (input.unsqueeze(0), True) if input.ndim == 3 else (input, False)


def _averaging_matrix(size: int, out: int, like: Tensor) -> Tensor:
    """``(out, size)``: row ``i`` holds ``1/len`` on window ``i``, zeros elsewhere."""
    matrix = np.zeros((out, size))
    for i, (start, end) in enumerate(window_bounds(size, out)):
        matrix[i, start:end] = 1.0 / (end - start)
    return tg.tensor(matrix, dtype=like.dtype, device=like.device)


def adaptive_avg_pool2d(input: Tensor, output_size: OutputSize) -> Tensor:
    """The mean of each adaptive window (see the module's text), as ``F.adaptive_avg_pool2d``."""
    image, unbatched = _image("adaptive_avg_pool2d", input)
    height, width = image.shape[2:]
    out_h, out_w = _output_pair("adaptive_avg_pool2d", output_size, (height, width))
    rows = _averaging_matrix(height, out_h, image)  # (out_h, H)
    cols = _averaging_matrix(width, out_w, image)  # (out_w, W)
    pooled = rows @ image @ cols.T  # (N, C, out_h, out_w)
    return pooled.squeeze(0) if unbatched else pooled


def _window_table(size: tuple[int, int], out: tuple[int, int]) -> np.ndarray:
    """``(out_h, out_w, kh * kw)``: the flat positions ``h * W + w`` of each output cell's
    window in row-major order, short windows padded with their last position."""
    row_windows = window_bounds(size[0], out[0])
    col_windows = window_bounds(size[1], out[1])
    kh = max((end - start for start, end in row_windows), default=0)
    kw = max((end - start for start, end in col_windows), default=0)
    rows = np.array([[min(start + k, end - 1) for k in range(kh)] for start, end in row_windows],
                    dtype=np.int64).reshape(out[0], kh)
    cols = np.array([[min(start + k, end - 1) for k in range(kw)] for start, end in col_windows],
                    dtype=np.int64).reshape(out[1], kw)
    flat = rows[:, None, :, None] * size[1] + cols[None, :, None, :]  # (out_h, out_w, kh, kw)
    return flat.reshape(out[0], out[1], kh * kw)


def adaptive_max_pool2d(input: Tensor, output_size: OutputSize,
                        return_indices: bool = False) -> Any:
    """The largest value of each adaptive window, as ``F.adaptive_max_pool2d``; with
    ``return_indices=True`` also where it is, as a flat position ``h * W + w`` in its plane."""
    if not isinstance(return_indices, bool):
        raise TypeError(f"adaptive_max_pool2d: return_indices must be a bool, got {return_indices!r}")
    image, unbatched = _image("adaptive_max_pool2d", input)
    n, channels, height, width = image.shape
    out_h, out_w = _output_pair("adaptive_max_pool2d", output_size, (height, width))
    if out_h == 0 or out_w == 0:  # no windows at all: an empty result of the right shape
        pooled = image.reshape(n, channels, -1)[:, :, :0].reshape(n, channels, out_h, out_w)
        indices = tg.zeros((n, channels, out_h, out_w), dtype=tg.int64, device=image.device)
    else:
        table = _window_table((height, width), (out_h, out_w))
        windows = image.reshape(n, channels, height * width)[:, :, tg.tensor(table, device=image.device)]
        pooled, winner = windows.max(dim=-1)  # winner: which element of the window
        if return_indices:
            positions = tg.tensor(table, device=image.device)
            row = tg.arange(out_h, device=image.device).reshape(out_h, 1)
            col = tg.arange(out_w, device=image.device).reshape(1, out_w)
            indices = positions[row, col, winner]
    if unbatched:
        pooled = pooled.squeeze(0)
        indices = indices.squeeze(0) if return_indices else None
    return (pooled, indices) if return_indices else pooled


class AdaptiveAvgPool2d(Module):
    """Average over windows chosen to give ``output_size`` (see :func:`adaptive_avg_pool2d`)."""

    def __init__(self, output_size: OutputSize) -> None:
        super().__init__()
        _output_pair("AdaptiveAvgPool2d", output_size, (1, 1))  # checked now
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(Module):
    """Maximum over windows chosen to give ``output_size`` (see :func:`adaptive_max_pool2d`)."""

    def __init__(self, output_size: OutputSize, return_indices: bool = False) -> None:
        super().__init__()
        _output_pair("AdaptiveMaxPool2d", output_size, (1, 1))
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Tensor) -> Any:
        return adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"

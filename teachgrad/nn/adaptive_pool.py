"""Adaptive pooling: ``AdaptiveAvgPool2d`` and ``AdaptiveMaxPool2d``, and their functions.

Ordinary pooling fixes the window and lets the output size follow; adaptive pooling
fixes the output size (``output_size=(1, 1)``: one number per channel, whatever the
image's size) and works out the windows. Output row ``i`` of ``out`` rows over ``size``
input rows pools rows ``start = floor(i * size / out)`` up to ``end = ceil((i + 1) *
size / out)`` (exclusive), PyTorch's formula: the windows cover every row, and
neighbours overlap by a row where ``out`` does not divide ``size``.

Both read every output cell's window out of the image with one integer index (a table
of positions, worked out once on the host), the shorter windows padded to the longest
with a filler that cannot change the result: 0 for the average (a sum, divided by the
window's own size), -inf for the maximum. Autograd differentiates the indexing (its
backward adds each gradient back where the value came from, overlaps included), the
sum and ``max``, whose gradient goes to the one element that won (the first, on ties),
as in PyTorch.
"""
from __future__ import annotations

import math
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


def _window_table(size: tuple[int, int], out: tuple[int, int]) -> np.ndarray:
    """``(out_h, out_w, kh * kw)``: the flat positions ``h * W + w`` of each output cell's
    window in row-major order; a window smaller than the largest is padded with the
    position ``H * W``, one past the image (where :func:`_windows` puts a filler)."""
    row_windows = window_bounds(size[0], out[0])
    col_windows = window_bounds(size[1], out[1])
    kh = max(end - start for start, end in row_windows)
    kw = max(end - start for start, end in col_windows)
    past_the_end = size[0] * size[1]
    table = np.full((out[0], out[1], kh, kw), past_the_end, dtype=np.int64)
    for i, (top, bottom) in enumerate(row_windows):
        for j, (left, right) in enumerate(col_windows):
            rows = np.arange(top, bottom)[:, None]
            table[i, j, :bottom - top, :right - left] = rows * size[1] + np.arange(left, right)
    return table.reshape(out[0], out[1], kh * kw)


def _windows(image: Tensor, out: tuple[int, int], filler: float) -> tuple[Tensor, np.ndarray]:
    """Every output cell's window read out of ``image``: ``(N, C, out_h, out_w, kh * kw)``,
    the padding places holding ``filler`` (0 for a sum, -inf for a maximum); and the table."""
    n, channels, height, width = image.shape
    table = _window_table((height, width), out)
    pad = tg.full((n, channels, 1), filler, dtype=image.dtype, device=image.device)
    flat = tg.cat([image.reshape(n, channels, height * width), pad], dim=2)
    return flat[:, :, tg.tensor(table, device=image.device)], table


def _empty_output(image: Tensor, out: tuple[int, int]) -> Tensor:
    """A pooling with no output cell (``output_size`` 0): still a result of ``image``'s graph."""
    n, channels = image.shape[:2]
    return image.reshape(n, channels, -1)[:, :, :0].reshape(n, channels, *out)


def adaptive_avg_pool2d(input: Tensor, output_size: OutputSize) -> Tensor:
    """The mean of each adaptive window (see the module's text), as ``F.adaptive_avg_pool2d``."""
    image, unbatched = _image("adaptive_avg_pool2d", input)
    height, width = image.shape[2:]
    out = _output_pair("adaptive_avg_pool2d", output_size, (height, width))
    if min(out) == 0:
        pooled = _empty_output(image, out)
    else:
        windows, table = _windows(image, out, 0.0)
        areas = (table < height * width).sum(axis=2)  # how many real positions per window
        pooled = windows.sum(dim=-1) / tg.tensor(areas, dtype=image.dtype, device=image.device)
    return pooled.squeeze(0) if unbatched else pooled


def adaptive_max_pool2d(input: Tensor, output_size: OutputSize,
                        return_indices: bool = False) -> Any:
    """The largest value of each adaptive window, as ``F.adaptive_max_pool2d``; with
    ``return_indices=True`` also where it is, as a flat position ``h * W + w`` in its plane."""
    if not isinstance(return_indices, bool):
        raise TypeError(f"adaptive_max_pool2d: return_indices must be a bool, got {return_indices!r}")
    image, unbatched = _image("adaptive_max_pool2d", input)
    out = _output_pair("adaptive_max_pool2d", output_size, tuple(image.shape[2:]))
    if min(out) == 0:  # no windows at all: empty results of the right shape
        pooled = _empty_output(image, out)
        indices = tg.zeros(tuple(pooled.shape), dtype=tg.int64, device=image.device)
    else:
        windows, table = _windows(image, out, -math.inf)
        pooled, winner = windows.max(dim=-1)  # winner: the place in the window (the first, on ties)
        if return_indices:  # that place's position in the image, looked up in the table
            positions = tg.tensor(table, device=image.device)
            row = tg.arange(out[0], device=image.device).reshape(out[0], 1)
            col = tg.arange(out[1], device=image.device).reshape(1, out[1])
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

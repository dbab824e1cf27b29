"""``im2col``: cut every sliding window of an image out into a column.

A 2-D convolution slides a ``kh x kw`` window over the (padded) image. If
every window is copied out as one column, the convolution of all windows with
all filters is a single matrix product ``weight (O, C*kh*kw) @ columns
(C*kh*kw, L)``, with ``L`` the number of window positions: the matmul the GPU
chapter builds does the real work. Max-pooling reads the same columns and
takes their maximum.

The copy is one gather with a precomputed table of flat positions (which
padded pixel lands in which row and column), so it runs unchanged on every
backend. Its backward ("col2im") adds each column's gradient back to the
pixel it came from: a pixel that sits in several windows collects the
gradient of each.
"""
from __future__ import annotations

import numpy as np

from ..autograd.function import Context, Function
from ..tensor import Tensor

Pair = tuple[int, int]


def output_size(size: int, kernel: int, stride: int, dilation: int, pad_before: int,
                pad_after: int) -> int:
    """How many window positions fit along one axis (PyTorch's formula, floor mode)."""
    span = dilation * (kernel - 1) + 1  # the extent of one dilated window
    return (size + pad_before + pad_after - span) // stride + 1


def window_positions(padded: Pair, kernel: Pair, stride: Pair, dilation: Pair,
                     out: Pair) -> np.ndarray:
    """The flat position in the padded ``(Hp, Wp)`` image of window element ``k`` at
    output position ``l``: an int64 table of shape ``(kh * kw, out_h * out_w)``."""
    (kh, kw), (oh, ow), width = kernel, out, padded[1]
    # row of each window element inside the window, and of each window's top-left corner
    element_row = np.repeat(np.arange(kh) * dilation[0], kw)
    element_col = np.tile(np.arange(kw) * dilation[1], kh)
    corner_row = np.repeat(np.arange(oh) * stride[0], ow)
    corner_col = np.tile(np.arange(ow) * stride[1], oh)
    rows = element_row[:, None] + corner_row[None, :]
    cols = element_col[:, None] + corner_col[None, :]
    return (rows * width + cols).astype(np.int64)


class Im2Col(Function):
    """``(N, C, H, W)`` image to ``(N, C, kh*kw, L)`` columns of its sliding windows.

    ``padding`` is ``((top, bottom), (left, right))``; padded cells hold
    ``pad_value`` (0 for a convolution, -inf for max-pooling).
    """

    rule = ("columns[n, c, k, l] = padded[n, c, pos[k, l]]:  ∂/∂image = the gradient of each "
            "column scattered back to its pixel (a pixel in several windows sums them)")

    @staticmethod
    def forward(ctx: Context, image: Tensor, kernel: Pair, stride: Pair, dilation: Pair,
                padding: tuple[Pair, Pair], pad_value: float):
        backend = ctx.backend
        n, c, h, w = image.shape
        (top, bottom), (left, right) = padding
        padded_shape = (h + top + bottom, w + left + right)
        out = tuple(output_size(size, k, s, d, before, after) for size, k, s, d, (before, after)
                    in zip((h, w), kernel, stride, dilation, padding))
        table = window_positions(padded_shape, kernel, stride, dilation, out)
        padded = backend.full((n, c) + padded_shape, pad_value, image.dtype.numpy)
        inside = (slice(None), slice(None), slice(top, top + h), slice(left, left + w))
        backend.setitem(padded, inside, image._array)
        flat = backend.reshape(padded, (n, c, padded_shape[0] * padded_shape[1]))
        index = (slice(None), slice(None), backend.from_numpy(table))
        ctx.shape, ctx.dtype = (n, c) + padded_shape, image.dtype.numpy
        ctx.kernel, ctx.stride, ctx.dilation, ctx.out, ctx.inside = kernel, stride, dilation, out, inside
        return backend.getitem(flat, index)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        # col2im: window element (i, j) of every window is one strided slice of the padded
        # image, so add the gradient back one slice at a time (kh * kw whole-array additions,
        # where a scatter-add of every element would be far slower on the CPU).
        backend = ctx.backend
        (n, c), (kh, kw), (oh, ow) = ctx.shape[:2], ctx.kernel, ctx.out
        per_element = backend.reshape(grad._array, (n, c, kh * kw, oh, ow))
        summed = backend.zeros(ctx.shape, ctx.dtype)
        for k in range(kh * kw):
            top, left = (k // kw) * ctx.dilation[0], (k % kw) * ctx.dilation[1]
            rows = slice(top, top + ctx.stride[0] * (oh - 1) + 1, ctx.stride[0])
            cols = slice(left, left + ctx.stride[1] * (ow - 1) + 1, ctx.stride[1])
            where = (slice(None), slice(None), rows, cols)
            piece = backend.getitem(per_element, (slice(None), slice(None), k))
            backend.setitem(summed, where, backend.binary("add", backend.getitem(summed, where), piece))
        image_grad = backend.contiguous(backend.getitem(summed, ctx.inside))
        return Tensor._make(image_grad, backend, grad.device), None, None, None, None, None

"""Where the sliding windows of a convolution or a pooling layer sit in a padded image.

A ``kh x kw`` window slides over an ``(N, C, Hp, Wp)`` image with steps of
``stride`` and its elements ``dilation`` apart. Element ``(i, j)`` of every
window, taken over all window positions at once, is one *strided slice* of the
image: rows ``i * dh, i * dh + sh, ...`` and columns ``j * dw, j * dw + sw, ...``.
Both directions of im2col are built on that fact: reading the windows out, and
adding gradients back (one whole-array addition per window element).
"""
from __future__ import annotations

import numpy as np

Pair = tuple[int, int]


def element_slice(i: int, j: int, stride: Pair, dilation: Pair, out: Pair) -> tuple:
    """The index of window element ``(i, j)`` of every window: an ``(N, C, out_h, out_w)``
    strided slice of the padded image."""
    rows = slice(i * dilation[0], i * dilation[0] + stride[0] * (out[0] - 1) + 1, stride[0])
    cols = slice(j * dilation[1], j * dilation[1] + stride[1] * (out[1] - 1) + 1, stride[1])
    return (slice(None), slice(None), rows, cols)


def window_positions(padded: Pair, kernel: Pair, stride: Pair, dilation: Pair,
                     out: Pair) -> np.ndarray:
    """The flat position in the padded ``(Hp, Wp)`` image of window element ``k`` at
    output position ``l``: an int64 table of shape ``(kh * kw, out_h * out_w)``, for
    backends that read the windows with one gather."""
    (kh, kw), (oh, ow), width = kernel, out, padded[1]
    # row of each window element inside the window, and of each window's top-left corner
    element_row = np.repeat(np.arange(kh) * dilation[0], kw)
    element_col = np.tile(np.arange(kw) * dilation[1], kh)
    corner_row = np.repeat(np.arange(oh) * stride[0], ow)
    corner_col = np.tile(np.arange(ow) * stride[1], oh)
    rows = element_row[:, None] + corner_row[None, :]
    cols = element_col[:, None] + corner_col[None, :]
    return (rows * width + cols).astype(np.int64)

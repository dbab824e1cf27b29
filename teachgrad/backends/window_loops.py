"""Compiled loops over the sliding windows of an image, for numpy arrays on the CPU.

The whole-array formulations (:mod:`teachgrad.ops.conv`, :meth:`Backend.add_windows`)
take one numpy call per window element, and each call walks the image in short
rows: 16 values per row for a 16-wide output, so numpy pays its per-row cost tens
of thousands of times per call. The loops below walk each image once, in the same
order of additions as the whole-array code, so they give the same bits (the tests
hold the two equal):

* :func:`copy_windows`: im2col, every window element's slice of the image copied
  out in the columns' order (numpy's copy of the strided 6-D view walks it in runs
  of ``out_w`` values, with its per-run cost paid each time);
* :func:`add_windows`: col2im, the convolution's way back from its columns: each
  window element's gradient added to the pixel it was read from;
* :func:`max_windows` (and :func:`max_windows_2x2`, the usual window written out):
  max-pooling's forward, the largest value of each window and which element it was
  (PyTorch's rule: the first largest; in a window with NaN, the last NaN), kept as
  one small integer per window rather than a mask per element;
* :func:`add_max_gradients`: max-pooling's backward, each window's gradient added
  to the element that won.

numba compiles each loop once per dtype (``cache=True`` keeps the machine code on
disk). The column indices are computed as unsigned integers (:func:`_unsigned`): a
signed index may be negative, which numba must check for on every access (Python's
``a[-1]``), and that check stops LLVM from vectorising the inner loops (col2im
runs about three times faster without it).

Windows are ``kh x kw`` elements ``dilation`` apart, ``stride`` apart from one
another, read from an ``(N, C, Hp, Wp)`` padded image: window ``(p, q)``'s element
``(i, j)`` is pixel ``(p * sh + i * dh, q * sw + j * dw)``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

_OPTIONS = dict(cache=True, error_model="numpy")


@njit(cache=True)
def _unsigned(index):
    """``index`` (never negative here) as an unsigned integer: no wraparound check on it."""
    return np.uint64(index)


@njit(**_OPTIONS)
def copy_windows(padded, kw, sh, sw, dh, dw, columns):
    """``columns[n, c, i*kw + j, p, q] = padded[n, c, p*sh + i*dh, q*sw + j*dw]``: the
    windows as :meth:`Backend.windows` copies them out, ``(N, C, kh*kw, out_h, out_w)``."""
    _window_rows(padded, columns, kw, sh, sw, dh, dw, False)


@njit(**_OPTIONS)
def add_windows(per_element, summed, kw, sh, sw, dh, dw):
    """``summed[n, c, p*sh + i*dh, q*sw + j*dw] += per_element[n, c, i*kw + j, p, q]`` for
    every window element, window by window element as :meth:`Backend.add_windows` adds.

    ``per_element`` is ``(N, C, kh*kw, out_h, out_w)``; ``summed`` (zeros) the padded image.
    """
    _window_rows(summed, per_element, kw, sh, sw, dh, dw, True)


@njit(**_OPTIONS)
def _window_rows(image, columns, kw, sh, sw, dh, dw, add):
    """Each row of ``columns`` beside the image's elements it stands for: copied out of
    the image (im2col), or, with ``add``, added back into it (col2im)."""
    n, c, elements, out_h, out_w = columns.shape
    step = _unsigned(sw)
    for picture in range(n):
        for channel in range(c):
            for k in range(elements):
                i, j = k // kw, k % kw
                first = _unsigned(j * dw)
                for p in range(out_h):
                    row = image[picture, channel, p * sh + i * dh]
                    column = columns[picture, channel, k, p]
                    if add:
                        for q in range(_unsigned(out_w)):
                            row[first + q * step] += column[q]
                    else:
                        for q in range(_unsigned(out_w)):
                            column[q] = row[first + q * step]


@njit(**_OPTIONS)
def max_windows(padded, kh, kw, sh, sw, dh, dw, best, winner):
    """For every window, its largest value into ``best`` and the element that gave it
    (``i * kw + j``) into ``winner``, both ``(N, C, out_h, out_w)``.

    A later element wins only if it is larger (so ties go to the first) or NaN (so
    NaN wins, and the last NaN of the window): PyTorch's CPU kernel's comparison.
    """
    n, c, out_h, out_w = best.shape
    for image in range(n):
        for channel in range(c):
            plane = padded[image, channel]
            for p in range(out_h):
                top = p * sh
                for q in range(_unsigned(out_w)):
                    left = q * _unsigned(sw)
                    largest, where = plane[top, left], 0
                    for i in range(kh):
                        row = plane[top + i * dh]
                        for j in range(kw):
                            largest, where = _later(row[left + _unsigned(j * dw)], i * kw + j,
                                                    largest, where)
                    best[image, channel, p, q] = largest
                    winner[image, channel, p, q] = where


@njit(**_OPTIONS)
def max_windows_2x2(padded, sh, sw, dh, dw, best, winner):
    """:func:`max_windows` for ``2 x 2`` windows (max pooling's usual size), its four
    elements named in the loop: the compiler then keeps them in registers and
    vectorises the walk, about three times faster than the loops over ``kh`` and ``kw``."""
    n, c, out_h, out_w = best.shape
    for image in range(n):
        for channel in range(c):
            plane = padded[image, channel]
            for p in range(out_h):
                upper, lower = plane[p * sh], plane[p * sh + dh]
                best_row, winner_row = best[image, channel, p], winner[image, channel, p]
                for q in range(_unsigned(out_w)):
                    left = q * _unsigned(sw)
                    right = left + _unsigned(dw)
                    largest, where = _later(upper[right], 1, upper[left], 0)
                    largest, where = _later(lower[left], 2, largest, where)
                    best_row[q], winner_row[q] = _later(lower[right], 3, largest, where)


@njit(**_OPTIONS)
def _later(value, k, largest, where):
    """The window's maximum so far and its element, once element ``k`` (``value``) is seen:
    a later element wins only if larger, or NaN. (Selects, not branches: which element
    wins is data, and a mispredicted branch per element would cost more than the
    comparisons.)"""
    wins = (value > largest) | (value != value)  # (value != value: NaN)
    return (value if wins else largest), (k if wins else where)


@njit(**_OPTIONS)
def add_max_gradients(grad, winner, summed, kw, sh, sw, dh, dw):
    """Each window's gradient added to the element that won it (``winner`` from
    :func:`max_windows`): ``summed`` (zeros, the padded image's shape) collects them."""
    n, c, out_h, out_w = grad.shape
    for image in range(n):
        for channel in range(c):
            plane = summed[image, channel]
            for p in range(out_h):
                grad_row, winner_row = grad[image, channel, p], winner[image, channel, p]
                for q in range(out_w):
                    k = winner_row[q]
                    row, column = p * sh + (k // kw) * dh, q * sw + (k % kw) * dw
                    plane[_unsigned(row), _unsigned(column)] += grad_row[q]

"""``im2col`` and max-pooling: functions of the sliding windows of an image.

A 2-D convolution slides a ``kh x kw`` window over the (padded) image. If
every window is copied out as one column, the convolution of all windows with
all filters is a single matrix product ``weight (O, C*kh*kw) @ columns
(C*kh*kw, L)``, with ``L`` the number of window positions: the matmul the GPU
chapter builds does the real work.

Element ``(i, j)`` of every window, over all window positions at once, is one
strided slice of the padded image (:mod:`teachgrad.backends.windows`). So the
columns are read through strided views (no table of positions on the CPU), the
backward ("col2im") adds the gradient back one slice per window element, and
max-pooling needs no columns at all: the largest of ``kh * kw`` slices.

On numpy arrays of floats, im2col, col2im and max-pooling run compiled loops instead
(:mod:`teachgrad.backends.window_loops`: the same values, one walk over each
image where the slices take one numpy call per window element, each in short
rows); the whole-array code stays every other backend's path.
"""
from __future__ import annotations

import numpy as np

from ..autograd.function import Context, Function
from ..backends.compiled_loops import loops_take
from ..backends.windows import element_slice
from ..tensor import Tensor

Pair = tuple[int, int]


def output_size(size: int, kernel: int, stride: int, dilation: int, pad_before: int,
                pad_after: int) -> int:
    """How many window positions fit along one axis (PyTorch's formula, floor mode)."""
    span = dilation * (kernel - 1) + 1  # the extent of one dilated window
    return (size + pad_before + pad_after - span) // stride + 1


def _padded(ctx: Context, image: Tensor, kernel: Pair, stride: Pair, dilation: Pair,
            padding: tuple[Pair, Pair], pad_value: float):
    """``image``'s array inside a border of ``pad_value`` (itself when there is no border).

    Remembers on ``ctx`` the window settings, the output size, and where the image
    sits in the padded one (for the backward to cut its gradient out again).
    """
    backend = ctx.backend
    n, c, h, w = image.shape
    (top, bottom), (left, right) = padding
    ctx.kernel, ctx.stride, ctx.dilation, ctx.image_shape = kernel, stride, dilation, image.shape
    ctx.out_size = _out_size(image, kernel, stride, dilation, padding)
    ctx.padded_shape = (n, c, h + top + bottom, w + left + right)
    ctx.inside = (slice(None), slice(None), slice(top, top + h), slice(left, left + w))
    if ctx.padded_shape == tuple(image.shape):
        return image._array
    padded = backend.full(ctx.padded_shape, pad_value, image.dtype.numpy)
    backend.setitem(padded, ctx.inside, image._array)
    return padded


def _unpadded(ctx: Context, summed) -> object:
    """The image's part of a gradient with respect to the padded image."""
    if ctx.padded_shape == tuple(ctx.image_shape):
        return summed
    return ctx.backend.contiguous(ctx.backend.getitem(summed, ctx.inside))


def _out_size(image: Tensor, kernel: Pair, stride: Pair, dilation: Pair,
              padding: tuple[Pair, Pair]) -> Pair:
    return tuple(output_size(size, k, s, d, before, after) for size, k, s, d, (before, after)
                 in zip(image.shape[2:], kernel, stride, dilation, padding))


class Im2Col(Function):
    """``(N, C, H, W)`` image to ``(N, C, kh*kw, L)`` columns of its sliding windows.

    ``padding`` is ``((top, bottom), (left, right))``; padded cells hold
    ``pad_value`` (0 for a convolution). ``columns[n, c, i*kw + j]`` holds window
    element ``(i, j)`` of channel ``c`` at every position, so
    ``columns.reshape(N, C*kh*kw, L)`` (no copy) is each image's matrix in the
    order ``weight.reshape(O, C*kh*kw)`` multiplies. (Saved graphs record this
    4-D shape, so it stays.)
    """

    rule = ("columns[n, c·k, l] = padded[n, c, pos(k, l)]:  ∂/∂image = the gradient of each "
            "column added back to its pixel (a pixel in several windows sums them)")

    @staticmethod
    def forward(ctx: Context, image: Tensor, kernel: Pair, stride: Pair, dilation: Pair,
                padding: tuple[Pair, Pair], pad_value: float):
        n, c = image.shape[:2]
        padded = _padded(ctx, image, kernel, stride, dilation, padding, pad_value)
        out = ctx.out_size
        if loops_take(padded):
            from ..backends import window_loops
            columns = np.empty((n, c, kernel[0] * kernel[1]) + out, padded.dtype)
            window_loops.copy_windows(padded, kernel[1], *stride, *dilation, columns)
        else:
            columns = ctx.backend.windows(padded, kernel, stride, dilation, out)
        return ctx.backend.reshape(columns, (n, c, kernel[0] * kernel[1], out[0] * out[1]))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        backend, (kh, kw) = ctx.backend, ctx.kernel
        n, c = ctx.padded_shape[:2]
        per_element = backend.reshape(grad._array, (n, c, kh * kw) + ctx.out_size)
        if loops_take(per_element):
            from ..backends import window_loops
            summed = np.zeros(ctx.padded_shape, per_element.dtype)
            window_loops.add_windows(np.ascontiguousarray(per_element), summed, kw,
                                     *ctx.stride, *ctx.dilation)
        else:
            pieces = [backend.getitem(per_element, (slice(None), slice(None), k))
                      for k in range(kh * kw)]
            summed = backend.add_windows(pieces, ctx.padded_shape, ctx.kernel, ctx.stride,
                                         ctx.dilation)
        image_grad = _unpadded(ctx, summed)
        return Tensor._make(image_grad, backend, grad.device), None, None, None, None, None


class FiltersTimesColumns(Function):
    """A convolution's product: ``filters (O, R) @ columns (N, R, L)`` for every image,
    plus ``bias[o]`` when given, as ``(N, O, L)``.

    The same arithmetic as ``tg.matmul`` then ``+ bias``, as one operation: the bias is
    added in place into the product, a new array (where ``+`` would write a third one),
    and the backward computes the three gradients side by side::

        ∂/∂filters = Σ over images of grad @ columnsᵀ,   ∂/∂columns = filtersᵀ @ grad,
        ∂/∂bias = Σ grad over images and positions

    (the bias's sum by a compiled loop on numpy float arrays, in float64:
    :mod:`teachgrad.backends.batch_norm_loops`; elsewhere a whole-array sum).
    """

    rule = ("y = F @ C + b:  ∂/∂F = Σₙ grad @ Cᵀ,  ∂/∂C = Fᵀ @ grad,  "
            "∂/∂b = Σ grad over images and positions")
    fresh_gradients = True  # (products and sums: new arrays that nothing else holds)

    @staticmethod
    def forward(ctx: Context, filters: Tensor, columns: Tensor, bias: Tensor | None):
        backend = ctx.backend
        ctx.save_for_backward(filters, columns)
        out = backend.matmul(filters._array, columns._array)
        if bias is not None:
            backend.binary_inplace("add", out, backend.reshape(bias._array, (1, -1, 1)))
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        backend, g = ctx.backend, grad._array
        filters, columns = (t._array for t in ctx.saved_tensors)
        grads: list = [None, None, None]
        if ctx.needs_input_grad[0]:
            # one product per image, then their sum, made transposed: (columns @ gradᵀ)ᵀ
            # holds the same sums as grad @ columnsᵀ, and OpenBLAS runs it in about two
            # thirds of the time for a convolution's shapes (a long inner dimension)
            per_image = backend.matmul(columns, backend.permute(g, (0, 2, 1)))
            summed = backend.reduce("sum", per_image, (0,), False)
            grads[0] = backend.contiguous(backend.permute(summed, (1, 0)))
        if ctx.needs_input_grad[1]:
            grads[1] = backend.matmul(backend.permute(filters, (1, 0)), g)
        if ctx.needs_input_grad[2]:
            grads[2] = _bias_gradient(backend, g)
        return tuple(None if a is None else Tensor._make(a, backend, grad.device) for a in grads)


def _bias_gradient(backend, g):
    """``Σ g`` over images and positions of an ``(N, O, L)`` gradient: one value per filter."""
    if loops_take(g):
        from ..backends import batch_norm_loops
        sums = np.empty(g.shape[1])
        batch_norm_loops.channel_sums(np.ascontiguousarray(g), sums)
        return sums.astype(g.dtype)
    return backend.reduce("sum", g, (0, 2), False)


class MaxPool2d(Function):
    """The largest value of each window, read as ``kh * kw`` strided slices (no columns).

    The gradient goes to the element that gave the maximum, chosen as PyTorch
    does: the first largest in the window (row by row), and where a window holds
    NaN, its last NaN.
    """

    rule = "y = max over the window:  ∂y/∂x = 1 for the element that gave the maximum, else 0"

    @staticmethod
    def forward(ctx: Context, image: Tensor, kernel: Pair, stride: Pair, dilation: Pair,
                padding: tuple[Pair, Pair], pad_value: float):
        backend = ctx.backend
        padded = _padded(ctx, image, kernel, stride, dilation, padding, pad_value)
        if ctx._recording and loops_take(padded):
            # one compiled walk: the maximum and which element gave it (without a
            # backward to feed, the slices below are faster: numpy's maximum is vectorised)
            from ..backends import window_loops
            best = np.empty(image.shape[:2] + ctx.out_size, padded.dtype)
            ctx.winner = np.empty(best.shape, np.int32)
            if kernel == (2, 2):
                window_loops.max_windows_2x2(padded, *stride, *dilation, best, ctx.winner)
            else:
                window_loops.max_windows(padded, *kernel, *stride, *dilation, best, ctx.winner)
            return best
        # the elementwise maximum of the slices: kh*kw passes over output-sized arrays,
        # where the maximum of im2col's columns would first copy kh*kw outputs' worth
        elements = [backend.getitem(padded, _element(ctx, k)) for k in range(kernel[0] * kernel[1])]
        best = backend.contiguous(elements[0])
        for element in elements[1:]:
            best = backend.binary("maximum", best, element)  # (numpy's maximum keeps NaN)
        if ctx._recording:  # which element won, for the backward (not the image: it may change)
            ctx.winners = _winners(backend, elements, best)
        return best

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        backend = ctx.backend
        if hasattr(ctx, "winner"):  # (the compiled forward's: one element index per window)
            from ..backends import window_loops
            summed = np.zeros(ctx.padded_shape, grad._array.dtype)
            window_loops.add_max_gradients(np.ascontiguousarray(grad._array), ctx.winner, summed,
                                           ctx.kernel[1], *ctx.stride, *ctx.dilation)
            return Tensor._make(_unpadded(ctx, summed), backend, grad.device), None, None, None, None, None
        # window element k of every window gets the gradient where it won (a bool mask: 0 or 1)
        pieces = [backend.binary("mul", grad._array, won) for won in ctx.winners]
        summed = backend.add_windows(pieces, ctx.padded_shape, ctx.kernel, ctx.stride, ctx.dilation)
        image_grad = _unpadded(ctx, summed)
        return Tensor._make(image_grad, backend, grad.device), None, None, None, None, None


def _element(ctx: Context, k: int) -> tuple:
    """The slice of the padded image holding window element ``k`` (row by row) of every window."""
    return element_slice(k // ctx.kernel[1], k % ctx.kernel[1], ctx.stride, ctx.dilation,
                         ctx.out_size)


def _winners(backend, elements: list, best) -> list:
    """For each window element ``k``, a bool array: True where element ``k`` gave its window's
    maximum ``best``, by PyTorch's rule (the first largest; in a window with NaN, its last NaN).

    Bool arithmetic, one byte per value: ``a < b`` is "b and not a", ``maximum`` is "or".
    """
    taken = backend.binary("eq", elements[0], best)
    winners = [taken]
    for element in elements[1:]:  # equal to the maximum, and no earlier element was
        won = backend.binary("lt", taken, backend.binary("eq", element, best))
        winners.append(won)
        taken = backend.binary("maximum", taken, won)
    if backend.dtype(best).kind == "f" and bool(backend.to_numpy(
            backend.reduce("max", backend.binary("ne", best, best), None, False))):
        # NaN equals nothing, so its windows have no winner yet: give it to the last NaN
        seen = None
        for k in range(len(elements) - 1, -1, -1):
            is_nan = backend.binary("ne", elements[k], elements[k])
            last = is_nan if seen is None else backend.binary("lt", seen, is_nan)
            winners[k] = backend.binary("maximum", winners[k], last)
            seen = last if seen is None else backend.binary("maximum", seen, last)
    return winners

"""Batch norm in training, as one operation with its backward written out.

Written with ordinary tensor operations (subtract the mean, divide by the
standard deviation, scale, shift), batch norm's backward is a chain of a dozen
backward steps, each a pass over the whole activation. Differentiating the
formula by hand gives the same gradient in a few passes: with ``x̂`` the
normalised input, ``g`` the incoming gradient, ``m`` the number of values per
channel and sums taken per channel,

    ∂L/∂x = weight / std · (g − Σg / m − x̂ · Σ(g·x̂) / m)
    ∂L/∂weight = Σ(g·x̂),   ∂L/∂bias = Σg

(the two sums are where the mean and the variance, which depend on every
``x``, send their share of the gradient back).

On numpy float arrays the passes are compiled loops
(:mod:`teachgrad.backends.batch_norm_loops`: the same arithmetic, one walk over the
activation for the output and two backward instead of two and seven numpy calls).
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd.function import Context, Function
from ..backends.compiled_loops import loops_take
from ..tensor import Tensor


def batch_statistics(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per channel (dimension 1): the batch's mean, the centred input ``x - mean``, and
    the biased variance (mean and variance shaped ``(1, C, 1, ...)``, to broadcast).

    Not differentiated: :class:`BatchNormTraining` differentiates through them. One
    operation (:class:`BatchStatistics`), so that ``tg.jit.trace`` records it as a step
    of the graph, and a compiled graph computes them anew, with the same bits as eager.
    """
    return BatchStatistics.apply(x)


class BatchStatistics(Function):
    """The batch's per-channel ``mean``, ``x - mean`` and biased variance, as three outputs.

    Called without autograd (batch norm's own backward covers them); a Function so
    that a trace records the computation rather than its first results. On numpy float
    arrays two compiled walks (float64 sums, :mod:`teachgrad.backends.batch_norm_loops`)
    replace five whole-array passes; elsewhere they are tensor operations.
    """

    rule = "mean = Σx / m, centred = x − mean, var = Σ centred² / m (per channel; not differentiated)"

    @staticmethod
    def forward(ctx: Context, x: Tensor):
        if loops_take(x._array):
            return _compiled_statistics(x._array)
        axes = (0, *range(2, x.ndim))
        mean = x.mean(dim=axes, keepdim=True)
        centered = x - mean  # (squared by a product: a power is many times slower)
        variance = (centered * centered).mean(dim=axes, keepdim=True)
        return mean._array, centered._array, variance._array

    @staticmethod
    def backward(ctx: Context, *grads: Tensor):
        raise RuntimeError("batch_statistics is not differentiable on its own: batch norm's "
                           "backward (BatchNormTraining) differentiates through it. Fix: call "
                           "it under tg.no_grad(), as F.batch_norm does.")


def _compiled_statistics(x):
    """:class:`BatchStatistics` by the compiled loops: the sums, then centre and square."""
    from ..backends import batch_norm_loops as loops
    x = np.ascontiguousarray(x)
    channels = x.shape[1]
    count = x.size // channels  # values per channel
    per_channel = (1, channels) + (1,) * (x.ndim - 2)
    sums, sum_squares = np.empty(channels), np.empty(channels)
    loops.channel_sums(_as_rows(x), sums)
    mean = (sums / count).astype(x.dtype)
    centered = np.empty_like(x)
    loops.center_and_square(_as_rows(x), mean, _as_rows(centered), sum_squares)
    return (mean.reshape(per_channel), centered,
            (sum_squares / count).astype(x.dtype).reshape(per_channel))


def _as_rows(array):
    """An ``(N, C, ...)`` array as ``(N, C, M)``, the compiled loops' shape (a view)."""
    return array.reshape(array.shape[0], array.shape[1], -1)


class BatchNormTraining(Function):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` with ``mean`` and ``var`` the batch's
    own per-channel statistics (over every dimension but 1).

    The caller computes them (it also needs them for the running averages) and
    passes ``centered = x - mean`` and ``var``, so no pass over ``x`` is made twice;
    the backward treats both as the functions of ``x`` they are.
    """

    rule = ("y = x̂·w + b, x̂ = (x − mean) / std:  ∂/∂x = w/std · (g − Σg/m − x̂·Σ(g·x̂)/m), "
            "∂/∂w = Σ(g·x̂), ∂/∂b = Σg")

    @staticmethod
    def forward(ctx: Context, x: Tensor, centered: Tensor, var: Tensor, weight: Tensor | None,
                bias: Tensor | None, eps: float):
        backend = ctx.backend
        per_channel = var.shape  # (1, C, 1, ...): broadcasts against x
        inverse_std = backend.binary("div", 1.0, backend.unary("sqrt", backend.binary(
            "add", var._array, eps)))
        # x̂·w + b = centered · (w/std) + b: two passes, the per-channel factor made first
        scale = inverse_std if weight is None else backend.binary(
            "mul", inverse_std, backend.reshape(weight._array, per_channel))
        ctx.centered, ctx.inverse_std, ctx.scale = centered._array, inverse_std, scale
        if loops_take(centered._array, scale):
            from ..backends import batch_norm_loops as loops
            shift = np.zeros(x.shape[1], scale.dtype) if bias is None else bias._array
            if not loops_take(shift, scale):  # (a bias of another dtype: numpy's passes)
                shift = shift.astype(scale.dtype)
            out = np.empty(x.shape, scale.dtype)
            loops.scale_shift(_as_rows(ctx.centered), scale.reshape(-1), shift, _as_rows(out))
            return out
        out = backend.binary("mul", centered._array, scale)
        if bias is not None:
            backend.binary_inplace("add", out, backend.reshape(bias._array, per_channel))
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        backend, g, centered = ctx.backend, grad._array, ctx.centered
        axes = tuple(a for a in range(len(backend.shape(g))) if a != 1)
        channels = backend.shape(g)[1]
        count = math.prod(backend.shape(g)) // channels  # values per channel
        compiled = loops_take(g, centered, ctx.scale)
        if compiled:
            from ..backends import batch_norm_loops as loops
            g = np.ascontiguousarray(g)
            sum_g, sum_g_centered = np.empty(channels), np.empty(channels)
            loops.gradient_sums(_as_rows(g), _as_rows(centered), sum_g, sum_g_centered)
            per_channel = backend.shape(ctx.scale)
            sum_g = sum_g.astype(g.dtype).reshape(per_channel)
            sum_g_centered = sum_g_centered.astype(g.dtype).reshape(per_channel)
        else:
            sum_g = backend.reduce("sum", g, axes, True)
            sum_g_centered = backend.reduce("sum", backend.binary("mul", g, centered), axes, True)
        # Σ(g·x̂) = Σ(g·centered) / std
        sum_g_normalised = backend.binary("mul", sum_g_centered, ctx.inverse_std)
        grads: list = [None] * 6
        needs_x, _, _, needs_weight, needs_bias = ctx.needs_input_grad[:5]
        if needs_x:
            # scale·(g − Σg/m − x̂·Σ(g·x̂)/m) with x̂ = centered/std, as three per-channel
            # factors and three passes: g·scale + centered·a + b
            minus_scale_per_count = backend.binary("div", ctx.scale, -float(count))
            a = backend.binary("mul", backend.binary("mul", sum_g_normalised, ctx.inverse_std),
                               minus_scale_per_count)
            b = backend.binary("mul", sum_g, minus_scale_per_count)
            if compiled:
                dx = np.empty_like(g)
                loops.input_gradient(_as_rows(g), _as_rows(centered), ctx.scale.reshape(-1),
                                     a.reshape(-1), b.reshape(-1), _as_rows(dx))
            else:
                dx = backend.binary("mul", g, ctx.scale)
                backend.binary_inplace("add", dx, backend.binary("mul", centered, a))
                backend.binary_inplace("add", dx, b)
            grads[0] = dx
        if needs_weight:
            grads[3] = backend.reshape(sum_g_normalised, (channels,))
        if needs_bias:
            grads[4] = backend.reshape(sum_g, (channels,))
        return tuple(None if a is None else Tensor._make(a, backend, grad.device) for a in grads)

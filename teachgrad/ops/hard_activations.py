"""The "hard" activations, built from straight pieces (``hardtanh``, ``hardsigmoid``,
``hardswish``), Mish and SELU, one Function each.

The hard ones are cheap stand-ins for smooth functions that mobile networks made popular:
``hardtanh`` is ``tanh`` cut down to a ramp between two bounds, ``hardsigmoid`` a ramp
from 0 (at -3) to 1 (at 3) in place of the sigmoid, and ``hardswish`` is ``x`` times that
ramp, as SiLU is ``x`` times the sigmoid. Their gradients are the slopes of the pieces.
Where two pieces meet, each backward picks the side PyTorch's kernel picks
(``aten/src/ATen/native/cpu/Activation.cpp``): ``hardtanh'`` and ``hardsigmoid'`` are 0 on
their bounds, ``hardswish'`` is 0 at -3 and 1 at 3.

Mish is ``x * tanh(softplus(x))``: smooth everywhere, a little below 0 for negatives.
SELU is ELU times a constant, in one Function so that float16 rounds once, as PyTorch's.
"""
from __future__ import annotations

import numpy as np

from ..autograd.function import Context, Function
from ..tensor import Tensor
from .elementwise import Where

RAMP_HALF_WIDTH = 3.0  # hardsigmoid rises from 0 at -3 to 1 at +3
RAMP_HEIGHT = 6.0  # relu6(x + 3) / 6: the ramp is relu6 shifted and scaled
# hardsigmoid's slope as PyTorch's backward has it: 1/6 rounded to float32, also for float64
# (1.7e-9 above 1/6; kept so that gradients match PyTorch's to the last bit)
HARDSIGMOID_SLOPE = float(np.float32(1.0 / 6.0))
SOFTPLUS_LINEAR_FROM = 20.0  # above this, log(1 + e^x) is x to double precision
# SELU's constants (Klambauer et al., 2017), as PyTorch writes them
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


class Hardtanh(Function):
    rule = "∂hardtanh(a)/∂a = 1 where min_val < a < max_val, else 0"

    @staticmethod
    def forward(ctx: Context, a: Tensor, min_val: float, max_val: float):
        ctx.save_for_backward(a)
        ctx.min_val, ctx.max_val = min_val, max_val
        b = ctx.backend
        return b.binary("minimum", b.binary("maximum", a._array, min_val), max_val)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        inside = (a > ctx.min_val) & (a < ctx.max_val)
        return Where.apply(inside, grad, 0.0), None, None


def _ramp(b, x):
    """``min(max(x + 3, 0), 6)``: hardsigmoid times 6 (the ramp both hard functions share)."""
    return b.binary("minimum", b.binary("maximum", b.binary("add", x, RAMP_HALF_WIDTH), 0.0),
                    RAMP_HEIGHT)


class Hardsigmoid(Function):
    rule = "∂hardsigmoid(a)/∂a = 1/6 where −3 < a < 3, else 0"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        return ctx.backend.binary("div", _ramp(ctx.backend, a._array), RAMP_HEIGHT)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        on_the_ramp = (a > -RAMP_HALF_WIDTH) & (a < RAMP_HALF_WIDTH)
        return Where.apply(on_the_ramp, grad * HARDSIGMOID_SLOPE, 0.0)


class Hardswish(Function):
    rule = "∂hardswish(a)/∂a = 0 where a ≤ −3, a/3 + 1/2 where −3 < a < 3, 1 where a ≥ 3"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        b, x = ctx.backend, a._array
        return b.binary("div", b.binary("mul", x, _ramp(b, x)), RAMP_HEIGHT)  # (PyTorch's order)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        on_the_ramp = grad * (a / RAMP_HALF_WIDTH + 0.5)
        above = Where.apply(a < RAMP_HALF_WIDTH, on_the_ramp, grad)
        return Where.apply(a <= -RAMP_HALF_WIDTH, 0.0, above)


class Mish(Function):
    rule = "∂(a·tanh(sp(a)))/∂a = t + a·σ(a)·(1 − t²),  t = tanh(sp(a)), sp(a) = ln(1 + eᵃ)"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        b, x = ctx.backend, a._array
        return b.binary("mul", x, b.unary("tanh", _softplus(b, x)))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        b = ctx.backend
        t = Tensor._make(b.unary("tanh", _softplus(b, a._array)), b, a.device)
        return grad * (t + a * a.sigmoid() * (1 - t * t))


def _softplus(b, x):
    """``log(1 + e^x)``, with ``x`` itself above 20 (where the two agree): the exponent is
    capped there, so the unused side cannot overflow."""
    capped = b.binary("minimum", x, SOFTPLUS_LINEAR_FROM)
    smooth = b.unary("log1p", b.unary("exp", capped))
    return b.where(b.binary("gt", x, SOFTPLUS_LINEAR_FROM), x, smooth)


class Selu(Function):
    rule = "∂selu(a)/∂a = scale if a > 0 else scale·alpha·eᵃ"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        b, x = ctx.backend, a._array
        # expm1 of min(x, 0): the positive side is never used, and must not overflow
        negative_side = b.binary("mul", b.unary("expm1", b.binary("minimum", x, 0.0)),
                                 SELU_ALPHA * SELU_SCALE)
        return b.where(b.binary("le", x, 0.0), negative_side, b.binary("mul", x, SELU_SCALE))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        below = a <= 0
        slope = Where.apply(below, a, 0.0).exp() * (SELU_ALPHA * SELU_SCALE)
        return Where.apply(below, grad * slope, grad * SELU_SCALE)

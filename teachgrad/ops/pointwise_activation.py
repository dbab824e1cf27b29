"""The smooth and leaky activations (GELU, SiLU, ELU, Softplus, LeakyReLU) and the
functions they are built from (``erf``, ``log1p``, ``expm1``), one Function each.

Each forward is a few backend primitives on the arrays; each backward is the
derivative written out next to it, as tensor operations (so it runs on any device).
Where PyTorch picks a branch per element (``x > 0 ? ... : ...``), so do these, with
the same comparison: the two sides agree on where the kink sits (``leaky_relu'(0)`` is
``negative_slope``, ``elu'(0)`` is ``alpha``) and on what NaN does.

Every constant is PyTorch's (``aten/src/ATen/native/cpu/Activation.cpp``), so float32
results round the way PyTorch's do, up to the last bit or two.
"""
from __future__ import annotations

import math

from ..autograd.function import Context, Function
from ..tensor import Tensor
from .elementwise import Where

SQRT_HALF = math.sqrt(0.5)  # 1/sqrt(2): Phi(x) = (1 + erf(x / sqrt(2))) / 2
NORMAL_PDF_SCALE = 1.0 / math.sqrt(2.0 * math.pi)  # the normal density is this * e^(-x²/2)
TANH_GELU_SCALE = math.sqrt(2.0 / math.pi)
TANH_GELU_CUBIC = 0.044715


# -- the functions of the library they use -------------------------------------------------

class Erf(Function):
    rule = "∂erf(a)/∂a = 2/√π · e^(−a²)"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        return ctx.backend.unary("erf", a._array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        return grad * (2.0 / math.sqrt(math.pi)) * (-(a * a)).exp()


class Log1p(Function):
    rule = "∂ln(1+a)/∂a = 1/(1+a)"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        return ctx.backend.unary("log1p", a._array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        return grad / (a + 1)


class Expm1(Function):
    rule = "∂(eᵃ−1)/∂a = eᵃ"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        out = ctx.backend.unary("expm1", a._array)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return grad * (ctx.output + 1)


# -- GELU: x times the probability that a standard normal variable is below x ----------------

class Gelu(Function):
    rule = "∂(a·Φ(a))/∂a = Φ(a) + a·φ(a)   (Φ, φ: the standard normal's CDF and density)"
    fused = "gelu"  # the name of the one-pass loop a backend may have (Backend.fused_activation)

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        fused = ctx.backend.fused_activation(Gelu.fused, a._array)
        return fused if fused is not None else Gelu.compose(ctx.backend, a._array)

    @staticmethod
    def compose(b, x):
        """``x * Phi(x)`` from the backend's primitives."""
        cdf = b.binary("mul", b.binary("add", b.unary("erf", b.binary("mul", x, SQRT_HALF)), 1.0), 0.5)
        return b.binary("mul", x, cdf)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        fused = _fused_backward(ctx, Gelu.fused, a, grad)
        if fused is not None:
            return fused
        cdf = ((a * SQRT_HALF).erf() + 1) * 0.5
        pdf = (a * a * -0.5).exp() * NORMAL_PDF_SCALE
        return grad * (cdf + a * pdf)


class GeluTanh(Function):
    rule = "a·(1 + tanh(u))/2 with u = √(2/π)(a + 0.044715a³):  ∂/∂a = (1+t)/2 + a/2·(1−t²)·u′"
    fused = "gelu_tanh"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        fused = ctx.backend.fused_activation(GeluTanh.fused, a._array)
        return fused if fused is not None else GeluTanh.compose(ctx.backend, a._array)

    @staticmethod
    def compose(b, x):
        """``x * (1 + tanh(u)) / 2`` from the backend's primitives."""
        cube = b.binary("mul", b.binary("mul", x, x), x)
        inner = b.binary("mul", b.binary("add", x, b.binary("mul", cube, TANH_GELU_CUBIC)),
                         TANH_GELU_SCALE)
        return b.binary("mul", b.binary("mul", x, 0.5), b.binary("add", b.unary("tanh", inner), 1.0))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        fused = _fused_backward(ctx, GeluTanh.fused, a, grad)
        if fused is not None:
            return fused
        square = a * a
        t = ((a + square * a * TANH_GELU_CUBIC) * TANH_GELU_SCALE).tanh()
        inner_slope = (square * (3 * TANH_GELU_CUBIC) + 1) * TANH_GELU_SCALE
        return grad * ((t + 1) * 0.5 + a * 0.5 * ((1 - t * t) * inner_slope))


def _fused_backward(ctx: Context, name: str, a: Tensor, grad: Tensor) -> Tensor | None:
    """The backend's one-pass gradient of ``name`` as a tensor, or None if it has none."""
    if grad.dtype is not a.dtype or tuple(grad.shape) != tuple(a.shape):
        return None
    out = ctx.backend.fused_activation(name, a._array, grad._array)
    return None if out is None else Tensor._make(out, ctx.backend, grad.device)


# -- SiLU (swish): x times its own sigmoid -----------------------------------------------------

class Silu(Function):
    rule = "∂(a·σ(a))/∂a = σ(a)·(1 + a·(1 − σ(a)))"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        return ctx.backend.binary("mul", a._array, ctx.backend.unary("sigmoid", a._array))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        s = a.sigmoid()
        return grad * s * (a * (1 - s) + 1)


# -- the piecewise ones: one formula for x > 0, another below ------------------------------------

class LeakyRelu(Function):
    rule = "∂leaky_relu(a)/∂a = 1 if a > 0 else negative_slope"

    @staticmethod
    def forward(ctx: Context, a: Tensor, negative_slope: float):
        ctx.save_for_backward(a)
        ctx.negative_slope = negative_slope
        b, x = ctx.backend, a._array
        return b.where(b.binary("gt", x, 0), x, b.binary("mul", x, negative_slope))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        return Where.apply(a > 0, grad, grad * ctx.negative_slope), None


class Elu(Function):
    rule = "∂elu(a)/∂a = 1 if a > 0 else alpha·eᵃ"

    @staticmethod
    def forward(ctx: Context, a: Tensor, alpha: float):
        ctx.save_for_backward(a)
        ctx.alpha = alpha
        b, x = ctx.backend, a._array
        # expm1 of min(x, 0): the positive side is never used, and must not overflow
        negative_side = b.binary("mul", b.unary("expm1", b.binary("minimum", x, 0)), alpha)
        return b.where(b.binary("le", x, 0), negative_side, x)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        below = a <= 0
        slope = Where.apply(below, a, a * 0).exp() * ctx.alpha  # (same min(a, 0) as forward)
        return Where.apply(below, grad * slope, grad), None


class Softplus(Function):
    rule = "∂(ln(1 + e^(βa))/β)/∂a = σ(βa), or 1 where βa > threshold (where it equals a)"

    @staticmethod
    def forward(ctx: Context, a: Tensor, beta: float, threshold: float):
        ctx.save_for_backward(a)
        ctx.beta, ctx.threshold = beta, threshold
        b, x = ctx.backend, a._array
        scaled = b.binary("mul", x, beta)
        # past the threshold softplus is x to within rounding; capping the exponent there
        # keeps the unused side from overflowing (it changes no value that is returned)
        capped = b.binary("minimum", scaled, threshold)
        smooth = b.binary("div", b.unary("log1p", b.unary("exp", capped)), beta)
        return b.where(b.binary("gt", scaled, threshold), x, smooth)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        scaled = a * ctx.beta
        linear = scaled > ctx.threshold
        z = Where.apply(linear, scaled * 0, scaled).exp()
        return Where.apply(linear, grad, grad * z / (z + 1)), None, None

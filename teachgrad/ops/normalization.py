"""Layer normalisation as one Function, with the backward written out.

Composed from means, subtractions and a square root, layer norm's backward is some
twenty-five whole-array operations (autograd walks back through each). Its gradient
has a short closed form instead. With ``x̂ = (x − μ) / σ`` over the normalised
dimensions (``n`` values each), ``σ = sqrt(var + eps)`` and ``g = grad · weight``::

    ∂L/∂x = (g − mean(g) − x̂ · mean(g · x̂)) / σ

(the two means remove what moving every value, or stretching them all, would do: the
normalised output cannot feel either). ``weight`` gets ``Σ grad · x̂`` and ``bias``
``Σ grad``, summed over the leading dimensions by the engine, as for any broadcast.
"""
from __future__ import annotations

from ..autograd.function import Context, Function
from ..tensor import Tensor


class LayerNorm(Function):
    rule = "x̂ = (x − μ)/σ:  ∂/∂x = (g − mean(g) − x̂·mean(g·x̂))/σ with g = grad·w;  ∂/∂w = Σ grad·x̂"

    @staticmethod
    def forward(ctx: Context, x: Tensor, weight: Tensor | None, bias: Tensor | None,
                axes: tuple[int, ...], eps: float):
        b, a = ctx.backend, x._array
        count = 1
        for axis in axes:
            count *= x.shape[axis]
        mean = b.binary("div", b.reduce("sum", a, axes, True), count)
        centered = b.binary("sub", a, mean)
        var = b.binary("div", b.reduce("sum", b.binary("mul", centered, centered), axes, True), count)
        inv_std = b.binary("div", 1.0, b.unary("sqrt", b.binary("add", var, eps)))
        normalized = b.binary("mul", centered, inv_std)
        ctx.normalized = Tensor._make(normalized, b, x.device)  # (backward's x̂ and 1/σ)
        ctx.inv_std = Tensor._make(inv_std, b, x.device)
        ctx.axes, ctx.weight = axes, weight
        out = normalized if weight is None else b.binary("mul", normalized, weight._array)
        return out if bias is None else b.binary("add", out, bias._array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        normalized, axes = ctx.normalized, ctx.axes
        g = grad if ctx.weight is None else grad * ctx.weight
        dx = None
        if ctx.needs_input_grad[0]:
            shift = g.mean(dim=axes, keepdim=True)
            stretch = (g * normalized).mean(dim=axes, keepdim=True)
            dx = (g - shift - normalized * stretch) * ctx.inv_std
        dw = grad * normalized if ctx.needs_input_grad[1] else None
        db = grad if ctx.needs_input_grad[2] else None
        return dx, dw, db, None, None

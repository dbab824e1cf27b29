"""Elementwise operations: each Function is forward + backward and nothing else.

Backward formulas are written with tensor operations, so they run on whatever
device the gradient lives on. Broadcasting needs no code here: the engine sums
each gradient back to its input's shape (as PyTorch's does).

A Function marked ``formula_on_arrays`` writes its formula with operators only
(``grad * b``, ``grad * (1 - t * t)``) and reads the forward's result as
``ctx.output``: on the numpy backend the engine then runs that same formula on
the numpy arrays themselves, which gives the same numbers without making a
tensor for every ``*``.
"""
from __future__ import annotations

import math

from ..autograd.function import Context, Function
from ..backends.compiled_loops import numba_loaded
from ..backends.numpy_backend import relu_passes, sigmoid_passes
from ..tensor import Tensor
from .dispatch import value


class Add(Function):
    rule = "∂(a+b)/∂a = 1,  ∂(a+b)/∂b = 1"
    formula_on_arrays = True

    @staticmethod
    def forward(ctx: Context, a, b):
        return ctx.backend.binary("add", a._array if isinstance(a, Tensor) else a,
                                  b._array if isinstance(b, Tensor) else b)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return grad, grad


class Sub(Function):
    rule = "∂(a−b)/∂a = 1,  ∂(a−b)/∂b = −1"
    formula_on_arrays = True

    @staticmethod
    def forward(ctx: Context, a, b):
        return ctx.backend.binary("sub", a._array if isinstance(a, Tensor) else a,
                                  b._array if isinstance(b, Tensor) else b)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return grad, -grad if ctx.needs_input_grad[1] else None


class Mul(Function):
    rule = "∂(a·b)/∂a = b,  ∂(a·b)/∂b = a"
    formula_on_arrays = True

    @staticmethod
    def forward(ctx: Context, a, b):
        ctx.save_for_backward(a, b)
        return ctx.backend.binary("mul", a._array if isinstance(a, Tensor) else a,
                                  b._array if isinstance(b, Tensor) else b)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        a, b = ctx.saved_tensors
        da = grad * b if ctx.needs_input_grad[0] else None
        db = grad * a if ctx.needs_input_grad[1] else None
        return da, db


class Div(Function):
    rule = "∂(a/b)/∂a = 1/b,  ∂(a/b)/∂b = −a/b²"
    formula_on_arrays = True

    @staticmethod
    def forward(ctx: Context, a, b):
        ctx.save_for_backward(a, b)
        return ctx.backend.binary("div", a._array if isinstance(a, Tensor) else a,
                                  b._array if isinstance(b, Tensor) else b)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        a, b = ctx.saved_tensors
        da = grad / b if ctx.needs_input_grad[0] else None
        # (a/b)/b, not a/(b·b): b·b overflows (or underflows to 0) long before a/b/b does
        db = -grad * ((a / b) / b) if ctx.needs_input_grad[1] else None
        return da, db


class Pow(Function):
    rule = "∂(aᵇ)/∂a = b·aᵇ⁻¹,  ∂(aᵇ)/∂b = aᵇ·ln a"

    @staticmethod
    def forward(ctx: Context, a, b):
        out = ctx.backend.binary("pow", value(a), value(b))
        ctx.save_for_backward(a, b)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        a, b = ctx.saved_tensors
        da = db = None
        zero = grad * 0
        if ctx.needs_input_grad[0]:
            # a**0 is constant: its slope is 0 even at a = 0, where b * a**(b-1) is 0 * inf.
            # grad * (b * a**(b-1)), in PyTorch's order: grad * b first would overflow a
            # huge (loss-scaled) gradient that the slope would have brought back in range
            if isinstance(b, Tensor):
                da = Where.apply(b == 0, zero, grad * (b * a ** (b - 1)))
            else:
                da = zero if b == 0 else grad * (b * a ** (b - 1))
        if ctx.needs_input_grad[1]:
            out = ctx.output
            if isinstance(a, Tensor):
                # at a = 0 with b >= 0, aᵇ·ln a is 0·(−inf): PyTorch takes the limit, 0
                flat = ((a == 0).long() * (b >= 0).long()) > 0
                db = Where.apply(flat, zero, grad * out * a.log())
            elif a == 0:
                db = Where.apply(b >= 0, zero, grad * out * -math.inf)
            else:  # ln of a negative number is not real: nan, as in PyTorch
                db = grad * out * (math.log(a) if a > 0 else math.nan)
        return da, db


class Neg(Function):
    rule = "∂(−a)/∂a = −1"
    formula_on_arrays = True

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        return ctx.backend.unary("neg", a._array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return -grad


class Exp(Function):
    rule = "∂eᵃ/∂a = eᵃ"
    formula_on_arrays = True

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        out = ctx.backend.unary("exp", a._array)
        ctx.out = out  # backward reuses the result instead of recomputing it
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return grad * ctx.output


class Log(Function):
    rule = "∂ln a/∂a = 1/a"
    formula_on_arrays = True

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        return ctx.backend.unary("log", a._array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        return grad / a


class Sqrt(Function):
    rule = "∂√a/∂a = 1/(2√a)"
    formula_on_arrays = True

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        out = ctx.backend.unary("sqrt", a._array)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return grad / (2 * ctx.output)


class Abs(Function):
    rule = "∂|a|/∂a = sign(a)"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        return ctx.backend.unary("abs", a._array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        return grad * a.sign()


class Sign(Function):
    rule = "∂sign(a)/∂a = 0 (sign is flat wherever it has a slope)"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        return ctx.backend.unary("sign", a._array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return grad * 0


class Sin(Function):
    rule = "∂sin a/∂a = cos a"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        return ctx.backend.unary("sin", a._array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        return grad * a.cos()


class Cos(Function):
    rule = "∂cos a/∂a = −sin a"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        return ctx.backend.unary("cos", a._array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        return -grad * a.sin()


class Tanh(Function):
    rule = "∂tanh a/∂a = 1 − tanh²a"
    formula_on_arrays = True

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        out = ctx.backend.unary("tanh", a._array)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        t = ctx.output
        return grad * (ctx.one - t * t)


class Sigmoid(Function):
    rule = "∂σ(a)/∂a = σ(a)·(1 − σ(a))"
    formula_on_arrays = True

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        out = ctx.backend.unary("sigmoid", a._array)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        s = ctx.output
        loops = _sigmoid_loops(s) if ctx._arrays else None  # (numpy arrays: one pass, same bits)
        fast = None if loops is None else loops.sigmoid_gradient(grad, s)
        return grad * s * (ctx.one - s) if fast is None else fast


class Relu(Function):
    rule = "∂relu(a)/∂a = 1 if a > 0 else 0"
    formula_on_arrays = True

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        ctx.save_for_backward(a)
        loops = relu_passes()  # numpy arrays: one compiled pass, numpy's bits
        out = None if loops is None else loops.relu(a._array)
        return ctx.backend.unary("relu", a._array) if out is None else out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        loops = relu_passes() if ctx._arrays else None  # (numpy arrays: one pass, same bits)
        fast = None if loops is None else loops.relu_gradient(grad, a)
        return grad * (a > 0) if fast is None else fast  # (a bool mask: True counts as 1)


def _sigmoid_loops(s):
    """The sigmoid gradient's compiled pass (``backends/sigmoid_loops.py``) for an output
    of at least ``_SIGMOID_GRADIENT_LOOP_FROM`` elements once numba is loaded (a large
    sigmoid's forward loads it), else None: below that numpy's three calls are as quick."""
    if s.size < _SIGMOID_GRADIENT_LOOP_FROM or not numba_loaded():
        return None
    return sigmoid_passes()


#: From this many elements the sigmoid's gradient takes its compiled pass (measured: the
#: pass's set-up costs about a microsecond, numpy's three calls 0.9 µs on a few elements;
#: the two cross between 256 and 512)
_SIGMOID_GRADIENT_LOOP_FROM = 512


class Maximum(Function):
    rule = "∂max(a,b)/∂a = 1 where a > b, ½ where a = b, else 0"

    @staticmethod
    def forward(ctx: Context, a, b):
        ctx.save_for_backward(a, b)
        return ctx.backend.binary("maximum", value(a), value(b))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        a, b = ctx.saved_tensors
        share_a = _winner_share(a, b, grad)
        return grad * share_a, grad * (1 - share_a)


class Minimum(Function):
    rule = "∂min(a,b)/∂a = 1 where a < b, ½ where a = b, else 0"

    @staticmethod
    def forward(ctx: Context, a, b):
        ctx.save_for_backward(a, b)
        return ctx.backend.binary("minimum", value(a), value(b))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        a, b = ctx.saved_tensors
        share_a = _winner_share(b, a, grad)
        return grad * share_a, grad * (1 - share_a)


def _winner_share(winner, loser, grad: Tensor) -> Tensor:
    """1 where ``winner > loser``, ½ on ties (the gradient is shared, as in PyTorch), else 0."""
    return (winner > loser).to(grad.dtype) + 0.5 * (winner == loser).to(grad.dtype)


class Clamp(Function):
    rule = ("∂clamp(a, lo, hi)/∂a = 1 where lo ≤ a ≤ hi, else 0;  "
            "∂/∂lo = 1 where a < lo (and lo < hi);  ∂/∂hi = 1 where a > hi (or hi < lo)")

    @staticmethod
    def forward(ctx: Context, a: Tensor, lo, hi):
        ctx.save_for_backward(a, lo, hi)
        out = a._array
        if lo is not None:
            out = ctx.backend.binary("maximum", out, value(lo))
        if hi is not None:
            out = ctx.backend.binary("minimum", out, value(hi))
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        a, lo, hi = ctx.saved_tensors
        zero = grad * 0
        inside = None  # where a passes through unchanged (PyTorch's masks)
        if lo is not None:
            inside = a >= lo
        if hi is not None:
            below_hi = a <= hi
            inside = below_hi if inside is None else (inside.long() * below_hi.long()) > 0
        da = Where.apply(inside, grad, zero)
        d_lo = d_hi = None
        if ctx.needs_input_grad[1]:
            low = a < lo
            if hi is not None:
                low = (low.long() * (lo < hi).long()) > 0
            d_lo = Where.apply(low, grad, zero)
        if ctx.needs_input_grad[2]:
            high = a > hi
            if lo is not None:
                high = (high.long() + (hi < lo).long()) > 0
            d_hi = Where.apply(high, grad, zero)
        return da, d_lo, d_hi


class Where(Function):
    rule = "∂where(c, a, b)/∂a = c,  ∂/∂b = not c"

    @staticmethod
    def forward(ctx: Context, cond: Tensor, a, b):
        ctx.cond = cond
        return ctx.backend.where(cond._array, value(a), value(b))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        zero = grad * 0
        da = Where.apply(ctx.cond, grad, zero) if ctx.needs_input_grad[1] else None
        db = Where.apply(ctx.cond, zero, grad) if ctx.needs_input_grad[2] else None
        return None, da, db

"""Layer normalisation as one Function, with the backward written out.

Composed from means, subtractions and a square root, layer norm's backward is some
twenty-five whole-array operations (autograd walks back through each). Its gradient
has a short closed form instead. With ``x̂ = (x − μ) / σ`` over the normalised
dimensions (``n`` values each), ``σ = sqrt(var + eps)`` and ``g = grad · weight``::

    ∂L/∂x = (g − mean(g) − x̂ · mean(g · x̂)) / σ

(the two means remove what moving every value, or stretching them all, would do: the
normalised output cannot feel either). ``weight`` gets ``Σ grad · x̂`` and ``bias``
``Σ grad``, summed over the leading dimensions by the engine, as for any broadcast.

On numpy arrays of one float dtype the passes are compiled loops instead
(:mod:`teachgrad.backends.layer_norm_loops`: one call forward, which walks each row
three times while it is in the cache, and two walks over the rows backward; the same
formulas, sums in float64); every other backend runs the operations written below.
"""
from __future__ import annotations

import numpy as np

from ..autograd.function import Context, Function
from ..backends.compiled_loops import loops_take
from ..tensor import Tensor


class LayerNorm(Function):
    rule = "x̂ = (x − μ)/σ:  ∂/∂x = (g − mean(g) − x̂·mean(g·x̂))/σ with g = grad·w;  ∂/∂w = Σ grad·x̂"

    @staticmethod
    def forward(ctx: Context, x: Tensor, weight: Tensor | None, bias: Tensor | None,
                axes: tuple[int, ...], eps: float):
        b, a = ctx.backend, x._array
        ctx.axes, ctx.weight = axes, weight
        weight_row, bias_row = _affine_rows(a, weight, bias, axes)
        if loops_take(a, weight_row, bias_row):
            return _forward_loops(ctx, x, weight_row, bias_row, eps)
        ctx.weight_row = None  # (backward then runs the tensor operations too)
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
        out = normalized if weight is None else b.binary("mul", normalized, weight._array)
        return out if bias is None else b.binary("add", out, bias._array)

    # On the numpy backends the engine hands backward numpy arrays (and takes arrays back):
    # the loops' gradients need no tensor around them. The formula below wraps what it gets.
    formula_on_arrays = True

    @staticmethod
    def backward(ctx: Context, grad):
        if ctx.weight_row is not None:
            if loops_take(grad if type(grad) is np.ndarray else grad._array, ctx.weight_row):
                return _backward_loops(ctx, grad)
        if type(grad) is not Tensor:  # (an array from the engine: the formula is on tensors)
            grad = Tensor._make(grad, ctx.backend, ctx.device)
        if ctx.weight_row is not None:
            _saved_as_tensors(ctx, grad)  # (a gradient the loops do not take: the formula)
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


def _affine_rows(a, weight: Tensor | None, bias: Tensor | None, axes: tuple[int, ...]):
    """``weight`` and ``bias`` as 1-D rows of the normalised values, for the loops: ones
    and zeros where absent (``x̂ · 1 + 0`` is ``x̂``); ``(None, None)`` unless ``a`` is a
    numpy array normalised over its last dimensions (the only axes ``layer_norm`` passes)."""
    if type(a) is not np.ndarray or axes != tuple(range(a.ndim - len(axes), a.ndim)):
        return None, None
    n = 1
    for size in a.shape[a.ndim - len(axes):]:  # (a plain product: np.prod costs microseconds)
        n *= size

    def row(t: Tensor | None, fill: int):
        if t is None:
            return np.full(n, fill, a.dtype)
        return t._array.reshape(-1) if type(t._array) is np.ndarray else None  # (another device)
    return row(weight, 1), row(bias, 0)


# The two functions below run the compiled loops. They keep what backward needs as plain
# arrays of rows on the context (no tensors: nothing but ``_backward_loops`` reads them),
# and write each result into one new array: this is the whole of the Python around the
# loops, a few microseconds per call, where the loops themselves take tens of them.

def _forward_loops(ctx: Context, x: Tensor, weight_row, bias_row, eps: float):
    from ..backends import layer_norm_loops as loops

    a = x._array
    rows = (a if a.flags.c_contiguous else np.ascontiguousarray(a)).reshape(-1, weight_row.shape[0])
    dtype = rows.dtype.type
    mean, inv_std = np.empty(rows.shape[0], rows.dtype), np.empty(rows.shape[0], rows.dtype)
    # (x̂ in an array of its own even without a backward to keep it for: the loop
    # vectorises only when its two outputs cannot overlap)
    normalized, out = np.empty_like(rows), np.empty_like(rows)
    loops.normalize_rows(rows, dtype(eps), dtype(1), weight_row, bias_row, mean, inv_std,
                         normalized, out)
    ctx.normalized_rows, ctx.inv_std_rows, ctx.weight_row = normalized, inv_std, weight_row
    return out.reshape(a.shape)


def _saved_as_tensors(ctx: Context, grad: Tensor) -> None:
    """The loops' saved rows as the tensors the formula in ``backward`` reads (x̂ and 1/σ
    in the input's shape), for a gradient the loops do not take."""
    shape = grad.shape
    stats_shape = (*shape[:len(shape) - len(ctx.axes)], *(1,) * len(ctx.axes))
    ctx.normalized = Tensor._make(ctx.normalized_rows.reshape(shape), ctx.backend, grad.device)
    ctx.inv_std = Tensor._make(ctx.inv_std_rows.reshape(stats_shape), ctx.backend, grad.device)


def _backward_loops(ctx: Context, grad):
    """The input's, weight's and bias's gradients by the compiled loops: numpy arrays for a
    numpy ``grad`` (the engine's usual way), tensors for a tensor (a tool watching each
    operation, such as the profiler, passes tensors)."""
    from ..backends import layer_norm_loops as loops

    on_tensors = type(grad) is not np.ndarray
    g = grad._array if on_tensors else grad
    x_hat, weight_row = ctx.normalized_rows, ctx.weight_row
    grad_rows = (g if g.flags.c_contiguous else np.ascontiguousarray(g)).reshape(x_hat.shape)
    dtype = x_hat.dtype
    means = np.empty((2, x_hat.shape[0]), dtype)  # each row's mean(g) and mean(g·x̂)
    loops.row_gradient_means(grad_rows, x_hat, weight_row, means[0], means[1])
    needs_x, needs_w, needs_b = ctx.needs_input_grad[:3]
    dx = dw = db = None
    if needs_x:
        dx = np.empty_like(grad_rows)
        loops.input_gradient(grad_rows, x_hat, weight_row, means[0], means[1], ctx.inv_std_rows, dx)
        dx = dx.reshape(g.shape)
    if needs_w or needs_b:
        affine_sums = np.empty((2, x_hat.shape[1]))  # weight's and bias's gradients (float64)
        loops.affine_gradients(grad_rows, x_hat, affine_sums)
        affine = affine_sums.astype(dtype).reshape(2, *g.shape[g.ndim - len(ctx.axes):])
        dw, db = (affine[0] if needs_w else None), (affine[1] if needs_b else None)
    if on_tensors:
        backend, device = ctx.backend, grad.device
        dx, dw, db = (None if a is None else Tensor._make(a, backend, device) for a in (dx, dw, db))
    return dx, dw, db, None, None

"""Matrix multiplication, with numpy's rules for 1-D and batched operands."""
from __future__ import annotations

import math

from ..autograd.function import Context, Function
from ..tensor import Tensor


def check_matmul_shapes(a: Tensor, b: Tensor) -> None:
    """PyTorch's message for inner dimensions that do not agree, before any work."""
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(
            f"both arguments to matmul need at least 1 dimension, but got {a.ndim}D and {b.ndim}D "
            "tensors. Fix: use * for multiplying by a scalar."
        )
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        fmt = lambda s: "x".join(str(n) for n in s)  # noqa: E731
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({fmt(a.shape)} and {fmt(b.shape)}): "
            f"the last dimension of the first ({k_a}) must equal the "
            f"{'first' if b.ndim == 1 else 'second-to-last'} dimension of the second ({k_b})."
        )
    if a.ndim > 2 and b.ndim > 2:
        from .dispatch import broadcast_shapes
        broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), "matmul (batch dimensions)")


class MatMul(Function):
    rule = "∂(A@B)/∂A = grad @ Bᵀ,  ∂(A@B)/∂B = Aᵀ @ grad"
    fresh_gradients = True  # (matrix products, or views of them, which the engine copies)

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor):
        ctx.save_for_backward(a, b)
        return ctx.backend.matmul(a._array, b._array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        a, b = ctx.saved_tensors
        # a 1-D operand acts as a row (a) or a column (b): make that explicit first,
        # and give the gradient back the matching dimensions (b's first: 1-D @ 1-D is 0-d)
        a2 = a.unsqueeze(0) if a.ndim == 1 else a
        b2 = b.unsqueeze(-1) if b.ndim == 1 else b
        g = grad.unsqueeze(-1) if b.ndim == 1 else grad
        g = g.unsqueeze(-2) if a.ndim == 1 else g
        da = db = None
        # An operand that is a transposed view (W.T in x @ W.T, as in a linear layer) gets
        # its gradient computed transposed as well: then W's own gradient comes out
        # row-major like W, instead of needing a slow transposing copy later.
        if ctx.needs_input_grad[0]:
            da = (b2 @ g.mT).mT if _is_transposed(a2) else g @ b2.mT
            da = da.squeeze(-2) if a.ndim == 1 else da
        if ctx.needs_input_grad[1]:
            db = (g.mT @ a2).mT if _is_transposed(b2) else a2.mT @ g
            db = db.squeeze(-1) if b.ndim == 1 else db
        return da, db


def _is_transposed(t: Tensor) -> bool:
    """True when ``t`` is the transpose of row-major data: its last two dims are swapped."""
    return not t.is_contiguous() and t.mT.is_contiguous()


def _as_rows(backend, x: Tensor):
    """``x`` with every leading dimension folded into rows: one large matrix product
    (numpy's matmul runs a stacked ``(B, T, C) @ (C, D)`` as B small ones, a third slower)."""
    return x._array if x.ndim == 2 else backend.reshape(x._array, (-1, x.shape[-1]))


class Linear(Function):
    """``x @ weight.T + bias`` as one operation, as PyTorch's ``linear`` is.

    The same arithmetic as the three operations it replaces (a transpose, a
    matmul, an add), but one node in the graph instead of three, and each
    gradient computed in the layout its parameter has.
    """

    rule = "y = x @ Wᵀ + b:  ∂y/∂x = grad @ W,  ∂y/∂W = gradᵀ @ x,  ∂y/∂b = Σ grad over rows"
    formula_on_arrays = True  # (operators, .reshape, .mT and .sum(0) only)
    fresh_gradients = True  # (two matrix products and a sum: new arrays, nothing else holds them)

    @staticmethod
    def forward(ctx: Context, x: Tensor, weight: Tensor, bias: Tensor | None = None):
        ctx.save_for_backward(x, weight)
        backend = ctx.backend
        out = backend.matmul(_as_rows(backend, x), backend.permute(weight._array, (1, 0)))
        if x.ndim != 2:
            out = backend.reshape(out, (*x.shape[:-1], weight.shape[0]))
        if bias is not None:
            backend.binary_inplace("add", out, bias._array)  # out is new: no copy needed
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        x, weight = ctx.saved_tensors
        needs_x, needs_w, needs_b = ctx.needs_input_grad
        # leading dimensions of x (a batch, a sequence, ...) are all rows to W
        rows = grad.reshape(-1, grad.shape[-1])
        dx = None
        if needs_x:  # (one large product for a batch of sequences too, as forward)
            dx = grad @ weight if grad.ndim == 2 else (rows @ weight).reshape(*x.shape)
        dw = rows.mT @ x.reshape(-1, x.shape[-1]) if needs_w else None
        db = None
        if needs_b:  # (on arrays through the backend, whose sum over rows may be a compiled pass)
            db = rows.sum(0) if type(rows) is Tensor else ctx.backend.reduce("sum", rows, (0,), False)
        return dx, dw, db

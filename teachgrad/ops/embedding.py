"""Embedding lookup: row ``i`` of a table for every index ``i``, with a frozen padding row."""
from __future__ import annotations

from ..autograd.function import Context, Function
from ..tensor import Tensor


class EmbeddingLookup(Function):
    """``weight[indices]``: one row of the table per index (any index shape).

    The backward adds each output row's gradient into the row it was read
    from (an index used twice collects both), except ``padding_idx``'s row,
    which gets no gradient: a padding token must stay what it is.
    """

    rule = ("out[..., :] = weight[idx[...], :]:  ∂/∂weight[r] = Σ of the gradient rows read from r "
            "(0 for padding_idx)")

    @staticmethod
    def forward(ctx: Context, weight: Tensor, indices: Tensor, padding_idx: int | None):
        ctx.shape, ctx.dtype = tuple(weight.shape), weight.dtype.numpy
        ctx.index, ctx.padding_idx = (indices._array,), padding_idx
        return ctx.backend.getitem(weight._array, ctx.index)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        backend = ctx.backend
        table = backend.index_add(ctx.shape, ctx.dtype, ctx.index, grad._array)
        if ctx.padding_idx is not None:
            backend.setitem(table, (ctx.padding_idx,), 0)
        return Tensor._make(table, backend, grad.device), None, None

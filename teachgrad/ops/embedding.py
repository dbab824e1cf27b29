"""Embedding lookup: row ``i`` of a table for every index ``i``, with a frozen padding row."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..autograd.function import Context, Function
from ..tensor import Tensor


def check_rows(backend: Any, indices: Any, rows: int) -> None:
    """Raise PyTorch's ``IndexError`` when an index is not a row of a ``rows``-row table.

    The check lives inside the operation, on its arrays, so that a traced graph keeps
    it: ``tg.compile`` and ``tg.jit.trace`` run this forward on every call, and an id
    out of range fails there exactly as it does in eager mode. (A check written with
    ``.item()`` before the operation would leave the tensor world: a graph break.)
    """
    if 0 in backend.shape(indices):
        return  # no index, nothing out of range (max and min of nothing are undefined)
    if type(indices) is np.ndarray:  # (numpy's own methods: the same numbers, fewer calls)
        low, high = int(indices.min()), int(indices.max())
    else:
        low = int(backend.to_numpy(backend.reduce("min", indices, None, False)))
        high = int(backend.to_numpy(backend.reduce("max", indices, None, False)))
    if low < 0 or high >= rows:
        raise IndexError(f"index out of range in self: index {low if low < 0 else high} is not "
                         f"a row of an embedding table with {rows} rows (0 to {rows - 1}).")


class EmbeddingLookup(Function):
    """``weight[indices]``: one row of the table per index (any index shape).

    The forward first checks that every index is a row of the table (see
    :func:`check_rows`). The backward adds each output row's gradient into the row it
    was read from (an index used twice collects both), except ``padding_idx``'s row,
    which gets no gradient: a padding token must stay what it is.
    """

    rule = ("out[..., :] = weight[idx[...], :]:  ∂/∂weight[r] = Σ of the gradient rows read from r "
            "(0 for padding_idx)")

    @staticmethod
    def forward(ctx: Context, weight: Tensor, indices: Tensor, padding_idx: int | None):
        check_rows(ctx.backend, indices._array, int(weight.shape[0]))
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

"""ONNX translation of the CPU's one-node attention (``teachgrad.ops.attention``): the
operations it fuses, written out as ONNX nodes (opset 13 has no attention operator)::

    Transpose(K) -> MatMul(Q, Kᵀ) -> Mul(scale) -> [Where(causal, ·, -inf)] -> Softmax -> MatMul(·, V)

The causal mask is made at run time from the inputs' shapes, so it follows dynamic axes:
``Range(L)`` as a column against ``Range(S)`` as a row, True where query ``i`` may see key
``j`` (``j <= i``), as ``is_causal`` means in PyTorch."""
from __future__ import annotations

from typing import Any

import numpy as np


def scaled_dot_product_attention(writer: Any, node: Any, query: Any, key: Any, value: Any,
                                 is_causal: bool, scale: float) -> None:
    rank = len(writer.meta(key).shape)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    keys_t = writer.step(node, "Transpose", [writer.name(key)], perm=perm)
    scores = writer.step(node, "MatMul", [writer.name(query), keys_t])
    scores = writer.step(node, "Mul", [scores, writer.value(scale, node)])
    if is_causal:
        queries = _positions_along(writer, node, query)
        keys = _positions_along(writer, node, key)
        column = writer.step(node, "Unsqueeze", [queries, writer.ints([1], node)])
        seen = writer.step(node, "GreaterOrEqual", [column, keys])
        scores = writer.step(node, "Where", [seen, scores, writer.value(float("-inf"), node)])
    weights = writer.step(node, "Softmax", [scores], axis=-1)
    writer.step(node, "MatMul", [weights, writer.name(value)], last=True)


def _positions_along(writer: Any, node: Any, x: Any) -> str:
    """``Range(0, n)`` for ``n`` = the run-time length of ``x``'s dimension -2."""
    shape = writer.step(node, "Shape", [writer.name(x)])
    length = writer.step(node, "Gather", [shape, writer.constant(-2, np.int64, node.name)], axis=0)
    zero, one = (writer.constant(v, np.int64, node.name) for v in (0, 1))
    return writer.step(node, "Range", [zero, length, one])

"""ONNX translation of the CPU's one-node attention (``teachgrad.ops.attention``): the
operations it fuses, written out as ONNX nodes (opset 13 has no attention operator)::

    Transpose(K) -> MatMul(Q, Kᵀ) -> Mul(scale) -> [Where(causal, ·, -inf)] -> Softmax -> MatMul(·, V)

The causal mask is a constant ``(L, S)`` boolean initializer, True where query ``i`` may
see key ``j`` (``j <= i``), as ``is_causal`` means in PyTorch."""
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
        queries, keys = writer.meta(query).shape[-2], writer.meta(key).shape[-2]
        seen = np.tril(np.ones((queries, keys), dtype=bool))
        scores = writer.step(node, "Where", [writer.constant(seen, np.bool_, node.name), scores,
                                             writer.value(float("-inf"), node)])
    weights = writer.step(node, "Softmax", [scores], axis=-1)
    writer.step(node, "MatMul", [weights, writer.name(value)], last=True)

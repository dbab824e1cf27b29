"""Scaled dot-product attention, written with the engine's own operations.

Every query asks every key "how well do we match?" (a dot product), the answers
of one query become weights that sum to one (a softmax), and the query's output
is the weighted average of the values::

    scores  = query @ key.transpose(-2, -1) * scale      # (..., L, S)
    scores  = scores + mask                              # -inf where a key must not be seen
    weights = softmax(scores, dim=-1)                     # each row sums to one
    output  = dropout(weights) @ value                    # (..., L, Ev)

It is a composition of existing operations (matmul, masked_fill, softmax,
dropout), not a Function of its own: autograd differentiates it, and it runs on
every device the operations run on. A fused kernel (FlashAttention) computes
the same numbers without ever storing the ``L x S`` score matrix; this version
stores it, which is what makes it readable. On ``cuda``, a call that the tiled kernel
``tg.kernels.flash_attention`` can compute (no mask besides ``is_causal``, no dropout,
float32/float64, values as wide as the queries) runs that kernel instead: the same
numbers without the matrix. On the CPU, a call without a mask besides ``is_causal``,
without dropout and outside autocast runs as one Function with compiled loops
(``teachgrad.ops.attention``): these numbers within rounding, in fewer passes over the
scores. A learner's plugged attention (exercise 17.1) takes precedence over both.

Semantics are PyTorch 2.13's ``F.scaled_dot_product_attention`` (the reference
implementation in its documentation):

* a boolean ``attn_mask`` says which query-key pairs **take part** (True); a float
  mask is **added** to the scores; either broadcasts against ``(..., L, S)``;
* ``is_causal`` lets query ``i`` see keys ``0..i`` only (the top-left triangle, also
  when ``L != S``); giving both a mask and ``is_causal`` is an error;
* a query row whose keys are all masked out gets zero weights and a zero output
  (PyTorch's math backend does the same), not NaN;
* ``dropout_p`` is applied whenever it is above zero (the function has no training
  flag: a layer passes ``0.0`` in evaluation);
* ``enable_gqa``: grouped-query attention, ``key``/``value`` with fewer heads
  (dimension ``-3``) than ``query``, each key head shared by a group of query heads.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import teachgrad as tg
from teachgrad.autograd import function, parts
from teachgrad.backends.compiled_loops import loops_take
from teachgrad.ops.attention import ScaledDotProductAttention
from teachgrad.tensor import Tensor

NAME = "scaled_dot_product_attention"


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """Attention of ``query (..., L, E)`` over ``key (..., S, E)`` and ``value (..., S, Ev)``;
    returns ``(..., L, Ev)``. The leading dimensions broadcast, as in ``matmul``."""
    check_attention_inputs(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
    if enable_gqa:
        key, value = share_key_heads(key, query.shape[-3]), share_key_heads(value, query.shape[-3])
    if ATTENTION.fn is not None:
        return _plugged_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    if _tiled_kernel_fits(query, key, value, attn_mask, dropout_p):
        return tg.kernels.flash_attention(query, key, value, causal=is_causal, scale=scale)
    if _cpu_loops_fit(query, key, value, attn_mask, dropout_p):
        scale_factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
        return ScaledDotProductAttention.apply(query, key, value, is_causal, scale_factor)
    weights = attention_weights(query, key, attn_mask, is_causal, scale)
    if dropout_p > 0.0:
        weights = tg.nn.functional.dropout(weights, dropout_p, training=True)
    return weights @ value


def _tiled_kernel_fits(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None,
                       dropout_p: float) -> bool:
    """Whether the tiled ``cuda`` kernel (``tg.kernels.flash_attention``) computes this call:
    on ``cuda``, float32 or float64, no mask but ``is_causal``, no dropout, values as wide as
    the queries and the same leading (batch, head) shape. It gives the same numbers without
    storing the ``L x S`` weights; every other call takes the readable path below."""
    if query.device.type != "cuda":
        return False
    from teachgrad.kernels.attention import MAX_HEAD_DIM
    return (attn_mask is None and dropout_p == 0.0
            and query.dtype in (tg.float32, tg.float64)
            and value.shape[-1] == query.shape[-1] <= MAX_HEAD_DIM
            and tuple(query.shape[:-2]) == tuple(key.shape[:-2]) == tuple(value.shape[:-2])
            and query.numel() > 0 and key.numel() > 0)


def _cpu_loops_fit(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None,
                   dropout_p: float) -> bool:
    """Whether one Function with compiled loops computes this call on the CPU
    (``teachgrad.ops.attention``): numpy arrays of one float dtype, no mask but
    ``is_causal``, no dropout, autocast off, the same leading (batch, head) shape, keys
    to attend to. The same numbers within rounding, in two passes over the score matrix
    each way instead of the composition's ten; every other call takes the readable path."""
    shape = tuple(query.shape[:-2])
    return (attn_mask is None and dropout_p == 0.0 and function.cast_policy is None
            and shape == tuple(key.shape[:-2]) == tuple(value.shape[:-2])
            and key.shape[-2] > 0 and query.numel() > 0
            and loops_take(query._array, key._array, value._array))


def attention_weights(query: Tensor, key: Tensor, attn_mask: Tensor | None = None,
                      is_causal: bool = False, scale: float | None = None) -> Tensor:
    """The ``(..., L, S)`` weights ``softmax(query @ key^T * scale + mask)``, each row summing
    to one (or zero where the mask hides every key); ``scale`` defaults to ``1/sqrt(E)``,
    which keeps the scores' spread independent of the width ``E``."""
    scale_factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    scores = (query @ key.transpose(-2, -1)) * scale_factor
    if is_causal:  # row i sees keys 0..i: never a row without a key (when there are keys)
        attn_mask = causal_mask(query.shape[-2], key.shape[-2], query.device)
        return masked_softmax(scores, attn_mask, rows_may_see_nothing=key.shape[-2] == 0)
    return masked_softmax(scores, attn_mask)


def _engine_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None,
                      is_causal: bool, scale: float | None) -> Tensor:
    return attention_weights(query, key, attn_mask, is_causal, scale) @ value


#: The part a learner's attention plugs into (``tg.exercises.plug``): every call of
#: ``scaled_dot_product_attention`` without dropout runs it, and so do
#: ``MultiheadAttention(need_weights=False)`` and the transformer encoder layers.
ATTENTION = parts.declare(
    "nn.scaled_dot_product_attention",
    receives="(query (..., L, E), key (..., S, E), value (..., S, Ev), attn_mask, is_causal, "
             "scale): attn_mask None, boolean (True = take part) or float (added); "
             "scale None means 1/sqrt(E); query, key and value already share their heads",
    returns="the (..., L, Ev) tensor softmax(query @ key^T * scale + mask) @ value",
    engine=_engine_attention)


def _plugged_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None,
                       dropout_p: float, is_causal: bool, scale: float | None) -> Tensor:
    """Attention by the learner's plugged function, its result checked before use."""
    if dropout_p > 0.0:
        raise parts.PartError(ATTENTION.name, (
            f"{ATTENTION.name} is plugged, and the plugged function computes attention without "
            f"dropout, but dropout_p={dropout_p}. Fix: dropout_p=0.0 while it is plugged "
            "(model.eval(), or a layer made with dropout=0.0)"))
    out = ATTENTION.call(query, key, value, attn_mask, is_causal, scale)
    lead = leading_shape(query, key, value, False)
    expected = (*lead, query.shape[-2], value.shape[-1])
    if not isinstance(out, Tensor):
        raise ATTENTION.reject(f"a {type(out).__name__}", f"a Tensor of shape {expected}")
    if tuple(out.shape) != expected or out.dtype is not query.dtype or out.device != query.device:
        raise ATTENTION.reject(
            f"a {out.dtype} tensor of shape {tuple(out.shape)} on {out.device}",
            f"{query.dtype}, shape {expected}, on {query.device}")
    return out


def causal_mask(queries: int, keys: int, device: Any = None) -> Tensor:
    """``(L, S)`` booleans, True on and below the diagonal: query ``i`` sees keys ``0..i``."""
    return tg.ones((queries, keys), dtype=tg.bool, device=device).tril()


def masked_softmax(scores: Tensor, attn_mask: Tensor | None,
                   rows_may_see_nothing: bool = True) -> Tensor:
    """``softmax(scores + mask)`` over the keys, with rows that see no key at all set to zero.

    A boolean mask fills the pairs that do not take part with ``-inf`` (whose
    ``exp`` is exactly 0); a float mask is added. A row of only ``-inf`` would be
    ``0/0 = NaN``: such rows are found from the mask alone (it is small) and
    given zero weights, so their gradient is zero too. That is done whether or not
    this mask has such a row (filling no element changes nothing): a branch on the
    mask's values would be baked into a traced graph. A caller that knows its mask
    leaves every row a key (the causal one) says so with ``rows_may_see_nothing=False``.
    """
    if scores.shape[-1] == 0:  # no keys: no weights (and nothing for softmax to reduce)
        return scores * 0.0
    if attn_mask is None:
        return scores.softmax(-1)
    if attn_mask.dtype is tg.bool:
        hidden = ~attn_mask
        scores = scores.masked_fill(hidden, float("-inf"))
    else:
        hidden = attn_mask == float("-inf")
        scores = scores + attn_mask.to(scores.dtype)
    if not rows_may_see_nothing:
        return scores.softmax(-1)
    dead_rows = hidden.all(-1).unsqueeze(-1)
    return scores.masked_fill(dead_rows, 0.0).softmax(-1).masked_fill(dead_rows, 0.0)


def share_key_heads(t: Tensor, query_heads: int) -> Tensor:
    """Grouped-query attention: repeat each of ``t``'s heads (dimension -3) so that
    ``query_heads // heads`` consecutive query heads share it (``repeat_interleave``)."""
    *lead, heads, length, width = t.shape
    group = query_heads // heads
    shared = t.unsqueeze(-3).expand(*lead, heads, group, length, width)
    return shared.reshape(*lead, heads * group, length, width)


# -- checks: all before any arithmetic ------------------------------------------------
def check_attention_inputs(query: Any, key: Any, value: Any, attn_mask: Any, dropout_p: Any,
                           is_causal: bool, enable_gqa: bool) -> None:
    """Refuse bad arguments with PyTorch's message where it has one, naming the fix."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{NAME}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be at least 2 dimensional, but got "
            f"query.dim: {query.ndim} key.dim: {key.ndim} and value.dim: {value.ndim} instead.")
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{query.dtype} key.dtype: {key.dtype} and value.dtype: {value.dtype} instead.")
    if not query.dtype.is_floating_point:
        raise RuntimeError(f"{NAME}: expected floating-point query, key and value, got "
                           f"{query.dtype}. Fix: convert them, e.g. query.double()")
    same_device = query.device is key.device is value.device  # (the usual case, by identity)
    if not same_device and len({str(t.device) for t in (query, key, value)}) > 1:
        raise RuntimeError(f"{NAME}: query, key and value must be on one device, got "
                           f"{query.device}, {key.device} and {value.device}. Fix: move them with .to()")
    _check_shapes(query, key, value, enable_gqa)
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)) or not 0.0 <= dropout_p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if attn_mask is not None:
        if is_causal:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not "
                               "be set when is_causal=True")
        _check_mask(attn_mask, query, key, leading_shape(query, key, value, enable_gqa))


def _check_shapes(query: Tensor, key: Tensor, value: Tensor, enable_gqa: bool) -> None:
    q, k, v = tuple(query.shape), tuple(key.shape), tuple(value.shape)
    if k[-1] != q[-1]:
        raise RuntimeError(f"{NAME}: query's last dimension ({q[-1]}) must equal key's "
                           f"({k[-1]}): each score is a dot product of a query and a key. "
                           f"Shapes: query {q}, key {k}")
    if k[-2] != v[-2]:
        raise RuntimeError(f"{NAME}: key and value must have the same sequence length "
                           f"(dimension -2): key {k}, value {v}. Fix: one value per key")
    if enable_gqa:
        _check_gqa_heads(q, k, v)
    leading_shape(query, key, value, enable_gqa)


def leading_shape(query: Tensor, key: Tensor, value: Tensor, enable_gqa: bool) -> tuple:
    """The broadcast leading (batch, head) shape of the three inputs; with ``enable_gqa``,
    key and value count as having the query's heads (they are shared out to them)."""
    q, k, v = tuple(query.shape), tuple(key.shape), tuple(value.shape)
    if enable_gqa:
        k, v = (t[:-3] + q[-3:-2] + t[-2:] for t in (k, v))
    try:
        return tuple(np.broadcast_shapes(q[:-2], k[:-2], v[:-2]))
    except ValueError:
        raise RuntimeError(f"{NAME}: the leading (batch, head) dimensions of query {q}, key "
                           f"{k} and value {v} do not broadcast") from None


def _check_gqa_heads(q: tuple, k: tuple, v: tuple) -> None:
    if min(len(q), len(k), len(v)) < 3:
        raise RuntimeError(f"{NAME}: enable_gqa=True needs a heads dimension (-3) in query, "
                           f"key and value; got shapes {q}, {k}, {v}")
    if k[-3] != v[-3] or q[-3] % k[-3] != 0:
        raise RuntimeError(
            "Number of heads in key and value must divide the number of heads in query: "
            f"query has {q[-3]} heads, key {k[-3]}, value {v[-3]}")


def _check_mask(attn_mask: Any, query: Tensor, key: Tensor, lead: tuple) -> None:
    if not isinstance(attn_mask, Tensor):
        raise TypeError(f"{NAME}(): attn_mask must be a Tensor or None, not {type(attn_mask).__name__}")
    if attn_mask.dtype is not tg.bool and not attn_mask.dtype.is_floating_point:
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
            f"attn_mask.dtype: {attn_mask.dtype} and  query.dtype: {query.dtype} instead.")
    if attn_mask.device != query.device:
        raise RuntimeError(f"{NAME}: attn_mask is on {attn_mask.device} but query on "
                           f"{query.device}. Fix: attn_mask.to({str(query.device)!r})")
    scores = tuple(lead) + (query.shape[-2], key.shape[-2])
    mask = tuple(attn_mask.shape)
    try:
        fits = np.broadcast_shapes(scores, mask) == scores
    except ValueError:
        fits = False
    if not fits:
        raise RuntimeError(f"{NAME}: attn_mask of shape {mask} does not broadcast to the "
                           f"scores' shape {scores} (..., L, S). Fix: give it shape (L, S) = "
                           f"{scores[-2:]} or one that broadcasts to {scores}")

"""The argument checks of ``MultiheadAttention`` and the transformer layers, with
PyTorch's messages (and its exception types) where it has them.

Every check runs before any arithmetic, so a wrong shape fails at once naming
both shapes, not inside a matmul three steps later.
"""
from __future__ import annotations

import warnings
from typing import Any

import teachgrad as tg
from teachgrad.tensor import Tensor


def check_mha_arguments(embed_dim: Any, num_heads: Any, dropout: Any, kdim: Any, vdim: Any) -> None:
    for name, value in (("embed_dim", embed_dim), ("num_heads", num_heads), ("kdim", kdim),
                        ("vdim", vdim)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"MultiheadAttention: {name} must be an int, got {type(value).__name__}")
    if embed_dim <= 0 or num_heads <= 0:
        raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                         f"embed_dim={embed_dim} and num_heads={num_heads} instead")
    if embed_dim % num_heads != 0:
        raise AssertionError("embed_dim must be divisible by num_heads")
    for name, value in (("kdim", kdim), ("vdim", vdim)):
        if value is not None and value <= 0:
            raise ValueError(f"MultiheadAttention: {name} must be greater than 0, got {value}")
    check_dropout_probability(dropout)


def check_dropout_probability(dropout: Any) -> None:
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout}")


def canonical_mask(mask: Tensor | None, name: str, other: Tensor | None, other_name: str,
                   dtype: Any) -> Tensor | None:
    """A boolean mask (True = ignore) as a float one (``-inf`` = ignore); a float mask as it is.
    Mixing a boolean and a float mask is allowed with PyTorch's deprecation warning."""
    if mask is None:
        return None
    check_mask_dtype(mask, name)
    if other is not None and isinstance(other, Tensor) and other.dtype is not mask.dtype:
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same "
                      "type for both instead.", stacklevel=3)
    if mask.dtype is tg.bool:
        return tg.zeros(tuple(mask.shape), dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    return mask


def check_mask_dtype(mask: Any, name: str) -> None:
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a Tensor or None, not {type(mask).__name__}")
    if mask.dtype is not tg.bool and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")


def check_mha_inputs(mha: Any, query: Any, key: Any, value: Any, key_padding_mask: Any,
                     attn_mask: Any) -> bool:
    """PyTorch's ``_mha_shape_check`` and the size checks after it; True for batched input."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"MultiheadAttention: {name} must be a Tensor, got {type(t).__name__}")
    for name, mask in (("key_padding_mask", key_padding_mask), ("attn_mask", attn_mask)):
        if mask is not None:
            check_mask_dtype(mask, name)
    if query.ndim not in (2, 3):
        raise AssertionError("query should be unbatched 2D or batched 3D tensor but received "
                             f"{query.ndim}-D query tensor")
    batched = query.ndim == 3
    kind = "batched (3-D)" if batched else "unbatched (2-D)"
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(f"For {kind} `query`, expected `key` and `value` to be {query.ndim}-D "
                             f"but found {key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise AssertionError(f"For {kind} `query`, expected `key_padding_mask` to be `None` or "
                             f"{query.ndim - 1}-D but found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None and attn_mask.ndim not in (2, 3):
        raise AssertionError(f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D "
                             f"but found {attn_mask.ndim}-D tensor instead")
    _check_sizes(mha, query, key, value, key_padding_mask, attn_mask, batched)
    return batched


def _check_sizes(mha: Any, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Any,
                 attn_mask: Any, batched: bool) -> None:
    """Feature sizes, sequence lengths, batch sizes and mask shapes agree."""
    first = mha.batch_first and batched
    batch = query.shape[0 if first else 1] if batched else 1
    length, keys = (query.shape[1], key.shape[1]) if first else (query.shape[0], key.shape[0])
    for name, t, size in (("query", query, mha.embed_dim), ("key", key, mha.kdim),
                          ("value", value, mha.vdim)):
        if t.shape[-1] != size:
            raise AssertionError(f"was expecting embedding dimension of {size} for {name}, but "
                                 f"got {t.shape[-1]} (shape {tuple(t.shape)})")
    if tuple(key.shape[:-1]) != tuple(value.shape[:-1]):
        raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:-1])} do not "
                             f"match value's {tuple(value.shape[:-1])}")
    if batched and key.shape[0 if first else 1] != batch:
        raise AssertionError(f"query has batch size {batch} but key {key.shape[0 if first else 1]} "
                             f"(batch_first={mha.batch_first}): shapes {tuple(query.shape)} and "
                             f"{tuple(key.shape)}")
    if key_padding_mask is not None and tuple(key_padding_mask.shape) != ((batch, keys) if batched else (keys,)):
        raise AssertionError(f"Expected key_padding_mask of shape {(batch, keys) if batched else (keys,)} "
                             f"(batch, source length), got {tuple(key_padding_mask.shape)}")
    if attn_mask is not None:
        expected = (length, keys) if attn_mask.ndim == 2 else (batch * mha.num_heads, length, keys)
        if tuple(attn_mask.shape) != expected:
            raise RuntimeError(f"The shape of the {attn_mask.ndim}D attn_mask is "
                               f"{tuple(attn_mask.shape)}, but should be {expected}.")
    for name, t in (("key", key), ("value", value)):
        if t.dtype is not query.dtype or t.device != query.device:
            raise RuntimeError(f"MultiheadAttention: {name} is {t.dtype} on {t.device} but query "
                               f"{query.dtype} on {query.device}. Fix: convert it with .to()")

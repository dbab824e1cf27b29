"""``nn.MultiheadAttention``: several attentions side by side, as in ``torch.nn``.

The layer projects the query, key and value with learned weights, splits the
``embed_dim`` features into ``num_heads`` heads of ``head_dim`` each, lets every
head attend on its own (``attention.py``), and joins the heads back with one more
projection (``out_proj``)::

    q, k, v  = query @ W_q^T + b_q,  key @ W_k^T + b_k,  value @ W_v^T + b_v
    q        -> (N, heads, L, head_dim)      (likewise k, v with S)
    weights  = softmax(q @ k^T / sqrt(head_dim) + masks)
    output   = out_proj(concat_heads(dropout(weights) @ v))

Parameters, their names, shapes and starting values are PyTorch's:
``in_proj_weight (3E, E)`` and ``in_proj_bias (3E,)`` (the three projections
stacked), or ``q_proj_weight``/``k_proj_weight``/``v_proj_weight`` when ``kdim`` or
``vdim`` differ from ``embed_dim``; ``out_proj.weight``/``out_proj.bias``;
``bias_k``/``bias_v`` with ``add_bias_kv``. So a PyTorch ``state_dict`` loads.

Masks follow PyTorch's (opposite to ``scaled_dot_product_attention``'s booleans):
a True in ``key_padding_mask (N, S)`` or ``attn_mask (L, S) / (N*heads, L, S)``
means *ignore this key*; a float mask is added to the scores. Both become float
masks (``-inf`` where ignored) and add up.
"""
from __future__ import annotations

import math
from typing import Any

import teachgrad as tg
from teachgrad.tensor import Tensor

from . import functional as F
from . import init
from .attention import attention_weights
from .layers import Linear
from .module import Module
from .multihead_checks import canonical_mask, check_mha_arguments, check_mha_inputs
from .parameter import Parameter


class MultiheadAttention(Module):
    """Multi-head attention (Vaswani et al., 2017) with PyTorch's arguments and parameters."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        check_mha_arguments(embed_dim, num_heads, dropout, kdim, vdim)
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.batch_first = float(dropout), bool(batch_first)
        self.head_dim = embed_dim // num_heads
        make = {"device": device, "dtype": dtype}
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(tg.empty((3 * embed_dim, embed_dim), **make))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = Parameter(tg.empty((embed_dim, embed_dim), **make))
            self.k_proj_weight = Parameter(tg.empty((embed_dim, self.kdim), **make))
            self.v_proj_weight = Parameter(tg.empty((embed_dim, self.vdim), **make))
        if bias:
            self.in_proj_bias = Parameter(tg.empty((3 * embed_dim,), **make))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, **make)
        if add_bias_kv:
            self.bias_k = Parameter(tg.empty((1, 1, embed_dim), **make))
            self.bias_v = Parameter(tg.empty((1, 1, embed_dim), **make))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = bool(add_zero_attn)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """PyTorch's start: Xavier-uniform projections, zero biases, Xavier-normal bias_k/v
        (``out_proj.weight`` keeps Linear's own start)."""
        weights = ([self.in_proj_weight] if self._qkv_same_embed_dim
                   else [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight])
        for weight in weights:
            init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for extra in (self.bias_k, self.bias_v):
            if extra is not None:
                init.xavier_normal_(extra)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"

    # -- forward --------------------------------------------------------------------
    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """``(output, weights)``: output like ``query``; weights ``(N, L, S)`` averaged over
        heads, ``(N, heads, L, S)`` with ``average_attn_weights=False``, None unless
        ``need_weights``. Shapes ``(L, N, E)``, ``(N, L, E)`` with ``batch_first``, or
        ``(L, E)`` for one unbatched sequence."""
        batched = check_mha_inputs(self, query, key, value, key_padding_mask, attn_mask)
        key_padding_mask = canonical_mask(key_padding_mask, "key_padding_mask", attn_mask,
                                          "attn_mask", query.dtype)
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                "module method `generate_square_subsequent_mask` to create this mask.")
        if is_causal and key_padding_mask is None and not need_weights:
            attn_mask = None  # the hint stands for the mask: attention builds it itself
        else:
            attn_mask = canonical_mask(attn_mask, "attn_mask", None, "", query.dtype)
            is_causal = False
        if not batched:  # one sequence is a batch of one
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:  # compute in (L, N, E), as PyTorch does
            query, key, value = _time_first(query, key, value)
        output, weights = self._attend(query, key, value, key_padding_mask, attn_mask,
                                       need_weights, is_causal)
        if need_weights and average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            return output.squeeze(1), (weights.squeeze(0) if need_weights else None)
        if self.batch_first:
            output = output.transpose(0, 1)
        return output, (weights if need_weights else None)

    def _attend(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None,
                attn_mask: Tensor | None, need_weights: bool,
                is_causal: bool) -> tuple[Tensor, Tensor | None]:
        """Inputs ``(L, N, E)``; the output ``(L, N, E)`` and the weights ``(N, heads, L, S)``
        (None unless ``need_weights``: then attention runs as scaled_dot_product_attention)."""
        length, batch, _ = query.shape
        q, k, v = self._project(query, key, value)
        if self.bias_k is not None:  # one more learned key and value for every sequence
            k = tg.cat([k, self.bias_k.expand(1, batch, self.embed_dim)])
            v = tg.cat([v, self.bias_v.expand(1, batch, self.embed_dim)])
            attn_mask, key_padding_mask = _pad_key(attn_mask), _pad_key(key_padding_mask)
        q, k, v = (self._split_heads(t, batch) for t in (q, k, v))  # (N, heads, len, head_dim)
        if self.add_zero_attn:  # one more all-zero key and value
            zeros = tg.zeros((batch, self.num_heads, 1, self.head_dim), dtype=k.dtype, device=k.device)
            k, v = tg.cat([k, zeros], 2), tg.cat([v, zeros], 2)
            attn_mask, key_padding_mask = _pad_key(attn_mask), _pad_key(key_padding_mask)
        mask = self._merged_mask(attn_mask, key_padding_mask, batch, k.shape[2])
        dropout = self.dropout if self.training else 0.0
        weights = None
        if need_weights:  # the weights are asked for: compute them here, then apply them
            weights = attention_weights(q, k, mask, is_causal, scale=math.sqrt(1.0 / self.head_dim))
            if dropout > 0.0:
                weights = F.dropout(weights, dropout, training=True)
            heads = weights @ v                                        # (N, heads, L, head_dim)
        else:
            heads = F.scaled_dot_product_attention(q, k, v, mask, dropout, is_causal,
                                                   scale=math.sqrt(1.0 / self.head_dim))
        joined = heads.permute(2, 0, 1, 3).reshape(length, batch, self.embed_dim)
        return self.out_proj(joined), weights

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The three input projections; self-attention (one tensor for all three) does them
        as one matmul with the stacked weight."""
        biases = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        if self._qkv_same_embed_dim:
            if query is key and key is value:
                return tuple(F.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, -1))
            weights = self.in_proj_weight.chunk(3)
        else:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        return tuple(F.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))

    def _split_heads(self, t: Tensor, batch: int) -> Tensor:
        """``(len, N, E)`` -> ``(N, heads, len, head_dim)``: head ``h`` owns features
        ``h*head_dim .. (h+1)*head_dim - 1``."""
        return t.reshape(t.shape[0], batch, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def _merged_mask(self, attn_mask: Tensor | None, key_padding_mask: Tensor | None, batch: int,
                     keys: int) -> Tensor | None:
        """One float mask that broadcasts to ``(N, heads, L, S)``: ``attn_mask`` (``(L, S)``
        or ``(N*heads, L, S)``) plus ``key_padding_mask`` (``(N, S)``)."""
        if attn_mask is not None and attn_mask.ndim == 3:
            attn_mask = attn_mask.reshape(batch, self.num_heads, attn_mask.shape[1], keys)
        if key_padding_mask is None:
            return attn_mask
        padding = key_padding_mask.reshape(batch, 1, 1, keys)
        return padding if attn_mask is None else attn_mask + padding


def _time_first(query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(N, L, E)`` -> ``(L, N, E)``, keeping ``query is key is value`` true where it was
    (self-attention's single projection depends on it)."""
    swapped = {id(t): t.transpose(0, 1) for t in (query, key, value)}
    return swapped[id(query)], swapped[id(key)], swapped[id(value)]


def _pad_key(mask: Tensor | None) -> Tensor | None:
    """A float mask with one more key column, 0 (seen): for bias_k or the zero key."""
    if mask is None:
        return None
    column = tg.zeros((*mask.shape[:-1], 1), dtype=mask.dtype, device=mask.device)
    return tg.cat([mask, column], -1)

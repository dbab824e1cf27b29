"""``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder``, as in ``torch.nn``.

One encoder layer is self-attention then a two-layer feed-forward network, each
wrapped in a residual connection and a LayerNorm::

    post-norm (default):  x = norm1(x + attention(x));   x = norm2(x + feed_forward(x))
    pre-norm (norm_first): x = x + attention(norm1(x));   x = x + feed_forward(norm2(x))

The encoder stacks ``num_layers`` deep copies of one layer (each with its own
weights) and applies an optional final ``norm``. Parameter names are PyTorch's
(``layers.0.self_attn.in_proj_weight``, ``layers.0.linear1.weight``...), so a
PyTorch ``state_dict`` loads.

PyTorch's inference fast path (nested tensors, which set the outputs at padded
positions to zero when no gradient is needed) is not modelled: teachgrad always
computes every position, as PyTorch does while training.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import teachgrad as tg
from teachgrad.tensor import Tensor

from . import functional as F
from .containers import ModuleList
from .layers import Dropout, Linear
from .module import Module
from .multihead_attention import MultiheadAttention
from .multihead_checks import canonical_mask, check_dropout_probability
from .norm import LayerNorm

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward network, each with a residual and a LayerNorm."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = F.relu, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        check_dropout_probability(dropout)
        if isinstance(activation, str) and activation not in ACTIVATIONS:
            raise RuntimeError(f"activation should be relu/gelu, not {activation}")
        if not isinstance(activation, str) and not callable(activation):
            raise TypeError(f"activation must be 'relu', 'gelu' or a callable, got "
                            f"{type(activation).__name__}")
        super().__init__()
        make = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **make)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **make)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **make)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **make)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **make)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = ACTIVATIONS[activation] if isinstance(activation, str) else activation

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        """``src`` ``(S, N, E)`` (``(N, S, E)`` with batch_first, ``(S, E)`` unbatched);
        masks as in :class:`MultiheadAttention` (True = ignore)."""
        check_encoder_input(src, self.self_attn.embed_dim)
        src_key_padding_mask = canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                              src_mask, "src_mask", src.dtype)
        src_mask = canonical_mask(src_mask, "src_mask", None, "", src.dtype)
        x = src
        if self.norm_first:
            x = x + self._attention_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._feed_forward_block(self.norm2(x))
        x = self.norm1(x + self._attention_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward_block(x))

    def _attention_block(self, x: Tensor, mask: Tensor | None, padding: Tensor | None,
                         is_causal: bool) -> Tensor:
        out, _ = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=padding,
                                need_weights=False, is_causal=is_causal)
        return self.dropout1(out)

    def _feed_forward_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` applied in turn, then ``norm`` if given."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        if not isinstance(encoder_layer, Module):
            raise TypeError(f"TransformerEncoder: encoder_layer must be a Module, got "
                            f"{type(encoder_layer).__name__}")
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 0:
            raise ValueError(f"TransformerEncoder: num_layers must be an int >= 0, got {num_layers!r}")
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm
        # accepted for compatibility: they steer PyTorch's inference fast path only
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool | None = None) -> Tensor:
        if self.layers:
            check_encoder_input(src, self.layers[0].self_attn.embed_dim)
        src_key_padding_mask = canonical_mask(src_key_padding_mask, "src_key_padding_mask", mask,
                                              "mask", src.dtype)
        mask = canonical_mask(mask, "mask", None, "", src.dtype)
        if is_causal is None:
            is_causal = mask is not None and is_causal_mask(mask)
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                           is_causal=is_causal)
        return output if self.norm is None else self.norm(output)


def check_encoder_input(src: Any, d_model: int) -> None:
    """``src`` is ``(S, N, d_model)``, ``(N, S, d_model)`` or ``(S, d_model)``: checked before a
    LayerNorm or a projection runs on it."""
    if not isinstance(src, Tensor):
        raise TypeError(f"src must be a Tensor, got {type(src).__name__}")
    if src.ndim not in (2, 3) or src.shape[-1] != d_model:
        raise RuntimeError(f"the encoder expects src of shape (S, N, {d_model}), (N, S, {d_model}) "
                           f"with batch_first, or (S, {d_model}) unbatched, got "
                           f"{tuple(src.shape)}. Fix: its last dimension is d_model={d_model}")


def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
    """The float causal mask: 0 on and below the diagonal, ``-inf`` above (PyTorch's
    ``Transformer.generate_square_subsequent_mask``)."""
    dtype = tg.float32 if dtype is None else dtype
    return tg.full((sz, sz), float("-inf"), dtype=dtype, device=device).triu(1)


def is_causal_mask(mask: Tensor) -> bool:
    """Whether a float ``mask`` is exactly the causal mask (PyTorch's check when the
    ``is_causal`` hint is left as None)."""
    size = mask.shape[-1]
    if tuple(mask.shape) != (size, size):
        return False
    return bool((mask == generate_square_subsequent_mask(size, mask.device, mask.dtype)).all())

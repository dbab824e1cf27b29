"""A GPT at toy size, written as plain ``tg.nn`` modules (the structure of nanoGPT).

A GPT turns a sequence of token ids into, at every position, scores (logits) for the
token that comes next::

    ids (B, T) -> token embedding + position embedding          (B, T, C)
               -> n_layer x Block:  x = x + attention(ln_1(x))   each position looks back
                                    x = x + mlp(ln_2(x))         each position thinks alone
               -> ln_f -> lm_head                                 (B, T, vocab_size)

The blocks are *pre-LayerNorm* (normalise, then attend or think, then add back): the
residual stream ``x`` itself is never normalised, which keeps deep stacks trainable.
The attention is causal (position ``t`` sees positions ``0..t`` only) and goes through
``F.scaled_dot_product_attention``: whatever attention the engine runs there -- the
reference, a learner's plugged one, the tiled kernel on ``cuda`` -- runs inside the GPT.

Parameter names follow nanoGPT (``transformer.h.0.attn.c_attn.weight``...), so the
same architecture in PyTorch loads these weights name for name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import teachgrad as tg
from teachgrad import nn
from teachgrad.nn import functional as F
from teachgrad.tensor import Tensor
from teachgrad.utils.checkpoint import checkpoint


@dataclass(frozen=True)
class GPTConfig:
    """The model's sizes. ``block_size`` is the longest context it can read."""

    vocab_size: int = 65
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True
    tie_weights: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GPTConfig: {name} must be a positive int, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig: n_embd ({self.n_embd}) must be a multiple of n_head "
                             f"({self.n_head}): each head gets n_embd // n_head channels")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig: dropout must lie in [0, 1), got {self.dropout}")


class CausalSelfAttention(nn.Module):
    """``n_head`` heads of causal self-attention over ``n_embd`` channels."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head, self.dropout = config.n_head, config.dropout
        # one matrix makes queries, keys and values at once: a single, wider matmul
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        # (B, T, C) -> (B, n_head, T, head_dim): each head attends on its own channels
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # the heads side by side again
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """Per position: widen four times, GELU, narrow back."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: attention, then MLP, each added to the stream."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Token ids ``(B, T)`` in, next-token logits ``(B, T, vocab_size)`` out."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT needs a GPTConfig, got {type(config).__name__}")
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, bias=config.bias)))
        if not config.tie_weights:  # tied: the output reuses the token embedding's table
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        #: True: each block keeps only its input for backward and runs again there
        #: (``tg.utils.checkpoint``): less memory, about one more forward of time
        self.checkpoint_blocks = False
        self._init_weights()

    def _init_weights(self) -> None:
        """GPT-2's initialisation: normal(0, 0.02) weights, zero biases, and the projections
        that write into the residual stream scaled by 1/sqrt(2 n_layer), so the stream's
        variance does not grow with depth."""
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=residual_std)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                nn.init.normal_(p, mean=0.0, std=0.02)

    def forward(self, idx: Tensor) -> Tensor:
        return self.blocks_to_logits(self.embed(idx))

    def embed(self, idx: Tensor) -> Tensor:
        """``(B, T)`` ids -> ``(B, T, C)``: each token's vector plus its position's vector."""
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"GPT: a sequence of {T} tokens is longer than block_size "
                             f"{self.config.block_size}. Fix: keep the last {self.config.block_size}")
        pos = tg.arange(T, device=idx.device)
        return self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))

    def blocks_to_logits(self, x: Tensor) -> Tensor:
        """The residual stream ``(B, T, C)`` through the blocks, the final LayerNorm and the
        head. (``tg.compile(model)`` traces :meth:`embed` and this as one graph: the
        embedding lookup checks its ids' range inside the operation, on every call.)"""
        for block in self.transformer.h:
            if self.checkpoint_blocks and self.training and tg.is_grad_enabled():
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        x = self.transformer.ln_f(x)
        if self.config.tie_weights:
            return x @ self.transformer.wte.weight.t()
        return self.lm_head(x)

    def loss(self, idx: Tensor, targets: Tensor) -> Tensor:
        """The mean cross-entropy of predicting ``targets[b, t]`` from ``idx[b, :t+1]``."""
        logits = self(idx)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

"""teachgrad.gpt's GPT written in PyTorch (nanoGPT's model.py at toy size), for the recorder
(``record_gpt.py``) and the benchmark (``benchmarks/gpt_step.py``). Never imported by the
package or its tests. Parameter names are teachgrad's, so weights copy name for name."""
from __future__ import annotations

from typing import Any

import numpy as np


def build(torch: Any, config: Any) -> Any:
    """A torch GPT of ``config`` (a teachgrad ``GPTConfig`` or anything with its fields)."""
    nn, F = torch.nn, torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.resid_dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, config.n_head, C // config.n_head).transpose(1, 2)
                       for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=config.dropout if self.training else 0.0)
            return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block() for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.n_embd, bias=config.bias)))
            if not config.tie_weights:
                self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1])
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if config.tie_weights:
                return x @ self.transformer.wte.weight.t()
            return self.lm_head(x)

        def loss(self, idx, targets):
            logits = self(idx)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return GPT()


def copy_weights(torch: Any, model: Any, weights: dict[str, np.ndarray]) -> None:
    """Set every parameter of the torch ``model`` from ``weights`` (name -> array)."""
    names = {name for name, _ in model.named_parameters()}
    if names != set(weights):
        raise KeyError(f"parameter names differ: {sorted(names ^ set(weights))}")
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.tensor(weights[name]))

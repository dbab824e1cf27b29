"""One training step of a small GPT (a transformer block, nanoGPT's shape), teachgrad vs
PyTorch on the CPU.

    python benchmarks/transformer_step.py
    python benchmarks/transformer_step.py --quick

The model is written as a PyTorch user writes it (nanoGPT's ``model.py`` at toy size):
token and position embeddings, one pre-norm block (``LayerNorm``, causal self-attention
with one fused ``Linear`` for q, k and v, ``LayerNorm``, an MLP with ``F.gelu``), a final
``LayerNorm`` and a linear head, cross-entropy against the next tokens, ``AdamW``.
Attention reads: ``q, k, v = qkv.split(C, dim=2)``, heads by ``view`` + ``transpose``,
``att = q @ k.transpose(-2, -1) * scale``, the causal mask ``tril`` of ones applied with
``masked_fill(mask == 0, -inf)``, ``softmax``, ``att @ v``.

Where teachgrad lacks one of those operations (``split``, ``tril``, ``masked_fill``), its
run uses the closest operation it has, and the result file and the table say which
(``stand_ins``): slices ``qkv[..., :C]`` for ``split``, a mask made once with numpy's
``tril`` for ``tril``, ``tg.where(mask, att, -inf)`` for ``masked_fill``. PyTorch always
runs the user's own spelling. The same code serves both libraries, so once teachgrad has
an operation, its run takes it without an edit here.

A second measurement runs the same step with attention as one call,
``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` (``result_sdpa``), in both
libraries: teachgrad's is a composition of the same engine operations.

Both libraries start from the same weights and batch and take turns, many steps per
timing; median, minimum and maximum, and the ratio teachgrad / PyTorch. One thread each
(``common.py``). Target: at most 1.2x.

With ``--clock cpu`` each timing is the CPU time of the calling thread instead of the wall
clock: on a crowded machine it leaves out the waits for a core.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from common import (  # (first: it sets one thread per library before numpy loads)
    add_clock_option, compare, header, import_torch, parse_arguments, print_table, save,
    table_columns, table_row,
)

import numpy as np  # noqa: E402

VOCAB, BLOCK, EMBED, HEADS, BATCH = 65, 64, 128, 4, 16  # nanoGPT's Shakespeare-char vocabulary
TARGET = 1.2


def has(lib: Any, method: str) -> bool:
    """Whether ``lib``'s tensors have ``method`` (teachgrad may not, yet)."""
    return hasattr(lib.Tensor, method)


def stand_ins(lib: Any) -> list[str]:
    """The user's operations this library's run replaces with the closest it has."""
    missing = [m for m in ("split", "masked_fill") if not has(lib, m)]
    return missing + ([] if hasattr(lib, "tril") else ["tril"])


def causal_mask(lib: Any) -> Any:
    """Ones on and below the diagonal, as nanoGPT registers it: ``torch.tril(torch.ones(T, T))``."""
    if hasattr(lib, "tril"):
        return lib.tril(lib.ones(BLOCK, BLOCK))
    return lib.tensor(np.tril(np.ones((BLOCK, BLOCK), np.float32)))


def split_qkv(qkv: Any, lib: Any) -> tuple[Any, Any, Any]:
    if has(lib, "split"):
        return qkv.split(EMBED, dim=2)
    return qkv[..., :EMBED], qkv[..., EMBED:2 * EMBED], qkv[..., 2 * EMBED:]


def mask_future(att: Any, mask: Any, lib: Any) -> Any:
    if has(lib, "masked_fill"):
        return att.masked_fill(mask == 0, float("-inf"))
    return lib.where(mask != 0, att, float("-inf"))


def layers(nn: Any) -> dict[str, Any]:
    """nanoGPT's modules for one block, by the names its ``GPT`` gives them."""
    return {
        "wte": nn.Embedding(VOCAB, EMBED), "wpe": nn.Embedding(BLOCK, EMBED),
        "ln_1": nn.LayerNorm(EMBED), "c_attn": nn.Linear(EMBED, 3 * EMBED),
        "attn_proj": nn.Linear(EMBED, EMBED), "ln_2": nn.LayerNorm(EMBED),
        "c_fc": nn.Linear(EMBED, 4 * EMBED), "mlp_proj": nn.Linear(4 * EMBED, EMBED),
        "ln_f": nn.LayerNorm(EMBED), "lm_head": nn.Linear(EMBED, VOCAB, bias=False),
    }


def build(lib: Any, rng: np.random.Generator) -> tuple[Any, Any]:
    """The model and AdamW, with the same weights in either library."""
    model = lib.nn.Module()
    for name, module in layers(lib.nn).items():
        setattr(model, name, module)  # registered as a submodule, as in a GPT's __init__
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.02))
    return model, lib.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)


def attention(m: Any, x: Any, mask: Any, lib: Any, sdpa: bool = False) -> Any:
    """nanoGPT's CausalSelfAttention.forward (without dropout); with ``sdpa``, its
    ``flash`` branch: ``F.scaled_dot_product_attention(q, k, v, is_causal=True)``."""
    B, T, C = x.shape
    q, k, v = split_qkv(m.c_attn(x), lib)
    k = k.view(B, T, HEADS, C // HEADS).transpose(1, 2)  # (B, nh, T, hs)
    q = q.view(B, T, HEADS, C // HEADS).transpose(1, 2)
    v = v.view(B, T, HEADS, C // HEADS).transpose(1, 2)
    if sdpa:
        y = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        att = mask_future(att, mask[:T, :T], lib)
        att = lib.nn.functional.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, hs)
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    return m.attn_proj(y)


def forward(m: Any, idx: Any, mask: Any, lib: Any, sdpa: bool = False) -> Any:
    F = lib.nn.functional
    pos = lib.arange(0, idx.shape[1])
    x = m.wte(idx) + m.wpe(pos)
    x = x + attention(m, m.ln_1(x), mask, lib, sdpa)
    x = x + m.mlp_proj(F.gelu(m.c_fc(m.ln_2(x))))
    return m.lm_head(m.ln_f(x))


def step_for(lib: Any, sdpa: bool = False) -> Any:
    rng = np.random.default_rng(0)
    model, optimizer = build(lib, rng)
    mask = causal_mask(lib)
    tokens = rng.integers(0, VOCAB, (BATCH, BLOCK + 1))
    idx, targets = lib.tensor(tokens[:, :-1]), lib.tensor(tokens[:, 1:])

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        logits = forward(model, idx, mask, lib, sdpa)
        loss = lib.nn.functional.cross_entropy(logits.view(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        optimizer.step()
    return step


def main(argv: list[str] | None = None) -> dict:
    args = parse_arguments(__doc__, argv, loops=3, repeats=21, quick=(2, 5), out="transformer_step.json",
                           extra=add_clock_option)
    torch = import_torch()
    import teachgrad
    replaced = stand_ins(teachgrad)
    run_header = header(torch)
    row = compare(step_for, torch, loops=args.loops, repeats=args.repeats, scale=1e3, unit="ms",
                  target=TARGET, clock=args.clock)
    print_table(
        f"one AdamW step of a one-block GPT (vocab {VOCAB}, block {BLOCK}, embed {EMBED}, "
        f"{HEADS} heads, batch {BATCH}), milliseconds of {args.clock} time (median; min in the "
        "last three columns)",
        table_columns(TARGET), [table_row(row, "ms")])
    row_sdpa = compare(lambda lib: step_for(lib, sdpa=True), torch, loops=args.loops,
                       repeats=args.repeats, scale=1e3, unit="ms", target=TARGET, clock=args.clock)
    print_table("the same step with attention as F.scaled_dot_product_attention(is_causal=True), "
                "milliseconds", table_columns(TARGET), [table_row(row_sdpa, "ms")])
    if replaced:
        print(f"teachgrad's run stands in for {', '.join(replaced)} (it lacks them); "
              "PyTorch runs the user's spelling")
    result = {"benchmark": "transformer_step", "header": run_header,
              "shape": {"vocab": VOCAB, "block": BLOCK, "embed": EMBED, "heads": HEADS,
                        "batch": BATCH},
              "step": "zero_grad, embeddings, pre-norm attention block with F.gelu MLP, "
                      "cross_entropy, backward, AdamW(lr=3e-4, weight_decay=0.1).step",
              "stand_ins": replaced, "loops": args.loops, "repeats": args.repeats, "clock": args.clock,
              "target_ratio": TARGET, "result": row, "result_sdpa": row_sdpa}
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()

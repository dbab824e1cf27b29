"""Writing text with a trained GPT: predict a next token, draw it, append it, repeat.

Each step reads the last ``block_size`` tokens (all the model can see), keeps the
logits of the last position only, and draws the next token from
``softmax(logits / temperature)``:

* ``temperature`` below 1 sharpens the distribution (safer, more repetitive text),
  above 1 flattens it (more surprising, more misspelt);
* ``top_k`` keeps only the ``k`` most likely tokens and gives every other one
  probability zero, so a rare slip of the model is never drawn.

:func:`sample_next` takes logits from anywhere -- the engine, or an ONNX runtime
running the exported model -- so the same draw can be repeated outside teachgrad.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad.nn import functional as F
from teachgrad.tensor import Tensor


def _check_sampling(temperature: float, top_k: int | None) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature must be a positive number, got {temperature!r}. "
                         "Fix: 1.0 samples the model's own distribution")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be None or a positive int, got {top_k!r}")


def sample_next(logits: Tensor, temperature: float = 1.0, top_k: int | None = None,
                generator: Any = None) -> Tensor:
    """One token id per row of ``logits (B, vocab_size)``, drawn as the module text says;
    returns ``(B, 1)`` int64."""
    _check_sampling(temperature, top_k)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth_largest = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    probs = F.softmax(logits, dim=-1)
    return tg.multinomial(probs, 1, generator=generator)


def next_token_logits(model: Any, idx: Tensor) -> Tensor:
    """The ``(B, vocab_size)`` logits for the token after ``idx (B, T)`` (the last
    ``block_size`` tokens are what the model reads)."""
    context = idx[:, -model.config.block_size:]
    return model(context)[:, -1, :]


@tg.no_grad()
def generate(model: Any, idx: Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, generator: Any = None,
             logits_fn: Callable[[Tensor], Tensor] | None = None) -> Tensor:
    """``idx (B, T)`` followed by ``max_new_tokens`` drawn tokens, ``(B, T + max_new_tokens)``.

    ``logits_fn(context)`` replaces the model's forward when given (e.g. an ONNX runtime
    session); it receives the last ``block_size`` tokens and returns ``(B, T, vocab)``
    logits. Runs in evaluation mode (no dropout) and restores the model's mode after.
    """
    _check_sampling(temperature, top_k)
    if not isinstance(idx, Tensor) or idx.dim() != 2 or idx.dtype is not tg.int64:
        raise ValueError("generate: idx must be an int64 tensor (batch, tokens), e.g. "
                         "vocab.encode('ROMEO:').unsqueeze(0)")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    was_training = model.training
    model.eval()
    try:
        for _ in range(max_new_tokens):
            context = idx[:, -model.config.block_size:]
            logits = (logits_fn or model)(context)[:, -1, :]
            idx = tg.cat([idx, sample_next(logits, temperature, top_k, generator).to(idx.device)], dim=1)
    finally:
        model.train(was_training)
    return idx


def padded_logits_fn(run: Callable[[Any], Any], block_size: int) -> Callable[[Tensor], Tensor]:
    """A ``logits_fn`` for :func:`generate` from a model exported at ``block_size`` tokens.

    ``run(ids)`` takes an int64 numpy array ``(B, block_size)`` and returns the logits as a
    numpy array (e.g. ``lambda ids: session.run(None, {"idx": ids})[0]`` for an
    onnxruntime session). A shorter context is padded **on the right** to ``block_size``:
    the model is causal, so the logits at position ``t`` depend on tokens ``0..t`` only and
    the padding changes none of the positions that are read back.
    """
    def logits_fn(context: Tensor) -> Tensor:
        ids = context.cpu().numpy()
        length = ids.shape[1]
        padded = np.zeros((ids.shape[0], block_size), dtype=np.int64)
        padded[:, :length] = ids
        return tg.tensor(np.asarray(run(padded))[:, :length])
    return logits_fn

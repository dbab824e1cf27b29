"""A tiny GPT, end to end: a character-level model trained on a text shipped with the package.

::

    from teachgrad import gpt
    text = gpt.load_text()                         # a slice of Shakespeare
    vocab = gpt.CharVocabulary.from_text(text)
    model = gpt.GPT(gpt.GPTConfig(vocab_size=vocab.size))
    x, y = gpt.random_batch(vocab.encode(text), batch_size=16, block_size=64)
    model.loss(x, y).backward()
    print(vocab.decode(gpt.generate(model, x[:1, :8], max_new_tokens=100)[0]))
"""
from __future__ import annotations

from .model import GPT, MLP, Block, CausalSelfAttention, GPTConfig
from .sampling import generate, next_token_logits, padded_logits_fn, sample_next
from .text import TEXTS, CharVocabulary, load_text, random_batch, split_ids

__all__ = ["GPT", "GPTConfig", "Block", "CausalSelfAttention", "MLP", "generate",
           "next_token_logits", "padded_logits_fn", "sample_next", "TEXTS", "CharVocabulary", "load_text",
           "random_batch", "split_ids"]

"""The text the GPT reads: a slice of Shakespeare shipped with the package, as numbers.

A character-level model reads one character at a time, so its vocabulary is simply
the set of characters in the text (62 here), each given the index of its place in
sorted order::

    text = load_text()                       # str, 300,174 characters
    vocab = CharVocabulary.from_text(text)
    ids = vocab.encode(text)                 # int64 tensor, one id per character
    train, val = split_ids(ids, 0.9)
    x, y = random_batch(train, batch_size=16, block_size=64)   # y is x shifted by one

Where the text comes from: ``teachgrad/gpt/texts/README.md``.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

import teachgrad as tg
from teachgrad.generator import numpy_generator
from teachgrad import random as tg_random
from teachgrad.tensor import Tensor

TEXTS = ("tinyshakespeare",)


def load_text(name: str = "tinyshakespeare") -> str:
    """One of the texts shipped with the package (``TEXTS``), as a string."""
    if name not in TEXTS:
        raise ValueError(f"load_text: no text named {name!r}; the package ships {list(TEXTS)}")
    return resources.files("teachgrad.gpt").joinpath("texts").joinpath(f"{name}.txt").read_text("ascii")


@dataclass(frozen=True)
class CharVocabulary:
    """Characters <-> integer ids: ``chars[i]`` is the character of id ``i``."""

    chars: str

    @classmethod
    def from_text(cls, text: str) -> "CharVocabulary":
        if not isinstance(text, str) or not text:
            raise ValueError("CharVocabulary.from_text needs a non-empty string")
        return cls("".join(sorted(set(text))))

    @property
    def size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> Tensor:
        """The ids of ``text``'s characters, an int64 tensor; unknown characters are an error."""
        index = {c: i for i, c in enumerate(self.chars)}
        unknown = sorted(set(text) - index.keys())
        if unknown:
            raise ValueError(f"encode: characters {unknown!r} are not in the vocabulary. "
                             "Fix: build the vocabulary from a text that contains them")
        return tg.tensor(np.array([index[c] for c in text], dtype=np.int64))

    def decode(self, ids: Any) -> str:
        """The text of a sequence of ids (a 1-D tensor, array or list)."""
        values = np.asarray(ids.tolist() if isinstance(ids, Tensor) else ids).reshape(-1)
        if values.size and (values.min() < 0 or values.max() >= self.size):
            raise ValueError(f"decode: ids must lie in 0..{self.size - 1}, got "
                             f"{values.min()}..{values.max()}")
        return "".join(self.chars[int(i)] for i in values)


def split_ids(ids: Tensor, train_fraction: float = 0.9) -> tuple[Tensor, Tensor]:
    """The first ``train_fraction`` of the ids to train on, the rest to validate on."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"split_ids: train_fraction must lie strictly between 0 and 1, got {train_fraction}")
    cut = int(len(ids) * train_fraction)
    return ids[:cut], ids[cut:]


def random_batch(ids: Tensor, batch_size: int, block_size: int, generator: Any = None,
                 device: Any = None) -> tuple[Tensor, Tensor]:
    """``batch_size`` windows of ``block_size`` ids from random places, and the same windows
    one character later: the targets, since the model predicts each next character."""
    if batch_size < 1 or block_size < 1:
        raise ValueError(f"random_batch: batch_size and block_size must be positive, got "
                         f"{batch_size} and {block_size}")
    if len(ids) <= block_size:
        raise ValueError(f"random_batch: {len(ids)} ids are too few for windows of "
                         f"{block_size} plus one target. Fix: a smaller block_size")
    rng = numpy_generator(generator, "generator") or tg_random.generator()
    starts = rng.integers(0, len(ids) - block_size, size=batch_size)
    values = ids.numpy()
    x = np.stack([values[s:s + block_size] for s in starts])
    y = np.stack([values[s + 1:s + 1 + block_size] for s in starts])
    return tg.tensor(x, device=device), tg.tensor(y, device=device)

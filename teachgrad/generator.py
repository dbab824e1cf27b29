"""``tg.Generator``: a random-number generator of its own, for code that should not
touch (or be touched by) the global one, as ``torch.Generator``::

    g = tg.Generator().manual_seed(42)
    train, test = tg.utils.data.random_split(dataset, [0.8, 0.2], generator=g)

It wraps a numpy ``Generator``: a seed gives the same numbers every run, but
not the same numbers as PyTorch's generator with that seed.
"""
from __future__ import annotations

from typing import Any

import numpy as np


class Generator:
    """A seedable source of random numbers (see the module docstring)."""

    def __init__(self, device: Any = "cpu") -> None:
        self.device = device
        self.seed()

    def manual_seed(self, seed: int) -> "Generator":
        """Restart from ``seed``; returns the generator, so it can be built in one line."""
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"manual_seed expects a non-negative int, got {seed!r}")
        self._seed = seed
        self.numpy = np.random.default_rng(seed)
        return self

    def seed(self) -> int:
        """Restart from a fresh, unpredictable seed, and return it."""
        self.manual_seed(int(np.random.SeedSequence().entropy % 2**63))
        return self._seed

    def initial_seed(self) -> int:
        """The seed this generator last started from."""
        return self._seed

    def __repr__(self) -> str:
        return f"<teachgrad.Generator seed={self._seed}>"


def numpy_generator(generator: "Generator | np.random.Generator | int | None",
                    name: str = "generator") -> np.random.Generator | None:
    """The numpy generator behind ``generator``: a :class:`Generator`, a numpy one, or an int
    seed (a new generator of its own). ``None`` stays ``None`` (meaning: the global one)."""
    if generator is None or isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, Generator):
        return generator.numpy
    if isinstance(generator, int) and not isinstance(generator, bool):
        return np.random.default_rng(generator)
    raise TypeError(f"{name} must be a tg.Generator, a numpy Generator or an int seed, "
                    f"got {type(generator).__name__}")

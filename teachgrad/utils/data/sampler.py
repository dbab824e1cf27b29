"""Samplers: which sample indices a ``DataLoader`` reads, in which order, in which batches.

A sampler is any iterable of indices (``__iter__``) that knows how many it
yields (``__len__``). The loader asks its sampler for indices and groups them
with a :class:`BatchSampler`; ``shuffle=True`` simply means a
:class:`RandomSampler`. A sampler of your own (one that splits the data
between processes, say) plugs in with ``DataLoader(..., sampler=...)``.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence, Sized

import numpy as np

from teachgrad import random as tg_random
from teachgrad.generator import numpy_generator


class Sampler:
    """Base class: yields dataset indices. Subclasses write ``__iter__`` (and ``__len__``)."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``, every epoch."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new random order every epoch (or, with ``replacement=True``, independent draws).

    ``generator`` (a ``tg.Generator``, numpy generator or int seed) makes the
    orders reproducible; without one they come from the global generator
    (``tg.manual_seed``).
    """

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator: Any = None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement!r}")
        if num_samples is not None and (not isinstance(num_samples, int)
                                        or isinstance(num_samples, bool) or num_samples <= 0):
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples!r}")
        self.data_source, self.replacement = data_source, replacement
        self._num_samples = num_samples
        self.generator = numpy_generator(generator)

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        rng = self.generator if self.generator is not None else tg_random.generator()
        n = len(self.data_source)
        if self.replacement:
            return iter(rng.integers(0, n, size=self.num_samples).tolist())
        # whole permutations, as many as num_samples needs
        rounds = -(-self.num_samples // n) if n else 0
        order = np.concatenate([rng.permutation(n) for _ in range(rounds)] or [np.arange(0)])
        return iter(order[:self.num_samples].tolist())

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices``, in a new random order every epoch."""

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        self.indices = list(indices)
        self.generator = numpy_generator(generator)

    def __iter__(self) -> Iterator[int]:
        rng = self.generator if self.generator is not None else tg_random.generator()
        return iter([self.indices[i] for i in rng.permutation(len(self.indices))])

    def __len__(self) -> int:
        return len(self.indices)


class BatchSampler(Sampler):
    """Group the indices of ``sampler`` into lists of ``batch_size`` (the last may be
    shorter, unless ``drop_last``)."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

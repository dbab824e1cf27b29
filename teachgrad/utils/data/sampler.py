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
from teachgrad.tensor import tensor


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


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices into ``weights``, index ``i`` drawn with probability
    ``weights[i] / sum(weights)`` (the weights need not sum to 1).

    With ``replacement=True`` (the default) every draw is independent: a uniform number
    on ``[0, sum)`` picks the index whose slice of the running sum it falls in. Without
    replacement an index, once drawn, is out of later draws; the order is the one
    repeated weighted draws without putting back would give, found at once by sorting
    ``weight / E`` (largest first), ``E`` exponential draws ("exponential races", as
    PyTorch's ``multinomial``). Indices of weight 0 come only after every other one.
    Bad weights are refused here, before any drawing, with ``torch.multinomial``'s errors.
    """

    def __init__(self, weights: Any, num_samples: int, replacement: bool = True,
                 generator: Any = None) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        values = _weights_array(weights)
        _check_distribution(values, num_samples, replacement)
        self.weights = tensor(values)  # float64, as PyTorch keeps them
        self.num_samples, self.replacement = num_samples, replacement
        self.generator = numpy_generator(generator)

    def __iter__(self) -> Iterator[int]:
        rng = self.generator if self.generator is not None else tg_random.generator()
        weights = self.weights.numpy()
        if self.replacement:
            running = np.cumsum(weights)
            picks = rng.random(self.num_samples) * running[-1]
            drawn = np.searchsorted(running, picks, side="right")  # weight 0: an empty slice
        else:
            races = rng.exponential(size=weights.size)
            # largest weight / time first; among weight 0, random order (by the times)
            drawn = np.lexsort((races, -(weights / races)))[:self.num_samples]
        return iter(drawn.tolist())

    def __len__(self) -> int:
        return self.num_samples


def _weights_array(weights: Any) -> np.ndarray:
    """``weights`` (a sequence, numpy array or tensor) as a 1-D float64 numpy array."""
    if hasattr(weights, "detach") and hasattr(weights, "numpy"):  # a tensor
        weights = weights.detach().cpu().numpy()
    try:
        values = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"weights must be a sequence of numbers, got {type(weights).__name__} "
                        f"({e})") from None
    if values.ndim != 1:
        raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                         f"{tuple(values.shape)}")
    return values


def _check_distribution(weights: np.ndarray, num_samples: int, replacement: bool) -> None:
    """The checks of ``torch.multinomial``, with its messages (and the fix)."""
    if not replacement and num_samples > weights.size:
        raise RuntimeError(f"cannot sample n_sample > prob_dist.size(-1) samples without "
                           f"replacement ({num_samples} from {weights.size} weights). Fix: "
                           "replacement=True, or a smaller num_samples")
    if np.isnan(weights).any() or (weights < 0).any():
        raise RuntimeError("invalid multinomial distribution (encountering probability entry "
                           "< 0): every weight must be a non-negative number")
    if np.isinf(weights).any():
        raise RuntimeError("invalid multinomial distribution (encountering probability entry "
                           "= infinity or NaN)")
    if weights.sum() <= 0:
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0): at "
                           "least one weight must be positive")


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

"""Datasets: anything with ``len(dataset)`` and ``dataset[i]`` (one sample)."""
from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

from teachgrad import random as tg_random
from teachgrad.generator import numpy_generator
from teachgrad.tensor import Tensor


class Dataset:
    """Anything with ``__len__`` and ``__getitem__(index)`` returning one sample."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class TensorDataset(Dataset):
    """Samples are rows: ``dataset[i]`` is ``(X[i], y[i])`` for ``TensorDataset(X, y)``."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset takes tensors, got {type(t).__name__}. "
                                "Fix: convert it with tg.tensor(...).")
        sizes = [t.shape[0] if t.ndim > 0 else None for t in tensors]
        if None in sizes or len(set(sizes)) != 1:
            shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
            raise ValueError(
                f"Size mismatch between tensors: every tensor must have the same size in its "
                f"first dimension (one row per sample), got shapes {shapes}"
            )
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = list(indices)

    def __getitem__(self, index: int) -> Any:
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


def _counts(n: int, lengths: Sequence[int | float]) -> list[int]:
    """``lengths`` as sample counts; fractions (summing to 1) share out the remainder."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, fraction in enumerate(lengths):
            if not 0 <= fraction <= 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        counts = [int(math.floor(n * fraction)) for fraction in lengths]
        for i in range(n - sum(counts)):  # hand out the remainder one by one, round-robin
            counts[i % len(counts)] += 1
        for i, count in enumerate(counts):
            if count == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              "empty dataset.", UserWarning, stacklevel=3)
        return counts
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in lengths):
        raise ValueError(f"lengths must be non-negative ints (sample counts) or fractions "
                         f"summing to 1, got {list(lengths)}")
    return list(lengths)


def random_split(dataset: Dataset, lengths: Sequence[int | float], generator: Any = None) -> list[Subset]:
    """Split ``dataset`` at random into non-overlapping pieces of the given lengths
    (sample counts, or fractions that sum to 1), as ``torch.utils.data.random_split``."""
    n = len(dataset)
    counts = _counts(n, lengths)
    if sum(counts) != n:
        raise ValueError(
            f"Sum of input lengths ({sum(counts)}) does not equal the length of the input dataset ({n})"
        )
    rng = numpy_generator(generator) or tg_random.generator()
    order = rng.permutation(n).tolist()
    pieces, start = [], 0
    for count in counts:
        pieces.append(Subset(dataset, order[start:start + count]))
        start += count
    return pieces

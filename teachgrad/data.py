"""Small data sets made on the spot, and a ``DataLoader`` that cuts them into batches.

Nothing here downloads anything. The ``make_*`` functions draw a synthetic set
with numpy and return teachgrad tensors ``X`` (float32, one row per sample)
and ``y`` (int64 class labels, or float32 targets for regression). Without a
``seed`` they draw from teachgrad's global generator, so ``tg.manual_seed``
makes them reproducible too.

``TensorDataset`` and ``DataLoader`` follow ``torch.utils.data``::

    X, y = make_moons(200, noise=0.1, seed=0)
    loader = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)
    for xb, yb in loader:
        ...
"""
from __future__ import annotations

import math
from typing import Any, Iterator, Sequence

import numpy as np

import teachgrad as tg
from teachgrad import random as tg_random
from teachgrad.tensor import Tensor


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    """A numpy generator: seeded, given, or teachgrad's global one."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return tg_random.generator()
    return np.random.default_rng(seed)


def _as_tensors(X: np.ndarray, y: np.ndarray) -> tuple[Tensor, Tensor]:
    y_dtype = tg.int64 if y.dtype.kind in "iu" else tg.float32
    return tg.tensor(X.astype(np.float32)), tg.tensor(y, dtype=y_dtype)


def _shuffled(rng: np.random.Generator, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = rng.permutation(len(X))
    return X[order], y[order]


def make_moons(
    n_samples: int = 100, noise: float = 0.0, seed: int | None = None, shuffle: bool = True
) -> tuple[Tensor, Tensor]:
    """Two interleaving half circles in 2-D: class 0 on top, class 1 below.

    Not separable by a straight line, easy for a small MLP. ``noise`` is the
    standard deviation of Gaussian noise added to every coordinate.
    """
    rng = _rng(seed)
    n_top = n_samples // 2
    n_bottom = n_samples - n_top
    angle_top = np.linspace(0, np.pi, n_top)
    angle_bottom = np.linspace(0, np.pi, n_bottom)
    top = np.stack([np.cos(angle_top), np.sin(angle_top)], axis=1)
    bottom = np.stack([1 - np.cos(angle_bottom), 0.5 - np.sin(angle_bottom)], axis=1)
    X = np.concatenate([top, bottom])
    y = np.concatenate([np.zeros(n_top, np.int64), np.ones(n_bottom, np.int64)])
    if noise > 0:
        X = X + rng.normal(0.0, noise, size=X.shape)
    if shuffle:
        X, y = _shuffled(rng, X, y)
    return _as_tensors(X, y)


def make_spirals(
    n_samples: int = 300, n_classes: int = 3, noise: float = 0.2, seed: int | None = None,
    shuffle: bool = True,
) -> tuple[Tensor, Tensor]:
    """``n_classes`` spiral arms in 2-D, winding around the origin (the CS231n set).

    Points of class ``k`` lie at radius ``r`` in ``[0, 1]`` and angle
    ``4 * (k + r)`` plus Gaussian ``noise`` on the angle.
    """
    if n_classes < 1:
        raise ValueError(f"n_classes must be at least 1, got {n_classes}")
    rng = _rng(seed)
    points, labels = [], []
    for k in range(n_classes):
        count = n_samples // n_classes + (1 if k < n_samples % n_classes else 0)
        radius = np.linspace(0.0, 1.0, count)
        angle = 4.0 * (k + radius) + rng.normal(0.0, noise, size=count)
        points.append(np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1))
        labels.append(np.full(count, k, dtype=np.int64))
    X, y = np.concatenate(points), np.concatenate(labels)
    if shuffle:
        X, y = _shuffled(rng, X, y)
    return _as_tensors(X, y)


def make_regression(
    n_samples: int = 100, n_features: int = 1, noise: float = 0.1, bias: float = 0.0,
    seed: int | None = None, return_coef: bool = False,
) -> tuple[Tensor, ...]:
    """A linear regression problem: ``y = X @ coef + bias + noise * N(0, 1)``.

    ``X`` is standard normal of shape ``(n_samples, n_features)``, ``y`` is float32
    of shape ``(n_samples,)``. With ``return_coef`` the true ``coef`` (shape
    ``(n_features,)``) comes third, so a lesson can compare it with what was learned.
    """
    rng = _rng(seed)
    X = rng.normal(size=(n_samples, n_features))
    coef = rng.uniform(-2.0, 2.0, size=n_features)
    y = X @ coef + bias + noise * rng.normal(size=n_samples)
    X_t, y_t = tg.tensor(X.astype(np.float32)), tg.tensor(y.astype(np.float32))
    if return_coef:
        return X_t, y_t, tg.tensor(coef.astype(np.float32))
    return X_t, y_t


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
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(
    dataset: Dataset, lengths: Sequence[int | float], generator: int | np.random.Generator | None = None
) -> list[Subset]:
    """Split ``dataset`` at random into pieces of the given lengths (or fractions summing to 1)."""
    n = len(dataset)
    if all(isinstance(x, float) for x in lengths) and math.isclose(sum(lengths), 1.0):
        counts = [int(math.floor(n * fraction)) for fraction in lengths]
        for i in range(n - sum(counts)):  # hand out the remainder one by one
            counts[i % len(counts)] += 1
    else:
        counts = [int(x) for x in lengths]
    if sum(counts) != n:
        raise ValueError(
            f"Sum of input lengths ({sum(counts)}) does not equal the length of the input dataset ({n})"
        )
    order = _rng(generator).permutation(n).tolist()
    pieces, start = [], 0
    for count in counts:
        pieces.append(Subset(dataset, order[start:start + count]))
        start += count
    return pieces


def default_collate(samples: list[Any]) -> Any:
    """Stack a list of samples into one batch: tensors are stacked, numbers become a tensor."""
    first = samples[0]
    if isinstance(first, Tensor):
        return tg.stack(samples)
    if isinstance(first, (int, float, bool, np.number)):
        return tg.tensor(samples)
    if isinstance(first, dict):
        return {key: default_collate([s[key] for s in samples]) for key in first}
    if isinstance(first, (tuple, list)):
        return type(first)(default_collate(list(column)) for column in zip(*samples))
    raise TypeError(f"default_collate cannot batch samples of type {type(first).__name__}")


class DataLoader:
    """Iterate over a dataset in batches, optionally in a new random order every epoch.

    Args:
        dataset: a :class:`TensorDataset` (fast path: one indexing per tensor per batch)
            or any :class:`Dataset`.
        batch_size: samples per batch.
        shuffle: draw a fresh random order at the start of every epoch.
        drop_last: skip the last batch if it is smaller than ``batch_size``.
        generator: a seed (int) or a ``numpy.random.Generator`` for the shuffling;
            by default teachgrad's global generator (see ``tg.manual_seed``).
    """

    def __init__(
        self, dataset: Dataset, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False,
        generator: int | np.random.Generator | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size!r}"
            )
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        # A seed becomes one private generator, so every epoch still gets a new order.
        self.generator = None if generator is None else _rng(generator)

    def __len__(self) -> int:
        """The number of batches per epoch."""
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def _order(self) -> np.ndarray:
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        rng = self.generator if self.generator is not None else tg_random.generator()
        return rng.permutation(n)

    def __iter__(self) -> Iterator[Any]:
        order = self._order()
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield self._fetch(batch)

    def _fetch(self, indices: np.ndarray) -> Any:
        if isinstance(self.dataset, TensorDataset):
            index = indices.astype(np.int64)
            return tuple(t[tg.tensor(index, device=t.device)] for t in self.dataset.tensors)
        return default_collate([self.dataset[int(i)] for i in indices])

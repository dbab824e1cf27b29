"""Small data sets made on the spot, and a ``DataLoader`` that cuts them into batches.

Nothing here downloads anything. The ``make_*`` functions draw a synthetic set
with numpy and return teachgrad tensors ``X`` (float32, one row per sample)
and ``y`` (int64 class labels, or float32 targets for regression). Without a
``seed`` they draw from teachgrad's global generator, so ``tg.manual_seed``
makes them reproducible too.

``TensorDataset``, ``DataLoader`` and the rest of ``tg.utils.data`` are
re-exported here, so either import works::

    X, y = make_moons(200, noise=0.1, seed=0)
    loader = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)
    for xb, yb in loader:
        ...
"""
from __future__ import annotations

import numpy as np

import teachgrad as tg
from teachgrad import random as tg_random
from teachgrad.generator import Generator, numpy_generator
from teachgrad.tensor import Tensor
from teachgrad.utils.data import (  # noqa: F401  (re-exported: tg.data.DataLoader works too)
    BatchSampler, DataLoader, Dataset, RandomSampler, Sampler, SequentialSampler, Subset,
    SubsetRandomSampler, TensorDataset, default_collate, random_split,
)
from teachgrad.utils.data import WeightedRandomSampler  # noqa: F401


def _rng(seed: int | np.random.Generator | Generator | None) -> np.random.Generator:
    """A numpy generator: seeded, given, or teachgrad's global one."""
    return numpy_generator(seed, "seed") or tg_random.generator()


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

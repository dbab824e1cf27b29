"""Random numbers: one global generator, seeded by ``tg.manual_seed``.

Values are drawn on the host with numpy and then copied to the tensor's device,
so a seed gives the same numbers on ``cpu`` and ``cuda``.
"""
from __future__ import annotations

import numpy as np

from .dtypes import DType

_generator = np.random.default_rng()


def manual_seed(seed: int) -> np.random.Generator:
    """Make every later random tensor reproducible."""
    global _generator
    _generator = np.random.default_rng(seed)
    return _generator


def generator() -> np.random.Generator:
    return _generator


def uniform_array(shape: tuple, low: float, high: float, dtype: DType) -> np.ndarray:
    return _generator.uniform(low, high, size=shape).astype(dtype.numpy)


def normal_array(shape: tuple, mean: float, std: float, dtype: DType) -> np.ndarray:
    return _generator.normal(mean, std, size=shape).astype(dtype.numpy)


def integers_array(shape: tuple, low: int, high: int) -> np.ndarray:
    return _generator.integers(low, high, size=shape, dtype=np.int64)


def permutation(n: int) -> np.ndarray:
    return _generator.permutation(n)

"""Random numbers: one global generator, seeded by ``tg.manual_seed``, or the
``tg.Generator`` a call is given (``generator=``, as in PyTorch).

Values are drawn on the host with numpy and then copied to the tensor's device,
so a seed gives the same numbers on ``cpu`` and ``cuda``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import DType
from .generator import numpy_generator

_generator = np.random.default_rng()


def manual_seed(seed: int) -> np.random.Generator:
    """Make every later random tensor reproducible."""
    global _generator
    _generator = np.random.default_rng(seed)
    return _generator


def generator(chosen: Any = None) -> np.random.Generator:
    """The numpy generator to draw from: ``chosen``'s (a ``tg.Generator``) or the global one."""
    return numpy_generator(chosen) or _generator


def uniform_array(shape: tuple, low: float, high: float, dtype: DType,
                  chosen: Any = None) -> np.ndarray:
    return generator(chosen).uniform(low, high, size=shape).astype(dtype.numpy)


def normal_array(shape: tuple, mean: float, std: float, dtype: DType,
                 chosen: Any = None) -> np.ndarray:
    return generator(chosen).normal(mean, std, size=shape).astype(dtype.numpy)


def integers_array(shape: tuple, low: int, high: int, chosen: Any = None) -> np.ndarray:
    return generator(chosen).integers(low, high, size=shape, dtype=np.int64)


def permutation(n: int, chosen: Any = None) -> np.ndarray:
    return generator(chosen).permutation(n)

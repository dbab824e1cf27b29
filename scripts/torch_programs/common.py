"""What the programs share: start weights drawn from numpy, the same in both libraries."""
from __future__ import annotations

from typing import Any

import numpy as np


def set_weights(torch: Any, model: Any, seed: int) -> None:
    """Overwrite every parameter of ``model`` with numbers drawn from numpy's ``seed``.

    Weight matrices get PyTorch's default scale (uniform in ±1/sqrt(fan_in)); vectors
    (biases, norm scales) small values around their usual start. A parameter shared by
    two modules (tied weights) is set once.
    """
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            shape = tuple(p.shape)
            if len(shape) >= 2:
                bound = 1 / np.sqrt(np.prod(shape[1:]))
                values = rng.uniform(-bound, bound, shape)
            elif name.endswith("weight"):  # a norm layer's scale
                values = 1 + 0.1 * rng.standard_normal(shape)
            else:
                values = 0.1 * rng.standard_normal(shape)
            p.copy_(torch.from_numpy(values.astype(np.float32)))


def images(seed: int, n: int, channels: int, size: int) -> np.ndarray:
    """A batch of image-like float32 data in [0, 1)."""
    return np.random.default_rng(seed).random((n, channels, size, size), dtype=np.float32)


def labels(seed: int, n: int, classes: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, classes, n)

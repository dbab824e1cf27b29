"""Drawing from distributions a tensor describes: ``multinomial`` and ``bernoulli``.

As every random function in teachgrad, they draw on the host from the global
generator (``tg.manual_seed``) or from the ``tg.Generator`` passed as
``generator=``, then copy the result to the tensor's device. A seed reproduces
teachgrad's numbers, not PyTorch's (the two use different generators).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import random as _random
from ..tensor import Tensor
from .counting import host as _host, on_device as _on_device
from .dispatch import check_pointwise


def check_random_fill(name: str, t: Tensor, numbers: dict[str, Any]) -> None:
    """The arguments of ``uniform_``/``normal_``: a float tensor, numbers for the rest."""
    if not t.dtype.is_floating_point:  # (PyTorch's class for a dtype a kernel lacks)
        raise NotImplementedError(f"{name} is only implemented for floating point tensors, "
                                  f"not {t.dtype}. Fix: make it float, e.g. tg.empty(3).{name}()")
    check_pointwise(name, {}, numbers)


# -- multinomial ----------------------------------------------------------------------------


def _check_multinomial(input: Tensor, num_samples: Any, replacement: bool) -> np.ndarray:  # noqa: A002
    """PyTorch's checks, in its order; returns the probabilities as float64 rows."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial(): argument 'input' must be a Tensor, not {type(input).__name__}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int):
        raise TypeError(f"multinomial(): argument 'num_samples' must be an int, not "
                        f"{type(num_samples).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{input.dtype}. Fix: pass weights as floats, e.g. w.float()")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"prob_dist must be 1 or 2 dim, got {input.ndim}")
    if num_samples <= 0:
        raise RuntimeError(f"cannot sample n_sample <= 0 samples (got {num_samples})")
    categories = input.shape[-1]
    if not replacement and num_samples > categories:
        raise RuntimeError(f"cannot sample n_sample > prob_dist.size(-1) samples without "
                           f"replacement ({num_samples} > {categories}). Fix: replacement=True")
    rows = _host(input).astype(np.float64).reshape(-1, categories)
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if np.any(rows.sum(axis=1) <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    return rows


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,  # noqa: A002
                generator: Any = None) -> Tensor:
    """Draw ``num_samples`` category indices per row, each with probability proportional
    to its weight in ``input`` (1-D: one row; 2-D: one row per distribution).

    Without replacement each category is drawn at most once: every category gets a
    key ``weight / E`` with ``E`` exponential(1), and the largest keys win, which is
    drawing one at a time in proportion to the weights that are left (as PyTorch does).
    """
    rows = _check_multinomial(input, num_samples, replacement)
    rng = _random.generator(generator)
    drawn = np.empty((rows.shape[0], num_samples), np.int64)
    for i, weights in enumerate(rows):
        if replacement:
            drawn[i] = rng.choice(len(weights), size=num_samples, p=weights / weights.sum())
        else:
            with np.errstate(divide="ignore"):
                keys = weights / rng.exponential(size=len(weights))
            drawn[i] = np.argsort(-keys, kind="stable")[:num_samples]
    return _on_device(drawn.reshape(tuple(input.shape[:-1]) + (num_samples,)), input)


# -- bernoulli -------------------------------------------------------------------------------


def bernoulli_array(like: Tensor, p: Any, generator: Any) -> np.ndarray:
    """1 with probability ``p`` (a number, or a tensor broadcasting to ``like``), else 0,
    as a host array of ``like``'s shape and dtype."""
    if isinstance(p, Tensor):
        probability = _host(p).astype(np.float64)
        if not np.all((probability >= 0) & (probability <= 1)):
            raise RuntimeError("bernoulli: expected all elements of p to be in [0, 1]. "
                               "Fix: clamp them, e.g. p.clamp(0, 1)")
        probability = np.broadcast_to(probability, tuple(like.shape))
    elif isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1 or math.isnan(p):
        raise RuntimeError(f"bernoulli expects p in [0, 1], got {p!r} "
                           "(Expected p_in >= 0 && p_in <= 1 to be true, but got false)")
    else:
        probability = float(p)
    uniform = _random.generator(generator).random(size=tuple(like.shape))
    return (uniform < probability).astype(like.dtype.numpy)


def bernoulli(input: Tensor, p: Any = None, *, generator: Any = None) -> Tensor:  # noqa: A002
    """1 where a draw succeeds, with probability ``input`` per element (or the number
    ``p`` everywhere), else 0; same shape and dtype as ``input``. Not differentiable."""
    if not isinstance(input, Tensor):
        raise TypeError(f"bernoulli(): argument 'input' must be a Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"bernoulli is only implemented for floating point probabilities, "
                           f"not {input.dtype}. Fix: convert with .float()")
    return _on_device(bernoulli_array(input, input if p is None else p, generator), input)

"""Kernel density estimates over a search space, the model BOHB samples from.

A configuration becomes a vector with one number per searched hyperparameter:

* a real number (``uniform``, ``loguniform``, ``randint``) becomes a position in
  ``[0, 1]``: ``loguniform`` in log space, so 1e-3 -> 1e-2 is as far as 0.1 -> 1;
  ``randint(low, high)`` as the centre of its value's bin, each integer owning an
  equal slice of ``[0, 1]``;
* a ``choice`` becomes the index of the option.

A product KDE puts one kernel on every observed vector, a product over dimensions:
a Gaussian of bandwidth ``h`` for a real dimension, the Aitchison-Aitken kernel for
a choice among ``c`` options (the observed option with probability ``1 - λ``, each
other one with ``λ / (c - 1)``). Bandwidths follow the normal reference rule, as
statsmodels' ``KDEMultivariate(bw="normal_reference")`` that HpBandSter uses.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .space import Choice, Distribution, LogUniform, RandInt, Uniform

MODELLED = (Uniform, LogUniform, RandInt, Choice)


def searched_names(space: dict) -> list[str]:
    """The hyperparameters a model describes: every distribution (fixed values are not searched)."""
    return [name for name, d in space.items() if isinstance(d, Distribution)]


def n_choices(space: dict) -> np.ndarray:
    """Per searched dimension: the number of options of a choice, or 0 for a real number."""
    return np.array([len(d.options) if isinstance(d, Choice) else 0
                     for d in space.values() if isinstance(d, Distribution)], dtype=int)


def _position(d: Distribution, value: float) -> float:
    """Where ``value`` sits in ``[0, 1]`` for a real-valued distribution."""
    if isinstance(d, RandInt):
        return (value - d.low + 0.5) / (d.high - d.low)
    low, high, value = d.low, d.high, value
    if isinstance(d, LogUniform):
        low, high, value = math.log(low), math.log(high), math.log(value)
    return 0.5 if high == low else (value - low) / (high - low)


def _option_index(options: tuple, value: object) -> int:
    for i, option in enumerate(options):
        if option is value:
            return i
    return options.index(value)


def encode(space: dict, config: dict) -> np.ndarray:
    """A configuration drawn from ``space`` as a vector (one entry per searched name)."""
    vector = []
    for name in searched_names(space):
        d = space[name]
        if isinstance(d, Choice):
            vector.append(float(_option_index(d.options, config[name])))
        else:
            vector.append(_position(d, config[name]))
    return np.array(vector, dtype=float)


def _value(d: Distribution, u: float) -> object:
    """The value at position ``u`` of a real-valued distribution (inverse of :func:`_position`)."""
    u = min(max(float(u), 0.0), 1.0)
    if isinstance(d, RandInt):
        width = d.high - d.low
        return d.low + min(int(u * width), width - 1)
    if isinstance(d, LogUniform):
        value = math.exp(math.log(d.low) + u * (math.log(d.high) - math.log(d.low)))
    else:
        value = d.low + u * (d.high - d.low)
    return min(max(value, d.low), d.high)  # exp(log(x)) may step out by an ulp


def decode(space: dict, vector: np.ndarray) -> dict:
    """The configuration a vector stands for; fixed values of the space are kept as they are."""
    config, position = {}, iter(vector)
    for name, d in space.items():
        if not isinstance(d, Distribution):
            config[name] = d
        elif isinstance(d, Choice):
            config[name] = d.options[int(round(next(position)))]
        else:
            config[name] = _value(d, next(position))
    return config


@dataclass(frozen=True)
class ProductKDE:
    """One kernel per row of ``data``; ``bandwidth[j]`` is ``h`` (real) or ``λ`` (choice)."""

    data: np.ndarray        # (n, d) encoded observations
    bandwidth: np.ndarray   # (d,)
    choices: np.ndarray     # (d,) options per dimension, 0 for a real one

    def log_pdf(self, points: np.ndarray) -> np.ndarray:
        """log of the density at each row of ``points`` (m, d), computed in logs so that a
        product of many small kernels does not underflow to 0."""
        points = np.atleast_2d(points)
        log_kernel = np.zeros((points.shape[0], self.data.shape[0]))  # (m, n): point x kernel
        for j, (h, c) in enumerate(zip(self.bandwidth, self.choices)):
            x, centres = points[:, j, None], self.data[None, :, j]
            if c == 0:
                log_kernel += -0.5 * ((x - centres) / h) ** 2 - math.log(h * math.sqrt(2 * math.pi))
            else:
                with np.errstate(divide="ignore"):
                    same, other = np.log(1.0 - h), np.log(h / (c - 1) if c > 1 else 0.0)
                log_kernel += np.where(np.rint(x) == np.rint(centres), same, other)
        top = log_kernel.max(axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        with np.errstate(divide="ignore"):
            summed = np.log(np.exp(log_kernel - top).sum(axis=1)) + top[:, 0]
        return summed - math.log(self.data.shape[0])

    def sample(self, rng: np.random.Generator, n: int, bandwidth_factor: float) -> np.ndarray:
        """``n`` draws from the KDE with its real bandwidths widened ``bandwidth_factor`` times
        (BOHB's l'(x)): pick an observation, then move each coordinate by its kernel. A real
        coordinate is a Gaussian cut to ``[0, 1]`` (drawn again until it lands inside)."""
        centres = self.data[rng.integers(self.data.shape[0], size=n)]
        out = np.empty_like(centres)
        for j, (h, c) in enumerate(zip(self.bandwidth, self.choices)):
            m = centres[:, j]
            if c == 0:
                out[:, j] = _truncated_normal(rng, m, h * bandwidth_factor)
            else:
                out[:, j] = _aitchison_aitken(rng, m, h, int(c))
        return out


def _truncated_normal(rng: np.random.Generator, mean: np.ndarray, scale: float) -> np.ndarray:
    draws = rng.normal(mean, scale)
    outside = (draws < 0) | (draws > 1)
    while outside.any():  # a centre in [0, 1] keeps at least ~1/5 of a kernel of scale <= 2 inside
        draws[outside] = rng.normal(mean[outside], scale)
        outside = (draws < 0) | (draws > 1)
    return draws


def _aitchison_aitken(rng: np.random.Generator, observed: np.ndarray, lam: float,
                      c: int) -> np.ndarray:
    """Keep the observed option with probability 1 - λ, else one of the c - 1 others, uniformly."""
    observed = np.rint(observed).astype(int)
    if c == 1:
        return observed.astype(float)
    other = rng.integers(c - 1, size=observed.shape)
    other = other + (other >= observed)  # skip the observed option
    move = rng.random(observed.shape) < lam
    return np.where(move, other, observed).astype(float)


def fit_kde(data: np.ndarray, choices: np.ndarray, min_bandwidth: float) -> ProductKDE:
    """A product KDE on ``data`` (n, d) with the normal reference rule
    ``h = 1.06 σ n^(-1/(4 + d))`` per dimension, never below ``min_bandwidth`` (so a dimension
    on which every observation agrees keeps some spread). A choice's ``λ`` is capped at
    ``(c - 1) / c``, where every option is equally likely: beyond, the kernel would prefer the
    options it did *not* observe."""
    n, d = data.shape
    bandwidth = 1.06 * data.std(axis=0) * n ** (-1.0 / (4 + d))
    bandwidth = np.maximum(bandwidth, min_bandwidth)
    is_choice = choices > 0
    cap = np.where(is_choice, (choices - 1) / np.maximum(choices, 1), np.inf)
    bandwidth = np.minimum(bandwidth, cap)
    return ProductKDE(data.copy(), bandwidth, choices.copy())

"""Search spaces: where each hyperparameter may come from.

A space is a plain dict from names to distributions (fixed values are allowed too)::

    space = {
        "lr": tune.loguniform(1e-3, 1.0),     # as likely between 0.001 and 0.01 as 0.1 and 1
        "width": tune.choice([8, 16, 32]),
        "weight_decay": tune.uniform(0.0, 1e-3),
        "epochs": 20,                         # not searched: passed as it is
    }
    config = sample(space, rng)               # one configuration: {"lr": 0.0193, ...}

Every distribution checks its arguments when it is made, so a bad space fails
before the search starts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Any, Sequence

import numpy as np


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite number, got {value!r}")
    return float(value)


class Distribution:
    """Something a search draws values from: ``sample(rng)`` returns one value."""

    def sample(self, rng: np.random.Generator) -> Any:
        raise NotImplementedError

    def problem(self) -> str | None:
        """Why this distribution cannot be sampled (None when it can); checked up front."""
        return None


@dataclass(frozen=True)
class Uniform(Distribution):
    low: float
    high: float

    def sample(self, rng: np.random.Generator) -> float:
        return float(rng.uniform(self.low, self.high))

    def problem(self) -> str | None:
        return _span_problem("uniform", self.low, self.high)


@dataclass(frozen=True)
class LogUniform(Distribution):
    low: float
    high: float

    def sample(self, rng: np.random.Generator) -> float:
        # uniform in log space: each factor of 10 is equally likely
        return float(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))


@dataclass(frozen=True)
class RandInt(Distribution):
    low: int
    high: int  # exclusive, as in numpy and torch.randint

    def sample(self, rng: np.random.Generator) -> int:
        return int(rng.integers(self.low, self.high))


@dataclass(frozen=True)
class Choice(Distribution):
    options: tuple

    def sample(self, rng: np.random.Generator) -> Any:
        return self.options[int(rng.integers(len(self.options)))]


def _span_problem(kind: str, low: float, high: float) -> str | None:
    """numpy draws low + (high - low) * u: the width itself must be a finite float."""
    with np.errstate(over="ignore"):
        width = np.float64(high) - np.float64(low)
    if not np.isfinite(width):
        return (f"{kind}(low={low:g}, high={high:g}) spans more than the largest float (high - "
                "low overflows), so no value can be drawn. Fix: narrow the range, or search "
                "the sign and the magnitude separately (choice([-1, 1]) and loguniform)")
    return None


def _ordered(kind: str, low: float, high: float) -> None:
    if low > high:
        raise ValueError(f"{kind}(low={low}, high={high}): low > high. Fix: swap them")


def uniform(low: float, high: float) -> Uniform:
    """Any real number in ``[low, high]``, all equally likely."""
    low, high = _number("uniform low", low), _number("uniform high", high)
    _ordered("uniform", low, high)
    return Uniform(low, high)  # a span too wide for a float is refused with the space's name


def loguniform(low: float, high: float) -> LogUniform:
    """A positive number in ``[low, high]`` whose logarithm is uniform (learning rates)."""
    low, high = _number("loguniform low", low), _number("loguniform high", high)
    if low <= 0:
        raise ValueError(f"loguniform(low={low}, high={high}): low must be > 0 (its log is taken). "
                         "Fix: use a small positive low such as 1e-6, or uniform()")
    _ordered("loguniform", low, high)
    return LogUniform(low, high)


def randint(low: int, high: int) -> RandInt:
    """An integer in ``[low, high)`` (``high`` excluded, as in ``numpy`` and ``torch``)."""
    for name, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"randint {name} must be an int, got {value!r}")
    if low >= high:
        raise ValueError(f"randint(low={low}, high={high}): the range is empty (high is "
                         "excluded). Fix: make high > low")
    return RandInt(int(low), int(high))


def choice(options: Sequence[Any]) -> Choice:
    """One of ``options``, each equally likely."""
    if isinstance(options, (str, bytes)) or not isinstance(options, Sequence):
        raise TypeError(f"choice takes a list of options, got {type(options).__name__}")
    if len(options) == 0:
        raise ValueError("choice([]) has nothing to choose from. Fix: give at least one option")
    return Choice(tuple(options))


def validate_space(space: Any) -> dict:
    """Check a space before any trial runs: a dict with string keys, and every distribution
    one that can be sampled (tried once on a scratch generator); errors name the
    hyperparameter."""
    if not isinstance(space, dict) or not space:
        raise TypeError(f"a search space is a non-empty dict of name -> distribution, got {space!r}")
    for name in space:
        if not isinstance(name, str):
            raise TypeError(f"search space names must be strings, got {name!r}")
    for name, d in space.items():
        if isinstance(d, Distribution):
            _check_distribution(name, d)
    return space


def _check_distribution(name: str, d: Distribution) -> None:
    problem = d.problem()
    if problem is None:
        try:
            with np.errstate(all="raise"):
                d.sample(np.random.default_rng(0))
        except Exception as err:  # noqa: BLE001  (any failure here would stop the search later)
            problem = f"sampling it fails ({type(err).__name__}: {err})"
    if problem is not None:
        raise ValueError(f"search space: hyperparameter {name!r}: {problem}")


def sample(space: dict, rng: np.random.Generator) -> dict:
    """One configuration: each distribution sampled (in the space's order), fixed values kept."""
    return {name: (d.sample(rng) if isinstance(d, Distribution) else d) for name, d in space.items()}

"""The budgets of successive halving and Hyperband, as plain numbers.

Successive halving (Jamieson & Talwalkar 2016) gives ``n`` configurations a small
budget ``r``, keeps the best ``1/eta`` of them, gives those ``eta`` times more, and
so on. Its weakness is the choice of ``n``: many configurations on a small budget
(aggressive) or few on a large one (conservative)? Hyperband (Li et al., JMLR 2018,
Algorithm 1) does not choose: it runs several *brackets* of successive halving,
from the most aggressive (``s = s_max``) to plain random search (``s = 0``), each
with about the same total budget. For ``max_budget R`` and ``eta``::

    s_max = floor(log_eta(R)),   B = (s_max + 1) R
    bracket s:  n = ceil(B / R * eta^s / (s + 1)),  r = R eta^-s
        rung i = 0..s:  n_i = floor(n eta^-i) configurations, r_i = r eta^i budget each
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from numbers import Real


#: The most trials one search may ask for. Each trial's configuration is drawn and kept
#: before the first one runs, so a schedule of 1e12 trials would exhaust memory first.
MAX_TRIALS = 1_000_000


def check_trial_count(count: int, what: str) -> None:
    if count > MAX_TRIALS:
        shown = f"{count:,}" if count < 10**15 else f"{float(count):.3g}"
        raise ValueError(f"{what} asks for {shown} trials, more than teachgrad.tune runs in one "
                         f"search ({MAX_TRIALS:,}). Fix: ask for fewer (a smaller n_trials / "
                         "n_configs, or a max_budget fewer powers of eta above its smallest rung), "
                         "or split the search.")


@dataclass(frozen=True)
class Rung:
    """One round of successive halving: ``n`` configurations, ``budget`` each."""

    n: int
    budget: float


def check_eta(eta: int) -> int:
    if isinstance(eta, bool) or not isinstance(eta, int):
        raise TypeError(f"eta must be an int (the factor kept at each rung), got {eta!r}")
    if eta < 2:
        raise ValueError(f"eta must be >= 2 (keep 1/eta of the configurations at each rung), "
                         f"got {eta}. Fix: use eta=3, the paper's default")
    return eta


def check_budget(name: str, value: Real) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise TypeError(f"{name} must be a positive number, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}. Fix: give the budget (epochs "
                         "or steps) of one full training, e.g. 81")
    return Fraction(value).limit_denominator(10**9)


def plain_budget(budget: Fraction) -> float | int:
    """An integer budget stays an int (so ``range(budget)`` works), else a float."""
    return int(budget) if budget.denominator == 1 else float(budget)


def _floor_log(value: Fraction, eta: int) -> int:
    """floor(log_eta(value)) in exact arithmetic (math.log(243, 3) is 4.999999999999999)."""
    s = 0
    while Fraction(eta) ** (s + 1) <= value:
        s += 1
    return s


def halving_rungs(n: int, min_budget: Fraction, eta: int, rungs: int) -> list[Rung]:
    """``rungs`` rounds of successive halving starting from ``n`` configurations."""
    return [Rung(n // eta**i, plain_budget(min_budget * eta**i)) for i in range(rungs)]


def successive_halving_schedule(n: int, min_budget: float, max_budget: float, eta: int = 3) -> list[Rung]:
    """The rungs of one successive-halving run, from ``min_budget`` up to ``max_budget``."""
    check_eta(eta)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n_configs must be a positive int, got {n!r}")
    low, high = check_budget("min_budget", min_budget), check_budget("max_budget", max_budget)
    if low > high:
        raise ValueError(f"min_budget ({min_budget}) > max_budget ({max_budget}). Fix: swap them")
    check_trial_count(n, "successive halving")
    rungs = halving_rungs(n, low, eta, _floor_log(high / low, eta) + 1)
    check_trial_count(sum(r.n for r in rungs), "successive halving")
    return rungs


def hyperband_schedule(max_budget: float, eta: int = 3) -> list[list[Rung]]:
    """Hyperband's brackets, most aggressive first: ``schedule[k]`` is bracket ``s = s_max - k``."""
    check_eta(eta)
    R = check_budget("max_budget", max_budget)
    if R < eta:
        raise ValueError(
            f"hyperband: max_budget={max_budget} is less than eta={eta}, so there is no rung to "
            "halve and the whole search would be a single trial. max_budget is the budget of one "
            "full training counted in the smallest unit worth stopping at (e.g. 81 epochs, or "
            "steps instead of epochs). Fix: give a max_budget of at least eta (eta**4 gives five "
            "brackets), or use random_search for one budget.")
    s_max = _floor_log(R, eta)
    if eta**s_max > MAX_TRIALS:  # its first rung alone: refused before building the rest
        check_trial_count(eta**s_max, "hyperband's first bracket")
    B = (s_max + 1) * R
    brackets = []
    for s in range(s_max, -1, -1):
        n = math.ceil(B / R * Fraction(eta) ** s / (s + 1))
        r = R / Fraction(eta) ** s
        brackets.append(halving_rungs(n, r, eta, s + 1))
    check_trial_count(sum(r.n for rungs in brackets for r in rungs), "hyperband")
    return brackets

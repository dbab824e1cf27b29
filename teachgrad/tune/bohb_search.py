"""BOHB: Hyperband whose new configurations come from a model of the good ones.

Falkner, Klein & Hutter, "BOHB: Robust and Efficient Hyperparameter Optimization at
Scale" (ICML 2018). Hyperband draws every configuration at random; BOHB keeps
Hyperband's brackets and budgets, and draws each new configuration like this
(the paper's Algorithm 2):

1. if there is no model yet, or with probability ``random_fraction`` (ρ = 1/3), a
   random configuration (so the search never stops exploring);
2. else take the observations at the largest budget ``b`` that has at least
   ``N_min + 2`` of them (``N_min = min_points_in_model``, by default d + 1 for d
   searched hyperparameters): results on larger budgets are more trustworthy;
3. sort them by loss; the best ``N_l = max(N_min, q N_b)`` (``q = top_n_percent``)
   are *good*, the worst ``N_g = max(N_min, N_b - N_l)`` are *bad*, and a kernel
   density estimate is fitted to each: ``l(x)`` and ``g(x)``;
4. draw ``num_samples`` candidates from ``l`` with its bandwidths widened
   ``bandwidth_factor`` times, and return the one with the largest ``l(x) / g(x)``:
   likely among the good, unlikely among the bad (the TPE acquisition, equivalent
   to expected improvement).

A trial that failed (crashed, diverged, timed out) counts as an observation with
an infinite loss: the model learns to avoid where it happened.

Differences from HpBandSter (the authors' implementation) where it departs from the
paper: HpBandSter splits good and bad without overlap and so needs about 2 N_min
observations; here the sets overlap while ``N_b < N_l + N_g``, as the paper's
equations say. Every configuration of a bracket's first rung is drawn when the
bracket starts, from the model of all results so far (HpBandSter run on as many
workers as the rung has configurations does the same): this keeps the search
deterministic for a seed on any executor, and it means the first bracket is random.
"""
from __future__ import annotations

import math
from concurrent.futures import Executor
from dataclasses import dataclass
from numbers import Real
from typing import Callable

import numpy as np

from .kde import MODELLED, ProductKDE, decode, encode, fit_kde, n_choices, searched_names
from .schedule import check_trial_count, hyperband_schedule
from .search import _run_bracket, _start
from .space import sample
from .trials import SearchResult, Trial, executor_or_default


@dataclass(frozen=True)
class BOHBSettings:
    """The knobs of BOHB's model, with the paper's defaults."""

    min_points_in_model: int | None = None   # N_min; None means d + 1
    top_n_percent: float = 15.0              # q, in percent
    num_samples: int = 64                    # N_s candidates per proposal
    random_fraction: float = 1 / 3           # ρ
    bandwidth_factor: float = 3.0            # b_w
    min_bandwidth: float = 1e-3

    def check(self, space: dict) -> int:
        """Refuse bad settings (and a space the model cannot describe); return ``N_min``."""
        names = searched_names(space)
        for name in names:
            if not isinstance(space[name], MODELLED):
                raise TypeError(f"bohb: hyperparameter {name!r} is a {type(space[name]).__name__}, "
                                "which BOHB's model cannot describe. Fix: use uniform, loguniform, "
                                "randint or choice (or tune.hyperband, which only samples)")
        if not names:
            raise ValueError("bohb: the space has no hyperparameter to search (only fixed values). "
                             "Fix: make at least one a distribution, e.g. tune.uniform(0, 1)")
        d = len(names)
        n_min = d + 1 if self.min_points_in_model is None else self.min_points_in_model
        if isinstance(n_min, bool) or not isinstance(n_min, int) or n_min < d + 1:
            raise ValueError(f"min_points_in_model must be an int >= d + 1 = {d + 1} (the space "
                             f"searches d = {d} hyperparameters), got "
                             f"{self.min_points_in_model!r}. Fix: leave it None for d + 1")
        _check_number("top_n_percent", self.top_n_percent, 0, 100, "between 0 and 100 (15: the "
                      "best 15% are 'good')", open_low=True, open_high=True)
        if isinstance(self.num_samples, bool) or not isinstance(self.num_samples, int) \
                or self.num_samples < 1:
            raise ValueError(f"num_samples must be a positive int, got {self.num_samples!r}")
        _check_number("random_fraction", self.random_fraction, 0, 1, "in [0, 1]")
        _check_number("bandwidth_factor", self.bandwidth_factor, 0, math.inf, "> 0", open_low=True)
        _check_number("min_bandwidth", self.min_bandwidth, 0, math.inf, "> 0", open_low=True)
        return n_min


def _check_number(name: str, value: object, low: float, high: float, wanted: str,
                  open_low: bool = False, open_high: bool = False) -> None:
    ok = not isinstance(value, bool) and isinstance(value, Real) and math.isfinite(value)
    if ok:
        above = value > low if open_low else value >= low
        below = value < high if open_high else value <= high
        ok = above and below
    if not ok:
        raise ValueError(f"{name} must be a number {wanted}, got {value!r}")


@dataclass(frozen=True)
class DensityModel:
    """l(x) and g(x), fitted on the observations at ``budget``."""

    budget: float
    good: ProductKDE
    bad: ProductKDE


def observations(space: dict, trials: list[Trial]) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """Per budget: the encoded configurations and their losses (inf for a failed trial),
    in the order the trials ran."""
    by_budget: dict[float, tuple[list, list]] = {}
    for t in trials:
        vectors, losses = by_budget.setdefault(t.budget, ([], []))
        vectors.append(encode(space, t.config))
        losses.append(t.loss if t.status == "ok" else math.inf)
    return {b: (np.array(v), np.array(l)) for b, (v, l) in by_budget.items()}


def model_budget(counts: dict[float, int], min_points: int) -> float | None:
    """The largest budget with at least ``min_points + 2`` observations, or None."""
    enough = [b for b, n in counts.items() if n >= min_points + 2]
    return max(enough) if enough else None


def good_bad_split(losses: np.ndarray, min_points: int,
                   top_n_percent: float) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the good (the best ``N_l``) and bad (the worst ``N_g``) observations;
    ties keep the earlier observation first."""
    n = len(losses)
    n_good = max(min_points, int(top_n_percent * n // 100))
    n_bad = max(min_points, n - n_good)
    order = np.argsort(losses, kind="stable")
    return order[:n_good], order[n - n_bad:]


def fit_model(space: dict, trials: list[Trial], min_points: int,
              settings: BOHBSettings) -> DensityModel | None:
    """The model BOHB samples from after ``trials``, or None while no budget has enough."""
    data = observations(space, trials)
    budget = model_budget({b: len(losses) for b, (_, losses) in data.items()}, min_points)
    if budget is None:
        return None
    vectors, losses = data[budget]
    good, bad = good_bad_split(losses, min_points, settings.top_n_percent)
    choices = n_choices(space)
    return DensityModel(budget, fit_kde(vectors[good], choices, settings.min_bandwidth),
                        fit_kde(vectors[bad], choices, settings.min_bandwidth))


def propose(model: DensityModel, rng: np.random.Generator, num_samples: int,
            bandwidth_factor: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``num_samples`` candidates from the widened l'(x); return the one with the largest
    l(x) / g(x) (the first on ties), all candidates, and their log l(x) - log g(x)."""
    candidates = model.good.sample(rng, num_samples, bandwidth_factor)
    scores = model.good.log_pdf(candidates) - model.bad.log_pdf(candidates)
    return candidates[int(np.argmax(scores))], candidates, scores


def draw_config(space: dict, model: DensityModel | None, rng: np.random.Generator,
                settings: BOHBSettings) -> tuple[dict, bool]:
    """One new configuration, and whether the model proposed it.

    Without a model no coin is tossed, so until one exists BOHB draws exactly the
    configurations Hyperband draws with the same seed."""
    if model is None or rng.random() < settings.random_fraction:
        return sample(space, rng), False
    best, _, _ = propose(model, rng, settings.num_samples, settings.bandwidth_factor)
    return decode(space, best), True


def bohb(objective: Callable, space: dict, max_budget: float, eta: int = 3, *,
         n_iterations: int = 1, min_points_in_model: int | None = None,
         top_n_percent: float = 15.0, num_samples: int = 64, random_fraction: float = 1 / 3,
         bandwidth_factor: float = 3.0, min_bandwidth: float = 1e-3,
         executor: Executor | None = None, max_workers: int | None = None,
         seed: int | None = None, trial_timeout: float | None = None) -> SearchResult:
    """BOHB (Falkner et al., ICML 2018): Hyperband's brackets
    (:func:`~teachgrad.tune.hyperband_schedule`), run ``n_iterations`` times, with each
    bracket's configurations drawn from a kernel-density model of the good results once a
    budget has enough of them (see this module's docstring). ``trial.model_based`` tells
    which configurations the model proposed."""
    brackets = hyperband_schedule(max_budget, eta)
    if isinstance(n_iterations, bool) or not isinstance(n_iterations, int) or n_iterations < 1:
        raise ValueError(f"n_iterations must be a positive int (how many times to run every "
                         f"bracket), got {n_iterations!r}")
    check_trial_count(n_iterations * sum(r.n for rungs in brackets for r in rungs), "bohb")
    settings = BOHBSettings(min_points_in_model, top_n_percent, num_samples, random_fraction,
                            bandwidth_factor, min_bandwidth)
    result, rng = _start("bohb", objective, space, executor, seed, trial_timeout)
    min_points = settings.check(space)
    result.schedule = [[(r.n, r.budget) for r in rungs] for rungs in brackets] * n_iterations
    with executor_or_default(executor, max_workers) as pool:
        for k, rungs in enumerate(brackets * n_iterations):
            model = fit_model(space, result.trials, min_points, settings)
            drawn = [draw_config(space, model, rng, settings) for _ in range(rungs[0].n)]
            _run_bracket(objective, [c for c, _ in drawn], rungs, k, pool, result, eta,
                         trial_timeout, model_based=[m for _, m in drawn])
    return result


__all__ = ["bohb", "BOHBSettings", "DensityModel", "observations", "model_budget",
           "good_bad_split", "fit_model", "propose", "draw_config"]

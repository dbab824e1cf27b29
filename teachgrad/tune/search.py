"""Random search, successive halving and Hyperband over ``objective(config, budget)``.

All three sample configurations in the calling process from one seeded random
generator, send trials to an executor, and read results back in submission
order, so the same seed gives the same trials and losses on any executor.

``trial_timeout=`` (seconds) bounds each trial: one that runs longer is recorded as
failed with ``timed_out=True`` and the search goes on. In a process pool (the
default) the worker stops the trial itself, with a timer signal, and is free for
the next one. Threads cannot be stopped: with a thread pool or Dask the search
stops waiting for the trial, and the thread runs on in the background until the
objective returns.
"""
from __future__ import annotations

import math
from concurrent.futures import Executor
from typing import Callable

import numpy as np

from .promotion import promote
from .schedule import (Rung, check_budget, check_trial_count, hyperband_schedule, plain_budget,
                       successive_halving_schedule)
from .space import sample, validate_space
from .trials import (SearchResult, Trial, check_objective, check_timeout, executor_or_default,
                     run_trials)


def _start(method: str, objective: Callable, space: dict, executor: Executor | None,
           seed: int | None, trial_timeout: float | None) -> tuple[SearchResult, np.random.Generator]:
    """Every check a search makes before its first trial; its empty result and generator."""
    validate_space(space)
    check_objective(objective, executor)
    check_timeout(trial_timeout)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed must be an int or None, got {seed!r}")
    return SearchResult(method, seed=seed), np.random.default_rng(seed)


def random_search(objective: Callable, space: dict, n_trials: int, budget: float, *,
                  executor: Executor | None = None, max_workers: int | None = None,
                  seed: int | None = None, trial_timeout: float | None = None) -> SearchResult:
    """``n_trials`` random configurations, each trained with the full ``budget``."""
    if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1:
        raise ValueError(f"n_trials must be a positive int, got {n_trials!r}")
    check_trial_count(n_trials, "random search")
    full = Rung(n_trials, plain_budget(check_budget("budget", budget)))
    result, rng = _start("random search", objective, space, executor, seed, trial_timeout)
    configs = [sample(space, rng) for _ in range(n_trials)]
    trials = [Trial(i, i, c, full.budget) for i, c in enumerate(configs)]
    with executor_or_default(executor, max_workers) as pool:
        run_trials(objective, trials, pool, trial_timeout)
    result.trials = trials
    result.schedule = [[(full.n, full.budget)]]
    return result


def _loss_or_nan(trial: Trial) -> float:
    """What the promotion rule sees of a trial: its loss, or NaN if it failed without one."""
    return trial.loss if trial.status == "ok" or not math.isfinite(trial.loss) else math.nan


def _run_bracket(objective: Callable, configs: list[dict], rungs: list[Rung], bracket: int,
                 pool: Executor, result: SearchResult, eta: int, timeout: float | None,
                 model_based: list[bool] | None = None) -> None:
    """One successive-halving bracket started from ``configs`` (``rungs[0].n`` of them):
    evaluate a rung, promote the best 1/eta (:func:`~.promotion.promote`, the part
    ``tune.promote``), repeat. ``model_based[k]`` marks the configurations a model
    proposed (BOHB)."""
    first_id = len({t.config_id for t in result.trials})
    flags = model_based or [False] * len(configs)
    alive = [(first_id + k, config, flag) for k, (config, flag) in enumerate(zip(configs, flags))]
    for i, rung in enumerate(rungs):
        trials = [Trial(len(result.trials) + k, cid, config, rung.budget, bracket=bracket, rung=i,
                        model_based=flag)
                  for k, (cid, config, flag) in enumerate(alive)]
        run_trials(objective, trials, pool, timeout)
        result.trials += trials
        if i + 1 == len(rungs):
            break
        # the best floor(n / eta) of the n that ran, never a failure (the part tune.promote)
        keep = [trials[k] for k in promote([_loss_or_nan(t) for t in trials], eta)]
        for t in keep:
            t.promoted = True
        alive = [(t.config_id, t.config, t.model_based) for t in keep]
        if not alive:
            break


def successive_halving(objective: Callable, space: dict, n_configs: int, min_budget: float,
                       max_budget: float, eta: int = 3, *, executor: Executor | None = None,
                       max_workers: int | None = None, seed: int | None = None,
                       trial_timeout: float | None = None) -> SearchResult:
    """``n_configs`` random configurations on ``min_budget``; the best ``1/eta`` go on with
    ``eta`` times the budget, until ``max_budget``."""
    rungs = successive_halving_schedule(n_configs, min_budget, max_budget, eta)
    result, rng = _start("successive halving", objective, space, executor, seed, trial_timeout)
    result.schedule = [[(r.n, r.budget) for r in rungs]]
    with executor_or_default(executor, max_workers) as pool:
        configs = [sample(space, rng) for _ in range(rungs[0].n)]
        _run_bracket(objective, configs, rungs, 0, pool, result, eta, trial_timeout)
    return result


def hyperband(objective: Callable, space: dict, max_budget: float, eta: int = 3, *,
              executor: Executor | None = None, max_workers: int | None = None,
              seed: int | None = None, trial_timeout: float | None = None) -> SearchResult:
    """Hyperband (Li et al., JMLR 2018): successive halving in every bracket of
    :func:`~teachgrad.tune.hyperband_schedule`, most aggressive first."""
    brackets = hyperband_schedule(max_budget, eta)
    result, rng = _start("hyperband", objective, space, executor, seed, trial_timeout)
    result.schedule = [[(r.n, r.budget) for r in rungs] for rungs in brackets]
    with executor_or_default(executor, max_workers) as pool:
        for k, rungs in enumerate(brackets):
            configs = [sample(space, rng) for _ in range(rungs[0].n)]
            _run_bracket(objective, configs, rungs, k, pool, result, eta, trial_timeout)
    return result

"""Checkers for chapter 13, *Hyperparameter search*: Hyperband's schedule, one step of
successive halving, and sampling a learning rate on a log scale."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from teachgrad import tune

from .core import Feedback, Mismatch, Test, check, expect_true


# --- 13.1 the Hyperband schedule ---------------------------------------------------------------

def _as_rows(schedule: object) -> list[list[tuple[int, float]]]:
    return [[(int(n), float(r)) for n, r in bracket] for bracket in schedule]  # type: ignore


def check_hyperband_schedule(hyperband_schedule: Callable) -> Feedback:
    """Exercise 13.1: ``hyperband_schedule(max_budget, eta)`` returns the brackets, most
    aggressive first, each a list of ``(n_i, r_i)`` rungs (Li et al. 2018, Algorithm 1)."""

    def make(max_budget: int, eta: int) -> Test:
        def run() -> None:
            expected = [[(r.n, float(r.budget)) for r in b]
                        for b in tune.hyperband_schedule(max_budget, eta)]
            raw = hyperband_schedule(max_budget, eta)
            try:
                got = _as_rows(raw)
            except (TypeError, ValueError):
                raise Mismatch("the schedule should be a list of brackets, each a list of "
                               "(n, r) pairs", expected, raw,
                               "e.g. [[(81, 1), (27, 3), ...], [(34, 3), ...], ...]") from None
            s_max = len(expected) - 1
            if len(got) != len(expected):
                hint = ("s_max = floor(log_eta(R)); math.log(243, 3) is 4.999999999999999, so "
                        "compute it with integers (while eta ** (s + 1) <= R)")
                raise Mismatch(f"{len(got)} brackets, expected s_max + 1 = {s_max + 1}",
                               expected, got, hint)
            if got == expected[::-1]:
                raise Mismatch("the brackets are in reverse order", expected, got,
                               "start with the most aggressive bracket, s = s_max, down to s = 0")
            for k, (g, e) in enumerate(zip(got, expected)):
                same = len(g) == len(e) and all(
                    gn == en and math.isclose(gr, er, rel_tol=1e-9) for (gn, gr), (en, er) in zip(g, e))
                if not same:
                    s = s_max - k
                    hint = "n = ceil(B / R * eta**s / (s + 1)), r = R * eta**-s; rung i: " \
                           "floor(n * eta**-i) configurations with r * eta**i each"
                    if g and e and g[0][0] == e[0][0] - 1:
                        hint = "n rounds up: math.ceil, not int() or floor"
                    raise Mismatch(f"bracket s = {s} is wrong", e, g, hint)
        return Test(f"max_budget = {max_budget}, eta = {eta}", run)

    rng = np.random.default_rng()
    tests = [make(81, 3), make(243, 3)] + [make(int(rng.integers(10, 300)), int(rng.integers(2, 5)))
                                           for _ in range(3)]
    return check("13.1", tests, candidate=hyperband_schedule,
                 solved="your schedule is the paper's, bracket by bracket, rung by rung.")


# --- 13.2 one successive-halving step --------------------------------------------------------

def _reference_promote(losses: list[float], eta: int) -> list[int]:
    ok = [i for i, loss in enumerate(losses) if math.isfinite(loss)]
    ok.sort(key=lambda i: (losses[i], i))
    return ok[: len(losses) // eta]


def check_promote(promote: Callable) -> Feedback:
    """Exercise 13.2: ``promote(losses, eta)`` returns the indices of the configurations that go
    on to the next rung: the ``floor(n / eta)`` lowest losses, best first, never a NaN."""

    def make(description: str, losses: list[float], eta: int) -> Test:
        def run() -> None:
            expected = _reference_promote(losses, eta)
            got = promote(list(losses), eta)
            got_list = [int(i) for i in got] if got is not None else None
            if got_list == expected:
                return
            hint = "sort the indices by loss, drop NaNs, keep the first len(losses) // eta"
            if got_list is not None:
                if any(not math.isfinite(losses[i]) for i in got_list if 0 <= i < len(losses)):
                    hint = "a failed (NaN) trial is never promoted: filter with math.isfinite"
                elif len(got_list) == math.ceil(len(losses) / eta) != len(expected):
                    hint = "keep floor(n / eta) configurations (len(losses) // eta), not ceil"
                elif got_list and all(losses[i] >= max(losses[j] for j in expected)
                                      for i in got_list if math.isfinite(losses[i])):
                    hint = "lower loss is better: keep the smallest losses"
            raise Mismatch("wrong configurations promoted", expected, got_list, hint)
        return Test(description, run)

    rng = np.random.default_rng()
    fixed = [0.9, 0.3, float("nan"), 0.5, 0.1, 0.7, 0.2, float("nan"), 0.4]
    random_losses = [float(x) for x in rng.uniform(0, 2, size=int(rng.integers(10, 40)))]
    for i in rng.choice(len(random_losses), size=3, replace=False):
        random_losses[int(i)] = float("nan")
    mostly_failed = [float("nan")] * 7 + [0.8, 0.6]
    tests = [make("9 losses (2 NaN), eta = 3", fixed, 3),
             make(f"{len(random_losses)} random losses (3 NaN), eta = 2", random_losses, 2),
             make("10 losses, eta = 4", [float(x) for x in rng.uniform(0, 1, size=10)], 4),
             make("9 losses, 7 of them NaN, eta = 3", mostly_failed, 3)]
    return check("13.2", tests, candidate=promote,
                 solved="your step keeps the best 1/eta, best first, and never a failed trial.")


# --- 13.3 a log-uniform sampler ----------------------------------------------------------------

def check_sample_loguniform(sample_loguniform: Callable) -> Feedback:
    """Exercise 13.3: ``sample_loguniform(low, high, rng)`` draws one number whose logarithm
    is uniform between ``log(low)`` and ``log(high)``."""

    def make(low: float, high: float, seed: int) -> Test:
        def run() -> None:
            rng = np.random.default_rng(seed)
            draws = np.array([sample_loguniform(low, high, rng) for _ in range(3000)], dtype=float)
            expect_true(np.all(np.isfinite(draws)) and draws.min() >= low * (1 - 1e-9)
                        and draws.max() <= high * (1 + 1e-9),
                        f"draws fall outside [{low:g}, {high:g}] (from {draws.min():.3g} to "
                        f"{draws.max():.3g})",
                        hint="exponentiate with the same base as the log: "
                             "math.exp(rng.uniform(math.log(low), math.log(high)))")
            expect_true(np.unique(draws).size > 2900, "the draws barely vary",
                        hint="draw a fresh random number on every call from rng")
            # log-uniform: as many draws in each equal slice of log space
            quarters = np.quantile(np.log(draws), [0.25, 0.5, 0.75])
            edges = np.log(low) + (np.log(high) - np.log(low)) * np.array([0.25, 0.5, 0.75])
            if not np.allclose(quarters, edges, atol=0.06 * (np.log(high) - np.log(low))):
                hint = "take the uniform draw in log space, then exponentiate"
                if np.isclose(np.median(draws), (low + high) / 2, rtol=0.1):
                    hint = ("that is uniform between low and high: most draws land in the top "
                            "decade. Draw uniformly between log(low) and log(high), then exp")
                raise Mismatch("the logarithms of the draws are not uniform", edges, quarters, hint)
        return Test(f"3000 draws between {low:g} and {high:g}", run)

    rng = np.random.default_rng()
    low = float(10 ** rng.uniform(-6, -3))
    tests = [make(1e-4, 1.0, 0), make(low, low * float(10 ** rng.uniform(2, 4)), 1)]
    return check("13.3", tests, candidate=sample_loguniform,
                 solved="your sampler gives every factor of 10 the same chance.")

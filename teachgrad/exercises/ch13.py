"""Checkers for chapter 13, *Hyperparameter search*: random search built by hand, one step
of successive halving, and Hyperband's schedule.

Each checker runs the learner's code on the chapter's inputs and on inputs drawn afresh
on every run, and withholds the ``teachgrad.tune`` call that would answer the exercise.
13.2 is a build exercise: the learner's ``promote`` then becomes the rule ``tg.tune``
promotes with (the part ``tune.promote``; see :mod:`.tune_workloads`).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from teachgrad import tune

from .core import Feedback, Mismatch, Test, check, expect_true, unseen_rng
from .withheld import withheld


def _withhold_tune():
    return withheld((tune, "random_search", "tune.random_search"),
                    (tune, "sample", "tune.sample"),
                    (tune, "successive_halving", "tune.successive_halving"),
                    (tune, "hyperband_schedule", "tune.hyperband_schedule"),
                    (tune, "successive_halving_schedule", "tune.successive_halving_schedule"))


# --- 13.1 random search, by hand ---------------------------------------------------------

class _RecordingObjective:
    """A cheap stand-in for a training run: a bowl in log(lr) around ``best``; runs with
    lr above ``diverge_above`` fail (NaN, or inf every third one), and so do the calls
    numbered in ``failing_calls``. Remembers every call."""

    def __init__(self, best: float, diverge_above: float = math.inf,
                 failing_calls: tuple[int, ...] = ()) -> None:
        self.best, self.diverge_above = best, diverge_above
        self.failing_calls = failing_calls
        self.calls: list[tuple[object, object]] = []
        self.losses: list[float] = []

    def __call__(self, config: object, budget: object) -> float:
        self.calls.append((config, budget))
        lr = config["lr"] if isinstance(config, dict) and "lr" in config else float("nan")
        if len(self.calls) - 1 in self.failing_calls:
            loss = float("nan")
        elif lr > self.diverge_above:
            loss = math.inf if len(self.calls) % 3 == 0 else float("nan")
        else:
            loss = (math.log10(lr) - math.log10(self.best)) ** 2 / (1 + math.sqrt(float(budget)))
        self.losses.append(loss)
        return loss

    def lrs(self) -> list[float]:
        return [float(config["lr"]) for config, _ in self.calls]


def _run_search(random_search: Callable, low: float, high: float, n_trials: int,
                budget: int, seed: int, best: float, diverge_above: float = math.inf):
    failing = (0, n_trials // 2, n_trials - 1) if diverge_above < math.inf else ()
    objective = _RecordingObjective(best, diverge_above, failing)
    with _withhold_tune():
        result = random_search(objective, low, high, n_trials, budget, seed)
    return objective, result


def _check_calls(objective: _RecordingObjective, low: float, high: float, n_trials: int,
                 budget: int) -> None:
    expect_true(len(objective.calls) == n_trials,
                f"the objective was called {len(objective.calls)} times, expected n_trials = "
                f"{n_trials}", hint="one call objective({'lr': lr}, budget) per trial")
    for config, given in objective.calls:
        expect_true(isinstance(config, dict) and set(config) == {"lr"},
                    f"the objective got the configuration {config!r}",
                    hint="pass a dict with one key: objective({'lr': lr}, budget)")
        expect_true(given == budget, f"a trial ran with budget {given!r}, expected {budget}",
                    hint="every trial of random search gets the full budget, unchanged")
    lrs = np.array(objective.lrs())
    expect_true(bool(np.all((lrs >= low * (1 - 1e-9)) & (lrs <= high * (1 + 1e-9)))),
                f"learning rates outside [{low:g}, {high:g}]: from {lrs.min():.3g} to "
                f"{lrs.max():.3g}", hint="exponentiate with the base of the logarithm you "
                "drew in: math.exp(rng.uniform(math.log(low), math.log(high)))")


def _check_best(objective: _RecordingObjective, result: object) -> None:
    finite = [(loss, lr) for loss, lr in zip(objective.losses, objective.lrs())
              if math.isfinite(loss)]
    if not finite:  # every trial diverged: no best to check (the draws are checked elsewhere)
        return
    want_loss = min(finite)[0]
    ok = isinstance(result, (tuple, list)) and len(result) == 2
    expect_true(ok, f"random_search returned {type(result).__name__}, expected a pair "
                "(best_lr, best_loss)", hint="return best_lr, best_loss")
    got_lr, got_loss = result
    if got_loss is None or not isinstance(got_loss, (int, float)) or not math.isfinite(got_loss):
        raise Mismatch("the best loss is not a finite number", want_loss, got_loss,
                       "a diverged run (NaN or inf) never wins: keep a loss only when "
                       "math.isfinite(loss)")
    if not math.isclose(got_loss, want_loss, rel_tol=1e-12, abs_tol=1e-15):
        hint = "keep the lowest finite loss over all trials"
        if math.isclose(got_loss, max(finite)[0], rel_tol=1e-12):
            hint = "lower loss is better: keep the smallest"
        elif len(finite) < len(objective.losses):
            hint = ("a diverged run (NaN or inf) never wins, and a NaN kept as the best breaks "
                    "every later comparison: skip a loss unless math.isfinite(loss)")
        raise Mismatch("that is not the lowest loss of the trials you ran", want_loss,
                       got_loss, hint)
    winners = [lr for loss, lr in finite if loss == got_loss]
    expect_true(any(math.isclose(float(got_lr), lr, rel_tol=1e-12) for lr in winners),
                f"the best loss {got_loss:.4g} came from lr = {winners[0]:.4g}, but you "
                f"returned lr = {got_lr!r}", hint="remember the lr together with its loss")


def _check_log_uniform(lrs: np.ndarray, low: float, high: float) -> None:
    span = math.log(high) - math.log(low)
    quarters = np.quantile(np.log(lrs), [0.25, 0.5, 0.75])
    edges = math.log(low) + span * np.array([0.25, 0.5, 0.75])
    if not np.allclose(quarters, edges, atol=0.06 * span):
        hint = "draw uniformly in log space, then exponentiate"
        if np.isclose(np.median(lrs), (low + high) / 2, rtol=0.1):
            hint = ("that is uniform between low and high: most draws land in the top decade. "
                    "Draw uniformly between log(low) and log(high), then exp")
        raise Mismatch("the logarithms of the learning rates you tried are not uniform: "
                       "their quartiles", edges, quarters, hint)


def check_random_search(random_search: Callable) -> Feedback:
    """Exercise 13.1: ``random_search(objective, low, high, n_trials, budget, seed)`` tries
    ``n_trials`` learning rates drawn log-uniformly from ``np.random.default_rng(seed)`` and
    returns ``(best_lr, best_loss)``, the lowest finite loss."""
    rng = unseen_rng()

    def search(description: str, low: float, high: float, n_trials: int, budget: int,
               seed: int, diverge_above: float = math.inf) -> Test:
        def run() -> None:
            best = math.exp(rng.uniform(math.log(low), math.log(high)))
            objective, result = _run_search(random_search, low, high, n_trials, budget,
                                            seed, best, diverge_above)
            _check_calls(objective, low, high, n_trials, budget)
            _check_best(objective, result)
        return Test(description, run)

    def reproducible(low: float, high: float, seed: int) -> Test:
        def run() -> None:
            np.random.seed(int(rng.integers(1 << 31)))   # global state must not matter
            first, _ = _run_search(random_search, low, high, 12, 3, seed, low)
            np.random.seed(int(rng.integers(1 << 31)))
            again, _ = _run_search(random_search, low, high, 12, 3, seed, low)
            other, _ = _run_search(random_search, low, high, 12, 3, seed + 1, low)
            expect_true(first.lrs() == again.lrs(),
                        f"seed {seed} twice gave two different searches",
                        hint="draw every number from one np.random.default_rng(seed), created "
                             "inside random_search")
            expect_true(first.lrs() != other.lrs(), f"seeds {seed} and {seed + 1} gave the "
                        "same learning rates", hint="create the generator from the seed "
                        "argument: np.random.default_rng(seed)")
        return Test(f"seed {seed} twice, then seed {seed + 1}: same search, other search", run)

    def distribution(low: float, high: float, seed: int) -> Test:
        def run() -> None:
            objective, _ = _run_search(random_search, low, high, 3000, 1, seed, low)
            _check_calls(objective, low, high, 3000, 1)
            lrs = np.array(objective.lrs())
            expect_true(np.unique(lrs).size > 2900, "the learning rates barely vary",
                        hint="draw a fresh number for every trial")
            _check_log_uniform(lrs, low, high)
        return Test(f"3000 trials between {low:.3g} and {high:.3g}", run)

    low = float(10 ** rng.uniform(-6, -3))
    high = low * float(10 ** rng.uniform(2, 5))
    seed = int(rng.integers(1 << 20))
    tests = [search("20 trials between 1e-4 and 1, budget 9, seed 0", 1e-4, 1.0, 20, 9, 0),
             search(f"30 trials between {low:.3g} and {high:.3g}, the top third diverging (NaN "
                    "or inf), and the first, middle and last trials fail (NaN)", low, high, 30,
                    int(rng.integers(1, 100)), seed, diverge_above=low * (high / low) ** (2 / 3)),
             reproducible(low, high, seed),
             distribution(1e-4, 1.0, 0), distribution(low, high, seed)]
    return check("13.1", tests, candidate=random_search,
                 solved="your search draws every factor of 10 equally, repeats itself for a "
                        "seed, and never picks a diverged run.")


# --- 13.2 one successive-halving step, the rule tg.tune runs ------------------------------

def _promote_hint(losses: list[float], eta: int, expected: list[int], got: list[int] | None) -> str:
    if got is None:
        return "return the list of indices"
    if any(not 0 <= i < len(losses) for i in got):
        return "return indices into losses (0 to len(losses) - 1), not the losses themselves"
    if any(not math.isfinite(losses[i]) for i in got):
        return "a failed trial (NaN or inf) is never promoted: filter with math.isfinite"
    if len(got) == math.ceil(len(losses) / eta) != len(expected):
        return "keep floor(n / eta) configurations (len(losses) // eta), not ceil"
    finished = sum(math.isfinite(loss) for loss in losses)
    if len(got) == finished // eta != len(expected):
        return ("count n = len(losses), failed trials included, when you take n // eta: "
                "a failed trial still used its budget")
    finite = [losses[i] for i in expected]
    if got and finite and all(losses[i] >= max(finite) for i in got) and len(set(finite)) > 1:
        return "lower loss is better: keep the smallest losses"
    if sorted(got) == sorted(expected):
        return "best first: order the promoted indices by loss"
    if len(got) == len(expected):
        return ("count n = len(losses), failed trials included, when you take n // eta; "
                "ties keep the earlier index")
    return "sort the indices by loss, drop failed trials, keep the first len(losses) // eta"


def check_promote(promote: Callable) -> Feedback:
    """Exercise 13.2: ``promote(losses, eta)`` returns the indices of the configurations that go
    on to the next rung: the ``floor(n / eta)`` lowest losses, best first, never a failure.
    Then it becomes the rule ``tg.tune`` promotes with (the part ``tune.promote``): the
    chapter's Hyperband and a successive halving through failures run on it."""
    from .tune_workloads import plugged_search_tests, promote_property_test, run_promote

    def make(description: str, losses: list[float], eta: int) -> Test:
        def run() -> None:
            with _withhold_tune():
                run_promote(promote, losses, eta, _promote_hint)
        return Test(description, run)

    rng = unseen_rng()
    nan, inf = float("nan"), float("inf")
    fixed = [0.9, 0.3, nan, 0.5, 0.1, 0.7, 0.2, nan, 0.4]
    random_losses = [float(x) for x in rng.uniform(-1, 2, size=int(rng.integers(10, 40)))]
    for i in rng.choice(len(random_losses), size=3, replace=False):
        random_losses[int(i)] = float(rng.choice([nan, inf]))
    ties = [float(x) for x in rng.integers(0, 3, size=int(rng.integers(8, 20)))]
    tests = [make("9 losses (2 NaN), eta = 3", fixed, 3),
             make(f"{len(random_losses)} random losses of both signs (3 failed), eta = 2",
                  random_losses, 2),
             make(f"{len(ties)} losses with ties, eta = {(eta := int(rng.integers(2, 6)))}",
                  ties, eta),
             make("10 losses, eta = 4", [float(x) for x in rng.uniform(0, 1, size=10)], 4),
             make("9 losses, 7 of them NaN, eta = 3", [nan] * 7 + [0.8, 0.6], 3),
             make("6 losses, one inf, eta = 5", [0.5, inf, 0.2, 0.9, 0.1, 0.3], 5),
             make("6 losses, three of them inf, eta = 2", [inf, inf, 0.3, nan, inf, 0.2], 2),
             make("2 losses, eta = 3: nobody goes on", [0.2, 0.1], 3),
             promote_property_test(promote, _promote_hint)]
    tests += plugged_search_tests(promote)
    return check("13.2", tests, candidate=promote,
                 solved="your step keeps the best 1/eta, best first, and never a failed trial; "
                        "tg.tune's Hyperband and successive halving ran on it, trial for trial "
                        "as on the engine's own rule.")


# --- 13.3 the Hyperband schedule ---------------------------------------------------------------

def _as_rows(schedule: object) -> list[list[tuple[int, float]]]:
    return [[(int(n), float(r)) for n, r in bracket] for bracket in schedule]  # type: ignore


def _bracket_hint(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> str:
    if got and want and got[0][0] == want[0][0] - 1:
        return "n rounds up: math.ceil, not int() or floor"
    if got and want and got[0][0] == want[0][0] and len(got) == len(want):
        if [n for n, _ in got] != [n for n, _ in want]:
            return "rung i runs floor(n * eta**-i) configurations: n // eta**i"
        return "rung i gives each configuration r * eta**i, with r = R * eta**-s"
    if len(got) != len(want):
        return "bracket s has s + 1 rungs, i = 0 ... s"
    return ("n = ceil(B / R * eta**s / (s + 1)), r = R * eta**-s; rung i: floor(n * eta**-i) "
            "configurations with r * eta**i each")


def _paper_schedule(max_budget: int, eta: int) -> list[list[tuple[int, float]]]:
    """The expected brackets. Below ``eta`` the library refuses (a search of one trial),
    but Algorithm 1 is still defined there: s_max = 0, one bracket of one configuration
    with the whole budget. The exercise's function has no reason to refuse it."""
    if max_budget < eta:
        return [[(1, float(max_budget))]]
    return [[(r.n, float(r.budget)) for r in b] for b in tune.hyperband_schedule(max_budget, eta)]


def check_hyperband_schedule(hyperband_schedule: Callable) -> Feedback:
    """Exercise 13.3: ``hyperband_schedule(max_budget, eta)`` returns the brackets, most
    aggressive first, each a list of ``(n_i, r_i)`` rungs (Li et al. 2018, Algorithm 1)."""

    def make(max_budget: int, eta: int) -> Test:
        def run() -> None:
            expected = _paper_schedule(max_budget, eta)
            with _withhold_tune():
                raw = hyperband_schedule(max_budget, eta)
            try:
                got = _as_rows(raw)
            except (TypeError, ValueError):
                raise Mismatch("the schedule should be a list of brackets, each a list of "
                               "(n, r) pairs", expected, raw,
                               "e.g. [[(81, 1), (27, 3), ...], [(34, 3), ...], ...]") from None
            fractional = [n for bracket in raw for n, _ in bracket if float(n) != int(n)]
            expect_true(not fractional, f"a rung of {fractional[0]!r} configurations" if
                        fractional else "", hint="n_i is a whole number of configurations: "
                        "floor(n * eta**-i), n // eta**i")
            s_max = len(expected) - 1
            if len(got) != len(expected):
                hint = "s_max = floor(log_eta(R)): the largest s with eta ** s <= R"
                if max_budget == 243 and eta == 3:
                    hint = ("math.log(243, 3) is 4.999999999999999: compute s_max with integers "
                            "(while eta ** (s + 1) <= R)")
                raise Mismatch(f"{len(got)} brackets, expected s_max + 1 = {s_max + 1}",
                               expected, got, hint)
            if got == expected[::-1] and len(got) > 1:
                raise Mismatch("the brackets are in reverse order", expected, got,
                               "start with the most aggressive bracket, s = s_max, down to s = 0")
            for k, (g, e) in enumerate(zip(got, expected)):
                same = len(g) == len(e) and all(
                    gn == en and math.isclose(gr, er, rel_tol=1e-9) for (gn, gr), (en, er) in zip(g, e))
                if not same:
                    raise Mismatch(f"bracket s = {s_max - k} is wrong", e, g, _bracket_hint(g, e))
        return Test(f"max_budget = {max_budget}, eta = {eta}", run)

    rng = unseen_rng()
    fixed = [(81, 3), (243, 3), (1000, 2), (1000, 5), (64, 4), (4, 5), (2, 2)]
    randomised = [(int(rng.integers(2, 1001)), int(rng.integers(2, 6))) for _ in range(4)]
    small_eta = int(rng.integers(3, 6))  # a budget below eta: one bracket, s_max = 0
    randomised.append((int(rng.integers(1, small_eta)), small_eta))
    return check("13.3", [make(*c) for c in fixed + randomised], candidate=hyperband_schedule,
                 solved="your schedule is the paper's, bracket by bracket, rung by rung.")

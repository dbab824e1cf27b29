"""teachgrad.tune: spaces, the Hyperband schedule of the paper, searches, failures, bad input."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from teachgrad import tune
from teachgrad.tune.objectives import quadratic_objective

SPACE = {"x": tune.uniform(-3.0, 3.0)}

# Li et al., JMLR 2018, Table 1: Hyperband with R = 81, eta = 3, as (n_i, r_i) per rung.
PAPER_TABLE_R81_ETA3 = {
    4: [(81, 1), (27, 3), (9, 9), (3, 27), (1, 81)],
    3: [(34, 3), (11, 9), (3, 27), (1, 81)],
    2: [(15, 9), (5, 27), (1, 81)],
    1: [(8, 27), (2, 81)],
    0: [(5, 81)],
}


@pytest.fixture
def threads():
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield pool


def test_hyperband_schedule_is_the_papers_table() -> None:
    schedule = tune.hyperband_schedule(81, eta=3)
    got = {4 - k: [(r.n, r.budget) for r in rungs] for k, rungs in enumerate(schedule)}
    assert got == PAPER_TABLE_R81_ETA3
    assert all(isinstance(r.budget, int) for rungs in schedule for r in rungs)


def test_hyperband_schedule_other_settings() -> None:
    # R=27, eta=3: s_max=3, B=108; n = ceil(4 * 3^s / (s+1))
    got = [[(r.n, r.budget) for r in b] for b in tune.hyperband_schedule(27, 3)]
    assert got == [[(27, 1), (9, 3), (3, 9), (1, 27)], [(12, 3), (4, 9), (1, 27)],
                   [(6, 9), (2, 27)], [(4, 27)]]
    # a budget that is no power of eta: fractional budgets, s_max = floor(log_2 10) = 3
    b = tune.hyperband_schedule(10, 2)
    assert [r.budget for r in b[0]] == [1.25, 2.5, 5, 10] and len(b) == 4


def test_successive_halving_schedule() -> None:
    rungs = tune.successive_halving_schedule(27, 1, 27, eta=3)
    assert [(r.n, r.budget) for r in rungs] == [(27, 1), (9, 3), (3, 9), (1, 27)]
    rungs = tune.successive_halving_schedule(10, 2, 20, eta=2)  # 10 → 5 → 2 → 1
    assert [(r.n, r.budget) for r in rungs] == [(10, 2), (5, 4), (2, 8), (1, 16)]


def test_distributions_sample_in_range() -> None:
    rng = np.random.default_rng(0)
    u = [tune.uniform(-1, 2).sample(rng) for _ in range(2000)]
    assert min(u) >= -1 and max(u) <= 2 and abs(np.mean(u) - 0.5) < 0.1
    lu = [tune.loguniform(1e-4, 1.0).sample(rng) for _ in range(4000)]
    assert min(lu) >= 1e-4 and max(lu) <= 1.0
    assert abs(np.median(np.log10(lu)) + 2) < 0.15  # log-uniform: median at 10^-2
    ri = [tune.randint(3, 6).sample(rng) for _ in range(500)]
    assert set(ri) == {3, 4, 5}
    assert {tune.choice(["a", "b"]).sample(rng) for _ in range(50)} == {"a", "b"}
    config = tune.sample({"a": tune.uniform(0, 1), "fixed": 7}, rng)
    assert config["fixed"] == 7 and 0 <= config["a"] <= 1


@pytest.mark.parametrize("make, message", [
    (lambda: tune.choice([]), r"choice\(\[\]\) has nothing to choose from"),
    (lambda: tune.uniform(2, 1), r"uniform\(low=2.0, high=1.0\): low > high. Fix: swap them"),
    (lambda: tune.loguniform(1, 0.1), r"low > high"),
    (lambda: tune.loguniform(0, 1), r"low must be > 0"),
    (lambda: tune.randint(5, 5), r"the range is empty"),
    (lambda: tune.uniform("a", 1), r"uniform low must be a finite number"),
    (lambda: tune.choice("abc"), r"choice takes a list of options"),
    (lambda: tune.hyperband_schedule(81, eta=1), r"eta must be >= 2"),
    (lambda: tune.hyperband_schedule(0, eta=3), r"max_budget must be positive, got 0"),
    (lambda: tune.hyperband_schedule(-5), r"max_budget must be positive"),
    (lambda: tune.successive_halving_schedule(9, 9, 1), r"min_budget \(9\) > max_budget \(1\)"),
])
def test_bad_space_or_schedule_is_refused(make, message) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        make()


class CountingObjective:
    """Records each call (runs in threads, so the calls are visible here)."""

    def __init__(self, result=None):
        self.calls = []
        self.result = result

    def __call__(self, config, budget):
        self.calls.append((config, budget))
        return quadratic_objective(config, budget) if self.result is None else self.result


@pytest.mark.parametrize("run, message", [
    (lambda f, ex: tune.hyperband(f, SPACE, 9, eta=1, executor=ex), "eta must be >= 2"),
    (lambda f, ex: tune.hyperband(f, SPACE, -1, executor=ex), "max_budget must be positive"),
    (lambda f, ex: tune.random_search(f, SPACE, 3, 0, executor=ex), "budget must be positive"),
    (lambda f, ex: tune.random_search(f, SPACE, 0, 5, executor=ex), "n_trials must be a positive int"),
    (lambda f, ex: tune.random_search(f, {}, 3, 5, executor=ex), "non-empty dict"),
    (lambda f, ex: tune.successive_halving(f, SPACE, 9, 3, 1, executor=ex), "min_budget"),
    (lambda f, ex: tune.random_search(f, SPACE, 3, 5, executor="pool"), "must be a concurrent"),
    (lambda f, ex: tune.random_search(lambda config: 0.0, SPACE, 3, 5, executor=ex),
     r"objective must accept two arguments, objective\(config, budget\)"),
])
def test_bad_input_errors_before_any_trial(run, message, threads) -> None:
    objective = CountingObjective()
    with pytest.raises((ValueError, TypeError), match=message):
        run(objective, threads)
    assert objective.calls == []


def test_lambda_objective_with_the_process_pool_is_refused_before_any_trial() -> None:
    with pytest.raises(TypeError, match="cannot be sent to worker processes.*not a lambda"):
        tune.random_search(lambda config, budget: 0.0, SPACE, 2, 1)


def test_objective_returning_a_non_number_is_an_error(threads) -> None:
    with pytest.raises(TypeError, match=r"objective returned 'low' \(str\) for config .* must "
                       r"return the loss as a number"):
        tune.random_search(CountingObjective(result="low"), SPACE, 3, 5, executor=threads, seed=0)


def test_random_search_records_every_trial_and_failures_are_never_best(threads) -> None:
    result = tune.random_search(quadratic_objective, SPACE, 40, 9, executor=threads, seed=3)
    assert len(result.trials) == 40 and result.total_budget == 40 * 9
    crashed = [t for t in result.trials if t.config["x"] > 2.5]
    diverged = [t for t in result.trials if t.config["x"] < -2.5]
    assert crashed and diverged
    assert all(t.status == "failed" and "ValueError: x=" in t.error for t in crashed)
    assert all(t.status == "failed" and "diverged" in t.error for t in diverged)
    ok = [t for t in result.trials if t.status == "ok"]
    assert len(ok) + len(crashed) + len(diverged) == 40
    assert result.best_loss == min(t.loss for t in ok)
    assert math.isclose(result.best_loss, (result.best_config["x"] - 1) ** 2 + 1 / 9)
    assert all(t.time >= 0 for t in result.trials)
    assert "40 trials" in result.summary()


def test_all_trials_failed_means_no_best(threads) -> None:
    space = {"x": tune.uniform(2.6, 3.0)}
    result = tune.random_search(quadratic_objective, space, 3, 1, executor=threads, seed=0)
    assert result.best_config is None and math.isnan(result.best_loss)
    assert len(result.failed) == 3


def test_successive_halving_promotes_the_best_third(threads) -> None:
    result = tune.successive_halving(quadratic_objective, SPACE, 27, 1, 9, eta=3,
                                     executor=threads, seed=1)
    by_rung = [[t for t in result.trials if t.rung == i] for i in range(3)]
    assert [len(r) for r in by_rung] == [27, 9, 3]
    assert [r[0].budget for r in by_rung] == [1, 3, 9]
    for rung, next_rung in zip(by_rung, by_rung[1:]):
        ok = sorted((t for t in rung if t.status == "ok"), key=lambda t: t.loss)
        assert [t.config_id for t in next_rung] == [t.config_id for t in ok[: len(rung) // 3]]
        assert {t.config_id for t in rung if t.promoted} == {t.config_id for t in next_rung}
        assert not any(t.promoted for t in rung if t.status == "failed")
    assert result.best_trial in by_rung[2]
    assert result.total_budget == 27 * 1 + 9 * 3 + 3 * 9


def test_hyperband_runs_every_bracket_of_the_schedule(threads) -> None:
    result = tune.hyperband(quadratic_objective, SPACE, 27, eta=3, executor=threads, seed=2)
    schedule = tune.hyperband_schedule(27, 3)
    assert result.schedule == [[(r.n, r.budget) for r in b] for b in schedule]
    assert sorted({t.bracket for t in result.trials}) == [0, 1, 2, 3]
    first_rungs = [len([t for t in result.trials if t.bracket == k and t.rung == 0]) for k in range(4)]
    assert first_rungs == [b[0].n for b in schedule]
    assert len({t.config_id for t in result.trials}) == sum(first_rungs)
    assert result.best_trial.budget == 27 and result.best_trial.status == "ok"
    assert abs(result.best_config["x"] - 1) < 0.3

"""tg.tune refuses searches it cannot run (bad Hyperband budgets, too many trials, spaces
that cannot be sampled) before any trial, and a trial that hangs does not hang the search."""
from __future__ import annotations

import time
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor

import pytest

from teachgrad import tune
from teachgrad.tune.objectives import quadratic_objective, sleepy_objective
from teachgrad.tune.space import Uniform

# x decides the loss; "seconds" how long the trial takes: 60 s is a trial that hangs
HANGS_SOMETIMES = {"x": tune.uniform(-2.0, 2.0), "seconds": tune.choice([0.0, 0.0, 60.0])}


def _check_timeouts(result: tune.SearchResult, elapsed: float, limit: float) -> None:
    slow = [t for t in result.trials if t.config["seconds"] > 0]
    fast = [t for t in result.trials if t.config["seconds"] == 0]
    assert slow and fast
    assert all(t.timed_out and t.status == "failed" and "trial_timeout=0.5" in t.error for t in slow)
    assert all(t.status == "ok" and not t.timed_out for t in fast)
    assert result.timed_out == slow and result.best_trial in fast
    assert elapsed < limit  # far less than one hanging trial's 60 s
    assert "timed out" in result.summary()


def test_trial_timeout_in_a_process_pool_stops_the_trial() -> None:
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=2) as pool:
        result = tune.random_search(sleepy_objective, HANGS_SOMETIMES, 8, 1, executor=pool,
                                    seed=4, trial_timeout=0.5)
        # the worker stopped the trial itself: the pool is free and answers at once
        assert pool.submit(sum, [1, 2]).result(timeout=5) == 3
    _check_timeouts(result, time.perf_counter() - start, 20.0)
    # the worker's own timer stopped each slow trial after about trial_timeout seconds
    assert all(0.4 < t.time < 3.0 for t in result.timed_out)


def test_trial_timeout_with_the_default_pool_and_hyperband() -> None:
    start = time.perf_counter()
    result = tune.hyperband(sleepy_objective, HANGS_SOMETIMES, 3, eta=3, max_workers=2, seed=1,
                            trial_timeout=0.5)
    _check_timeouts(result, time.perf_counter() - start, 20.0)
    assert not any(t.promoted for t in result.timed_out)


def test_trial_timeout_in_threads_stops_waiting() -> None:
    """A thread cannot be stopped: the search records the timeout and goes on."""
    start = time.perf_counter()
    space = {"x": tune.uniform(-2.0, 2.0), "seconds": tune.choice([0.0, 0.0, 2.5])}
    pool = ThreadPoolExecutor(max_workers=4)
    result = tune.random_search(sleepy_objective, space, 6, 1, executor=pool, seed=0,
                                trial_timeout=0.5)
    elapsed = time.perf_counter() - start
    pool.shutdown(wait=True)  # the slow threads finish on their own
    slow = [t for t in result.trials if t.config["seconds"] > 0]
    assert slow and all(t.timed_out for t in slow)
    assert all(t.status == "ok" for t in result.trials if t.config["seconds"] == 0)
    assert elapsed < 2.4  # did not wait for the 2.5 s trials


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), "1", True])
def test_bad_trial_timeout_is_refused(timeout) -> None:
    with pytest.raises(ValueError, match="trial_timeout must be a positive number of seconds"):
        tune.random_search(quadratic_objective, {"x": tune.uniform(0, 1)}, 2, 1,
                           executor=ThreadPoolExecutor(1), trial_timeout=timeout)


@pytest.mark.parametrize("max_budget, eta", [(0.5, 3), (2, 3), (8, 9), (1, 2)])
def test_hyperband_budget_below_eta_is_refused(max_budget, eta) -> None:
    with pytest.raises(ValueError, match=r"max_budget=.* is less than eta=.*single trial.*Fix"):
        tune.hyperband(quadratic_objective, {"x": tune.uniform(0, 1)}, max_budget, eta=eta,
                       executor=ThreadPoolExecutor(1))


@pytest.mark.parametrize("eta", [2.5, 1, 0, "3"])
def test_hyperband_bad_eta_is_refused(eta) -> None:
    with pytest.raises((TypeError, ValueError), match="eta must be"):
        tune.hyperband_schedule(81, eta=eta)


def test_hyperband_smallest_budget_is_one_bracket_pair() -> None:
    schedule = tune.hyperband_schedule(3, eta=3)  # R = eta: two brackets
    assert [[(r.n, r.budget) for r in b] for b in schedule] == [[(3, 1), (1, 3)], [(2, 3)]]


@pytest.mark.parametrize("run", [
    lambda ex: tune.random_search(quadratic_objective, {"x": tune.uniform(0, 1)}, 10**12, 1, executor=ex),
    lambda ex: tune.hyperband(quadratic_objective, {"x": tune.uniform(0, 1)}, 1e12, executor=ex),
    lambda ex: tune.hyperband(quadratic_objective, {"x": tune.uniform(0, 1)}, 3**12, executor=ex),
    lambda ex: tune.successive_halving(quadratic_objective, {"x": tune.uniform(0, 1)}, 10**12, 1, 9,
                                       executor=ex),
])
def test_searches_of_too_many_trials_are_refused_at_once(run) -> None:
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"asks for [\d,.e+]+ trials, more than teachgrad.tune runs"):
        run(ThreadPoolExecutor(1))
    assert time.perf_counter() - start < 2.0


def test_space_that_cannot_be_sampled_names_the_hyperparameter() -> None:
    objective = []

    def record(config, budget):
        objective.append(config)
        return 0.0

    for space, message in [
        ({"lr": tune.loguniform(1e-3, 1), "shift": tune.uniform(-1e308, 1e308)},
         r"hyperparameter 'shift': uniform\(low=-1e\+308, high=1e\+308\) spans more than the largest float"),
        ({"shift": Uniform(-1.5e308, 1.5e308)}, r"hyperparameter 'shift'.*high - low overflows"),
        ({"n": tune.randint(0, 2**70)}, r"hyperparameter 'n': sampling it fails"),
    ]:
        with pytest.raises(ValueError, match=message):
            tune.random_search(record, space, 3, 1, executor=ThreadPoolExecutor(1))
    assert objective == []
    # wide but representable: fine
    config = tune.sample({"shift": tune.uniform(-1e307, 1e307)}, __import__("numpy").random.default_rng(0))
    assert abs(config["shift"]) <= 1e307


class QuietFutures(Executor):
    """An executor whose futures never say they run, as Dask's: the search's clock for a
    trial then starts when it begins waiting for that trial."""

    def __init__(self, max_workers: int) -> None:
        self.threads = ThreadPoolExecutor(max_workers)

    def submit(self, fn, *args, **kwargs):
        quiet = Future()
        self.threads.submit(fn, *args, **kwargs).add_done_callback(
            lambda f: quiet.set_result(f.result()))
        return quiet

    def shutdown(self, wait=True, **kwargs):
        self.threads.shutdown(wait=wait)


def test_trial_timeout_with_futures_that_never_say_they_run() -> None:
    space = {"x": tune.uniform(-2.0, 2.0), "seconds": tune.choice([0.0, 0.0, 2.5])}
    with QuietFutures(max_workers=6) as pool:
        start = time.perf_counter()
        result = tune.random_search(sleepy_objective, space, 6, 1, executor=pool, seed=0,
                                    trial_timeout=0.4)
        elapsed = time.perf_counter() - start
    assert [t.timed_out for t in result.trials] == [t.config["seconds"] > 0 for t in result.trials]
    assert elapsed < 2.4

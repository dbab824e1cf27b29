"""The same seed gives the same search on any executor: threads, a process pool, Dask."""
from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest

from teachgrad import tune
from teachgrad.tune.objectives import quadratic_objective

SPACE = {"x": tune.uniform(-3.0, 3.0), "unused": tune.choice([1, 2, 3])}


def _outcome(result: tune.SearchResult) -> list:
    """What must not depend on the executor (times do)."""
    return [(t.config_id, t.config, t.budget, None if math.isnan(t.loss) else t.loss, t.status, t.error, t.bracket, t.rung,
             t.promoted) for t in result.trials]


@pytest.fixture(scope="module")
def reference() -> list:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return _outcome(tune.hyperband(quadratic_objective, SPACE, 9, eta=3, executor=pool, seed=7))


def test_default_process_pool_gives_the_same_results(reference) -> None:
    result = tune.hyperband(quadratic_objective, SPACE, 9, eta=3, max_workers=2, seed=7)
    assert _outcome(result) == reference
    assert any(t.status == "failed" for t in result.trials)  # failures travel back from processes


def test_given_process_pool_is_left_running(reference) -> None:
    with ProcessPoolExecutor(max_workers=2) as pool:
        first = tune.hyperband(quadratic_objective, SPACE, 9, eta=3, executor=pool, seed=7)
        second = tune.random_search(quadratic_objective, SPACE, 4, 9, executor=pool, seed=7)
    assert _outcome(first) == reference
    assert len(second.trials) == 4


def test_dask_local_cluster_gives_the_same_results(reference) -> None:
    with tune.local_dask_client(n_workers=2) as client:
        result = tune.hyperband(quadratic_objective, SPACE, 9, eta=3,
                                executor=client.get_executor(), seed=7)
        env = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    assert _outcome(result) == reference
    assert len(env) == 2 and set(env.values()) == {None}  # the nanny's setting was removed


def test_different_seed_gives_different_configs(reference) -> None:
    with ThreadPoolExecutor(max_workers=1) as pool:
        other = tune.hyperband(quadratic_objective, SPACE, 9, eta=3, executor=pool, seed=8)
    assert _outcome(other) != reference


def test_local_dask_client_checks_workers() -> None:
    with pytest.raises(ValueError, match="n_workers must be a positive int, got 0"):
        with tune.local_dask_client(n_workers=0):
            pass

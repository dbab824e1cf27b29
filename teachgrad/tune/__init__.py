"""``teachgrad.tune``: hyperparameter search by random search, successive halving, Hyperband, BOHB.

Gradient descent tunes parameters, not hyperparameters: the learning rate or the
width of a layer are not differentiable knobs of the loss. So we *search*: try
configurations, train each for some budget, keep the best. ::

    from teachgrad import tune

    def objective(config, budget):          # budget: epochs or steps of training
        ...train with config["lr"] for `budget` epochs...
        return validation_loss

    space = {"lr": tune.loguniform(1e-3, 1.0), "width": tune.choice([8, 16, 32])}
    result = tune.hyperband(objective, space, max_budget=81, eta=3, seed=0)
    result.best_config, result.best_loss, result.total_budget, result.trials

BOHB (``tune.bohb``, same arguments) runs Hyperband's brackets but draws new
configurations from a kernel-density model of the good results so far.

Which trials of a rung go on is one replaceable part of the engine, ``tune.promote``
(:mod:`teachgrad.tune.promotion`): ``tg.exercises.plug("tune.promote", promote)`` makes
every search promote with your own rule.

Trials run on any ``concurrent.futures.Executor`` (``executor=``): by default a
local process pool; for more than one machine, a Dask cluster's
``client.get_executor()``.
"""
from .bohb_search import BOHBSettings, bohb
from .cluster import local_dask_client
from .schedule import Rung, hyperband_schedule, successive_halving_schedule
from .search import hyperband, random_search, successive_halving
from .space import Distribution, choice, loguniform, randint, sample, uniform
from .trials import SearchResult, Trial

__all__ = [
    "uniform", "loguniform", "randint", "choice", "sample", "Distribution",
    "random_search", "successive_halving", "hyperband", "bohb", "BOHBSettings",
    "hyperband_schedule", "successive_halving_schedule", "Rung",
    "SearchResult", "Trial", "local_dask_client",
]

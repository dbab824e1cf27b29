"""The objective chapter 13 tunes: a small MLP on the spirals data set.

It lives in the package (not in the notebook) so that worker processes, local
or Dask's, can import it by name.
"""
from __future__ import annotations

import math
import time

import teachgrad as tg

#: SGD steps per unit of budget: ``budget=81`` trains for 81 * 5 = 405 full-batch steps.
STEPS_PER_BUDGET = 5

SPIRALS_SPACE_DOC = """lr: learning rate of SGD with momentum 0.9; width: hidden units of the
two hidden layers; weight_decay: L2 penalty"""


def _spirals_data() -> tuple:
    """Fixed train and validation sets (the same in every process)."""
    X, y = tg.data.make_spirals(n_samples=300, n_classes=3, noise=0.2, seed=0)
    return X[:200], y[:200], X[200:], y[200:]


def spirals_objective(config: dict, budget: float) -> float:
    """Train a 2-``width``-``width``-3 MLP for ``budget * steps_per_budget`` SGD steps and return
    its validation cross-entropy. ``config`` holds ``lr``, ``width``, ``weight_decay`` and,
    optionally, ``steps_per_budget`` (default :data:`STEPS_PER_BUDGET`: what one unit of
    budget is worth, fixed in the search space, e.g. ``{"steps_per_budget": 15, ...}``).

    Deterministic: the same (config, budget) gives the same loss in any process.
    """
    X, y, X_val, y_val = _spirals_data()
    tg.manual_seed(0)
    width = int(config["width"])
    model = tg.nn.Sequential(tg.nn.Linear(2, width), tg.nn.ReLU(), tg.nn.Linear(width, width),
                             tg.nn.ReLU(), tg.nn.Linear(width, 3))
    opt = tg.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9,
                       weight_decay=config.get("weight_decay", 0.0))
    loss_fn = tg.nn.CrossEntropyLoss()
    steps_per_budget = config.get("steps_per_budget", STEPS_PER_BUDGET)
    for _ in range(int(round(budget * steps_per_budget))):
        opt.zero_grad()
        loss = loss_fn(model(X), y)
        loss.backward()
        opt.step()
        if not math.isfinite(loss.item()):
            return float("nan")  # diverged: the search records the trial as failed
    with tg.no_grad():
        return loss_fn(model(X_val), y_val).item()


def quadratic_objective(config: dict, budget: float) -> float:
    """A stand-in for training that costs nothing: ``(x - 1)² + 1 / budget``.

    More budget lowers the loss (as more epochs would), and the best ``x`` is 1.
    It crashes for ``x > 2.5`` and diverges (NaN) for ``x < -2.5``, so a search over
    ``uniform(-3, 3)`` meets failed trials. Used by exercises and tests.
    """
    x = float(config["x"])
    if x > 2.5:
        raise ValueError(f"x={x:.3f} is out of the stable range")
    if x < -2.5:
        return float("nan")
    return (x - 1.0) ** 2 + 1.0 / budget


def sleepy_objective(config: dict, budget: float) -> float:
    """:func:`quadratic_objective` after sleeping ``config["seconds"]`` (default 0): a trial
    that hangs, for trying ``trial_timeout=``. Used by tests."""
    time.sleep(float(config.get("seconds", 0.0)))
    return quadratic_objective(config, budget)

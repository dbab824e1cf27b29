"""Running trials on an executor, and recording every one of them.

A *trial* is one call ``objective(config, budget) -> loss``. Trials are sent to
any ``concurrent.futures.Executor`` (a local process pool by default, or Dask's
``client.get_executor()``) and their results are read back in the order they
were submitted, never in the order they finish: that is what makes a search
give the same results on one worker or many.
"""
from __future__ import annotations

import inspect
import math
import pickle
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Callable, Iterator


@dataclass
class Trial:
    """One evaluation of one configuration at one budget.

    ``status`` is ``"ok"``, or ``"failed"`` when the objective raised (``error`` says
    what) or returned NaN or infinity; a failed trial is never promoted nor best.
    ``bracket``/``rung`` place it in successive halving (0 and 0 for random search);
    ``config_id`` is the same for every trial of one configuration.
    """

    trial_id: int
    config_id: int
    config: dict
    budget: float
    loss: float = math.nan
    time: float = 0.0
    status: str = "pending"
    error: str = ""
    bracket: int = 0
    rung: int = 0
    promoted: bool = False


@dataclass
class SearchResult:
    """Everything a search did: every trial, the best one, the budget it spent."""

    method: str
    trials: list[Trial] = field(default_factory=list)
    #: Successive halving / Hyperband: for each bracket, its rungs as (n, budget).
    schedule: list[list[tuple[int, float]]] = field(default_factory=list)
    seed: int | None = None

    @property
    def succeeded(self) -> list[Trial]:
        return [t for t in self.trials if t.status == "ok"]

    @property
    def failed(self) -> list[Trial]:
        return [t for t in self.trials if t.status == "failed"]

    @property
    def best_trial(self) -> Trial | None:
        """The lowest loss among successful trials at the largest budget any of them reached
        (a loss after 1 epoch is not comparable with one after 81), earliest first on ties."""
        ok = self.succeeded
        if not ok:
            return None
        top = max(t.budget for t in ok)
        return min((t for t in ok if t.budget == top), key=lambda t: (t.loss, t.trial_id))

    @property
    def best_config(self) -> dict | None:
        best = self.best_trial
        return None if best is None else best.config

    @property
    def best_loss(self) -> float:
        best = self.best_trial
        return math.nan if best is None else best.loss

    @property
    def total_budget(self) -> float:
        """The sum of the budgets of every trial run (failed ones too: they cost time)."""
        return sum(t.budget for t in self.trials)

    @property
    def total_time(self) -> float:
        return sum(t.time for t in self.trials)

    def summary(self) -> str:
        best = self.best_trial
        text = (f"{self.method}: {len(self.trials)} trials ({len(self.failed)} failed), "
                f"total budget {self.total_budget:g}")
        if best is not None:
            text += f", best loss {best.loss:.4g} at budget {best.budget:g} with {best.config}"
        return text


def _evaluate(objective: Callable, config: dict, budget: float) -> tuple[Any, float, str]:
    """Run one trial where the executor puts it; an exception becomes a failed result."""
    start = time.perf_counter()
    try:
        loss = objective(config, budget)
    except Exception as err:  # a diverging or crashing trial must not stop the search
        return None, time.perf_counter() - start, f"{type(err).__name__}: {err}"
    return loss, time.perf_counter() - start, ""


def check_objective(objective: Any, executor: Executor | None) -> None:
    """Refuse an objective that cannot be called as ``objective(config, budget)``, or that a
    process pool could not send to its workers, before any trial runs."""
    if not callable(objective):
        raise TypeError(f"objective must be callable as objective(config, budget) -> loss, "
                        f"got {type(objective).__name__}")
    try:
        inspect.signature(objective).bind({}, 1)
    except TypeError:
        raise TypeError("objective must accept two arguments, objective(config, budget) -> loss. "
                        "Fix: def objective(config, budget): ...") from None
    except ValueError:
        pass  # a builtin without a signature: let it run
    if executor is None or isinstance(executor, ProcessPoolExecutor):
        try:
            pickle.dumps(objective)
        except Exception as err:
            raise TypeError(
                f"objective {getattr(objective, '__qualname__', objective)!r} cannot be sent to "
                f"worker processes ({type(err).__name__}: {err}). Fix: define it with def at the "
                "top level of a module or notebook cell (not a lambda or nested function), or pass "
                "executor=concurrent.futures.ThreadPoolExecutor() or a Dask client's get_executor()"
            ) from None
    if executor is not None and not isinstance(executor, Executor):
        raise TypeError(f"executor must be a concurrent.futures.Executor, got "
                        f"{type(executor).__name__}. Fix: ProcessPoolExecutor() or "
                        "dask.distributed.Client(...).get_executor()")


@contextmanager
def executor_or_default(executor: Executor | None, max_workers: int | None) -> Iterator[Executor]:
    """The caller's executor (left running), or a local process pool made and shut down here."""
    if executor is not None:
        yield executor
        return
    with ProcessPoolExecutor(max_workers=max_workers) as pool:
        yield pool


def run_trials(objective: Callable, trials: list[Trial], executor: Executor) -> None:
    """Submit every trial, then fill in each one's loss, time and status in submission order."""
    futures = [executor.submit(_evaluate, objective, t.config, t.budget) for t in trials]
    for trial, future in zip(trials, futures):
        loss, elapsed, error = future.result()
        trial.time = elapsed
        if error:
            trial.status, trial.error = "failed", error
            continue
        if isinstance(loss, bool) or not isinstance(loss, Real):
            for f in futures:
                f.cancel()
            raise TypeError(
                f"objective returned {loss!r} ({type(loss).__name__}) for config {trial.config} at "
                f"budget {trial.budget}: it must return the loss as a number (lower is better). "
                "Fix: return float(loss)"
            )
        trial.loss = float(loss)
        if math.isfinite(trial.loss):
            trial.status = "ok"
        else:
            trial.status, trial.error = "failed", f"loss is {trial.loss} (diverged)"

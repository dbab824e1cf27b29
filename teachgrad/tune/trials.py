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
import signal
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Callable, Iterator


@dataclass
class Trial:
    """One evaluation of one configuration at one budget.

    ``status`` is ``"ok"``, or ``"failed"`` when the objective raised (``error`` says
    what), returned NaN or infinity, or ran past the search's ``trial_timeout``
    (then ``timed_out`` is True); a failed trial is never promoted nor best.
    ``bracket``/``rung`` place it in successive halving (0 and 0 for random search);
    ``config_id`` is the same for every trial of one configuration; ``model_based`` is True
    where BOHB's density model proposed the configuration (False where it was drawn at random).
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
    timed_out: bool = False
    model_based: bool = False


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
    def timed_out(self) -> list[Trial]:
        return [t for t in self.trials if t.timed_out]

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
        timed_out = f", {len(self.timed_out)} of them timed out" if self.timed_out else ""
        text = (f"{self.method}: {len(self.trials)} trials ({len(self.failed)} failed{timed_out}), "
                f"total budget {self.total_budget:g}")
        if best is not None:
            text += f", best loss {best.loss:.4g} at budget {best.budget:g} with {best.config}"
        return text


class TrialTimeout(BaseException):
    """Raised inside an objective when its time is up (a BaseException, so an objective's
    own ``except Exception`` cannot swallow it)."""


def _time_up(signum: int, frame: Any) -> None:
    raise TrialTimeout


@contextmanager
def _timer(seconds: float) -> Iterator[None]:
    """Interrupt the code inside after ``seconds`` with :class:`TrialTimeout`.

    A Unix timer signal reaches the main thread of a process only: that is where a
    process pool's worker runs each trial. In a thread (a thread pool, a Dask worker)
    nothing can interrupt Python code, and the search stops waiting instead
    (:func:`_wait`)."""
    previous = signal.signal(signal.SIGALRM, _time_up)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _timer_or_nothing(seconds: float | None) -> Any:
    if (seconds is None or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()):
        return nullcontext()
    return _timer(seconds)


def _evaluate(objective: Callable, config: dict, budget: float,
              timeout: float | None = None) -> tuple[Any, float, str, bool]:
    """Run one trial where the executor puts it: (loss, seconds, error, timed out).
    An exception becomes a failed result; so does running past ``timeout`` seconds."""
    start = time.perf_counter()
    try:
        with _timer_or_nothing(timeout):
            loss = objective(config, budget)
    except TrialTimeout:
        return None, time.perf_counter() - start, _timeout_message(timeout), True
    except Exception as err:  # a diverging or crashing trial must not stop the search
        return None, time.perf_counter() - start, f"{type(err).__name__}: {err}", False
    return loss, time.perf_counter() - start, "", False


def _timeout_message(timeout: float | None) -> str:
    return f"timed out: ran longer than trial_timeout={timeout:g} s"


def check_timeout(trial_timeout: Any) -> float | None:
    if trial_timeout is None:
        return None
    if isinstance(trial_timeout, bool) or not isinstance(trial_timeout, Real) \
            or not math.isfinite(trial_timeout) or trial_timeout <= 0:
        raise ValueError(f"trial_timeout must be a positive number of seconds or None, got "
                         f"{trial_timeout!r}")
    return float(trial_timeout)


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


def _wait(future: Any, timeout: float | None, executor: Executor) -> tuple[Any, float, str, bool]:
    """A trial's outcome, or a timed-out one once it has run ``timeout`` seconds.

    The clock starts when the future says it runs (thread and process pools tell),
    or, for futures that never say (Dask's), when the search starts waiting for it:
    never sooner. A process pool's worker stops the trial itself on time; waiting
    here is the backstop, so it allows twice as long there (a trial can be queued
    behind one that is about to time out)."""
    if timeout is None:
        return future.result()
    tells = isinstance(executor, (ThreadPoolExecutor, ProcessPoolExecutor))
    limit = 2 * timeout + 1.0 if isinstance(executor, ProcessPoolExecutor) else timeout
    started = None if tells else time.monotonic()
    while True:
        try:
            return future.result(timeout=0.02)
        except FutureTimeout:
            pass
        if started is None and future.running():
            started = time.monotonic()
        if started is not None and time.monotonic() - started > limit:
            future.cancel()
            return None, time.monotonic() - started, _timeout_message(timeout), True


def run_trials(objective: Callable, trials: list[Trial], executor: Executor,
               timeout: float | None = None) -> None:
    """Submit every trial, then fill in each one's loss, time and status in submission order."""
    futures = [executor.submit(_evaluate, objective, t.config, t.budget, timeout) for t in trials]
    for trial, future in zip(trials, futures):
        loss, elapsed, error, timed_out = _wait(future, timeout, executor)
        trial.time, trial.timed_out = elapsed, timed_out
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

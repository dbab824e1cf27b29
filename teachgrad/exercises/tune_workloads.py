"""Chapter 13's build exercise: the learner's promotion rule, tested and then run inside tg.tune.

Exercise 13.2 asks for ``promote(losses, eta)``, the rule by which successive halving
keeps the best ``1/eta`` of a rung. Its checker ends with two tests built here:

* a property test against the engine's rule on losses drawn by hypothesis (ties,
  NaN, inf and -inf, both signs, every eta from 2 to 5, up to 60 trials a rung);
* the chapter's real searches with the learner's rule plugged into ``tune.promote``:
  Hyperband on the spirals and successive halving on a cheap objective whose trials
  crash, diverge and tie, each compared trial by trial with the engine's own run for
  the same seed (a seed the notebook never shows).
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from .. import random as tg_random
from .. import tune
from ..autograd.parts import PartError
from ..tune.promotion import engine_promote
from .building import plugged_workload, property_test, written_by_the_learner
from .core import Mismatch, Test, unseen_rng

NAN, INF = float("nan"), float("inf")

#: The chapter's search space (section 13.2).
SPIRALS_SPACE = {"lr": tune.loguniform(1e-3, 3.0), "width": tune.choice([8, 16, 32]),
                 "weight_decay": tune.loguniform(1e-6, 1e-2)}
#: A space whose trials tie (a few values of x), crash (x > 2.5) and diverge (x < -2.5)
#: under :func:`~teachgrad.tune.objectives.quadratic_objective`.
TIES_AND_FAILURES_SPACE = {"x": tune.choice([-3.0, -1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0])}


def same_losses(a: list[float], b: list[float]) -> bool:
    """Equal lists of floats, NaN equal to NaN."""
    return len(a) == len(b) and all(x == y or (math.isnan(x) and math.isnan(y))
                                    for x, y in zip(a, b))


def run_promote(promote: Callable, losses: list[float], eta: int,
                hint: Callable[[list[float], int, list[int], list[int] | None], str],
                show_input: bool = False) -> None:
    """Call the learner's ``promote`` on a copy of ``losses``; a :class:`Mismatch` unless it
    returns the engine's indices, in its order, and leaves the list as it was."""
    expected = engine_promote(losses, eta)
    given = list(losses)
    with written_by_the_learner("tune.promote", "promote"):
        got = promote(given, eta)
    try:
        got_list = [int(i) for i in got] if got is not None else None
    except (TypeError, ValueError):
        raise Mismatch("promote should return a list of indices", expected, got,
                       "return the indices of the trials that go on, e.g. [4, 1, 6]") from None
    if got_list != expected:
        drawn = f" from {_shown(losses)} with eta = {eta}" if show_input else ""
        raise Mismatch(f"wrong configurations promoted{drawn}",
                       expected, got_list, hint(losses, eta, expected, got_list))
    if not same_losses(given, losses):
        raise Mismatch("promote changed the list of losses it was given", show_values=False,
                       hint="sort a list of indices (sorted(...)), not the losses in place")


def _shown(losses: list[float]) -> str:
    text = "[" + ", ".join(f"{x:.3g}" for x in losses[:12]) + (", ..." if len(losses) > 12 else "")
    return f"{len(losses)} losses {text}]"


def promote_property_test(promote: Callable, hint: Callable) -> Test:
    """``promote`` against the engine's rule on losses drawn by hypothesis."""
    def strategy(st: Any) -> Any:
        tied = st.sampled_from([0.0, 0.25, 1.0, -1.0])
        loss = st.one_of(tied, st.floats(-1e6, 1e6), st.sampled_from([NAN, INF, -INF]))
        return st.tuples(st.lists(loss, min_size=1, max_size=60), st.integers(2, 5))

    return property_test("losses with ties, NaN, inf and -inf, 1 to 60 trials, eta 2 to 5",
                         strategy, lambda example: run_promote(promote, *example, hint, show_input=True),
                         examples=60)


def _outcome(result: tune.SearchResult) -> list[tuple]:
    return [(t.config_id, t.bracket, t.rung, t.budget, t.status, t.promoted,
             None if math.isnan(t.loss) else t.loss) for t in result.trials]


def _search(run: Callable[[ThreadPoolExecutor], tune.SearchResult]) -> tune.SearchResult:
    """One search on a thread (the learner's rule runs here either way), leaving the
    global random generator as it was (the objective seeds it)."""
    saved = tg_random.generator()
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            return run(pool)
    finally:
        tg_random._generator = saved


def _first_difference(engines: tune.SearchResult, yours: tune.SearchResult) -> str:
    for mine, theirs in zip(yours.trials, engines.trials):
        if (mine.config_id, mine.budget) != (theirs.config_id, theirs.budget):
            return (f"trial {mine.trial_id} (bracket {mine.bracket}, rung {mine.rung}): the engine "
                    f"ran configuration {theirs.config_id} at budget {theirs.budget}, your rule "
                    f"configuration {mine.config_id} at budget {mine.budget}")
        if mine.promoted != theirs.promoted:
            return (f"trial {mine.trial_id} (loss {mine.loss:.4g}, bracket {mine.bracket}, rung "
                    f"{mine.rung}) was {'' if mine.promoted else 'not '}promoted by your rule, "
                    f"{'' if theirs.promoted else 'not '}by the engine's")
    return f"your search ran {len(yours.trials)} trials, the engine's {len(engines.trials)}"


def plugged_search_test(promote: Callable, description: str,
                        run: Callable[[ThreadPoolExecutor, int], tune.SearchResult]) -> Test:
    """``run(executor, seed)`` (a search) with the learner's rule plugged into tune.promote:
    the same trials, promotions and best as the engine's own search for the same seed."""
    seed = int(unseen_rng().integers(2**31))

    def check_it() -> None:
        engines = _search(lambda pool: run(pool, seed))
        try:
            with plugged_workload("tune.promote", promote, "tg.tune searched"):
                yours = _search(lambda pool: run(pool, seed))
        except PartError as error:
            raise Mismatch(f"inside tg.tune, {error}", show_values=False,
                           hint="tg.tune calls your promote at the end of every rung but the "
                                "last: run your rule on the losses the message names") from None
        if _outcome(yours) != _outcome(engines) or yours.best_config != engines.best_config:
            raise Mismatch(f"with your promote, the search went another way: "
                           f"{_first_difference(engines, yours)}", show_values=False,
                           hint="tg.tune continues with the indices you return, in your order: "
                                "best first, ties to the earlier trial")

    return Test(f"{description}, seed {seed}, with your promote plugged into tune.promote, "
                "against the engine's own search", check_it)


def plugged_search_tests(promote: Callable) -> list[Test]:
    """The chapter's Hyperband on the spirals, and successive halving through ties and failures."""
    from ..tune.objectives import quadratic_objective, spirals_objective

    def hyperband(pool: ThreadPoolExecutor, seed: int) -> tune.SearchResult:
        return tune.hyperband(spirals_objective, SPIRALS_SPACE, max_budget=27, eta=3,
                              executor=pool, seed=seed)

    def halving(pool: ThreadPoolExecutor, seed: int) -> tune.SearchResult:
        return tune.successive_halving(quadratic_objective, TIES_AND_FAILURES_SPACE, 40, 1, 16,
                                       eta=2, executor=pool, seed=seed)

    return [plugged_search_test(promote, "tune.hyperband on the spirals (R = 27, eta = 3)",
                                hyperband),
            plugged_search_test(promote, "tune.successive_halving of 40 trials, eta = 2, "
                                "through ties, crashes and NaN losses", halving)]

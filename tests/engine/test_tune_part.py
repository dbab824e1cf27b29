"""The part ``tune.promote``: a learner's promotion rule decides which trials of tg.tune go on."""
from __future__ import annotations

import math
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

import teachgrad as tg
from teachgrad import tune
from teachgrad.autograd.parts import PartError
from teachgrad.tune.objectives import quadratic_objective
from teachgrad.tune.promotion import engine_promote, kept_count

SPACE = {"x": tune.uniform(-3.0, 3.0)}  # crashes above 2.5, NaN below -2.5
TIES = {"x": tune.choice([-3.0, 0.0, 0.5, 1.0, 1.5, 3.0])}


@pytest.fixture
def threads():
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield pool


@pytest.fixture(autouse=True)
def nothing_plugged_after():
    yield
    tg.exercises.unplug("tune.promote")


def _outcome(result):
    return [(t.config_id, t.config, t.bracket, t.rung, t.budget, t.status, t.promoted,
             None if math.isnan(t.loss) else t.loss) for t in result.trials]


SEARCHES = {
    "successive halving": lambda pool, space: tune.successive_halving(
        quadratic_objective, space, 40, 1, 16, eta=2, executor=pool, seed=3),
    "hyperband": lambda pool, space: tune.hyperband(
        quadratic_objective, space, 27, eta=3, executor=pool, seed=4),
    "bohb": lambda pool, space: tune.bohb(
        quadratic_objective, space, 27, eta=3, n_iterations=2, executor=pool, seed=5),
}


def _rung_ends(result):
    """How many rungs ended with a promotion step (every rung but a bracket's last one that ran)."""
    rungs = {(t.bracket, t.rung) for t in result.trials}
    last = {b: max(r for bb, r in rungs if bb == b) for b, _ in rungs}
    scheduled_last = {b: len(rs) - 1 for b, rs in enumerate(result.schedule)}
    return sum(1 for b, r in rungs if r < scheduled_last[b] and r <= last[b])


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("space", [SPACE, TIES], ids=["failures", "ties"])
def test_plugging_the_engines_rule_gives_exactly_the_engines_search(threads, search, space):
    plain = SEARCHES[search](threads, space)
    with tg.exercises.plugged("tune.promote", engine_promote) as part:
        plugged = SEARCHES[search](threads, space)
    assert _outcome(plugged) == _outcome(plain)
    assert plugged.best_config == plain.best_config and plugged.best_loss == plain.best_loss
    assert part.calls == _rung_ends(plain) > 0


def test_the_learners_rule_decides_which_trials_go_on(threads):
    def worst_first(losses, eta):  # a (bad) rule of one's own: keep the worst that finished
        finished = sorted((i for i, v in enumerate(losses) if math.isfinite(v)),
                          key=lambda i: -losses[i])
        return finished[: min(len(losses) // eta, len(finished))]

    plain = SEARCHES["successive halving"](threads, SPACE)
    with tg.exercises.plugged("tune.promote", worst_first):
        mine = SEARCHES["successive halving"](threads, SPACE)
    first = [t for t in mine.trials if t.rung == 0]
    ok = sorted((t for t in first if t.status == "ok"), key=lambda t: -t.loss)
    assert [t.config_id for t in mine.trials if t.rung == 1] == [t.config_id for t in ok[:20]]
    assert mine.best_loss > plain.best_loss
    assert _outcome(SEARCHES["successive halving"](threads, SPACE)) == _outcome(plain)  # unplugged


def test_the_rule_gets_a_copy_of_the_losses_with_nan_for_failures(threads):
    seen = []

    def spy(losses, eta):
        seen.append(list(losses))
        keep = engine_promote(losses, eta)
        losses.clear()  # changing the list cannot change the search
        return keep

    plain = SEARCHES["successive halving"](threads, SPACE)
    with tg.exercises.plugged("tune.promote", spy):
        assert _outcome(SEARCHES["successive halving"](threads, SPACE)) == _outcome(plain)
    first = [t for t in plain.trials if t.rung == 0]
    assert len(seen[0]) == 40 and all(
        (math.isnan(a) and t.status == "failed") or a == t.loss for a, t in zip(seen[0], first))
    assert any(math.isnan(a) for a in seen[0])


@pytest.mark.parametrize("returns, says", [
    (lambda losses, eta: None, "returned None (NoneType) for 40 losses and eta = 2"),
    (lambda losses, eta: 3, "returned 3 (int)"),
    (lambda losses, eta: [0.5] * (len(losses) // eta), "0.5 (float) among the indices"),
    (lambda losses, eta: [len(losses)], "the index 40 for 40 losses"),
    (lambda losses, eta: [-1], "the index -1 for 40 losses"),
    (lambda losses, eta: [0, 0], "the index 0 twice"),
    (lambda losses, eta: [i for i, v in enumerate(losses) if math.isnan(v)][:1],
     "a failed trial (loss nan)"),
    (lambda losses, eta: engine_promote(losses, eta)[:-1], "indices for 40 losses and eta = 2"),
    (lambda losses, eta: engine_promote(losses, eta * 2), "indices for 40 losses and eta = 2"),
    (lambda losses, eta: (i // 0 for i in range(3)), "an iterable that raised ZeroDivisionError"),
])
def test_a_rule_returning_what_tune_cannot_use_is_refused_with_what_was_expected(
        threads, returns, says):
    with tg.exercises.plugged("tune.promote", returns), pytest.raises(PartError) as caught:
        SEARCHES["successive halving"](threads, SPACE)
    message = str(caught.value)
    assert caught.value.part == "tune.promote"
    assert message.startswith("your tune.promote (plugged with tg.exercises.plug) returned")
    assert says in message
    assert re.search(r"expected a list of 20 distinct indices from 0 to 39 \(the best "
                     r"len\(losses\) // eta = 40 // 2, failed trials never\)", message)


def test_an_exception_in_the_rule_names_the_part_and_the_learners_line(threads):
    def promote(losses, eta):
        best = sorted(range(len(losses)), key=lambda i: losses[i])
        return best[: len(losses) // eta] + [losses["oops"]]

    with tg.exercises.plugged("tune.promote", promote), pytest.raises(PartError) as caught:
        SEARCHES["hyperband"](threads, SPACE)
    message = str(caught.value)
    assert message.startswith("in your tune.promote (plugged with tg.exercises.plug): TypeError")
    assert "test_tune_part.py, line" in message and 'losses["oops"]' in message
    assert isinstance(caught.value.__cause__, TypeError)


def test_unplug_gives_the_engine_its_rule_back(threads):
    plain = SEARCHES["hyperband"](threads, TIES)
    part = tg.exercises.plug("tune.promote", lambda losses, eta: 1 / 0)
    assert tg.exercises.plugged_parts() == {"tune.promote": part.fn}
    with pytest.raises(PartError):
        SEARCHES["hyperband"](threads, TIES)
    tg.exercises.unplug("tune.promote")
    assert part.fn is None and _outcome(SEARCHES["hyperband"](threads, TIES)) == _outcome(plain)


def test_the_part_is_listed_with_what_it_receives_and_returns():
    part = tg.exercises.parts()["tune.promote"]
    assert "losses" in part.receives and "eta" in part.receives
    assert "indices" in part.returns and part.engine is engine_promote
    assert [e.id for e in tg.exercises.catalog(kind="build") if "tune.promote" in e.plugs_into] \
        == ["13.2"]


def test_a_rung_keeps_floor_n_over_eta_of_the_trials_it_ran():
    nan, inf = math.nan, math.inf
    assert engine_promote([0.3, nan, 0.1, 0.3, inf, 0.2], 2) == [2, 5, 0]
    assert engine_promote([nan, nan, 0.5, nan], 2) == [2]  # only one finished
    assert kept_count([nan, nan, 0.5, nan], 2) == 1 and kept_count([0.1, 0.2], 3) == 0
    assert engine_promote([1.0, -inf, 1.0, 0.0, 1.0, 1.0], 3) == [3, 0]

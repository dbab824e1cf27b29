"""tune.bohb against Falkner, Klein & Hutter (ICML 2018), Algorithm 2 and Eqs. (2)-(3):
Hyperband's schedule, random draws until a budget has N_min + 2 results, the model on the
largest such budget, the good/bad split, the l/g acquisition, ρ, choices, seeds, and a
search that beats random search on a cheap objective."""
from __future__ import annotations

import math
import statistics
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from teachgrad import tune
from teachgrad.tune import bohb_search as B
from teachgrad.tune.kde import decode, encode, fit_kde
from teachgrad.tune.objectives import quadratic_objective
from teachgrad.tune.trials import Trial

SPACE_2D = {"x": tune.uniform(-5.0, 5.0), "y": tune.uniform(-5.0, 5.0)}
MIXED = {"lr": tune.loguniform(1e-3, 1e-1), "width": tune.choice([8, 16, 32]),
         "layers": tune.randint(1, 5), "dropout": tune.uniform(0.0, 0.5), "epochs": 10}


def noisy_bowl(config: dict, budget: float) -> float:
    """A 2-D quadratic with its minimum at (1.3, -0.7), a deterministic ripple as noise, and a
    loss that falls with the budget (as more epochs would)."""
    x, y = config["x"], config["y"]
    ripple = 0.05 * math.sin(37.0 * x + 11.0 * y)
    return (x - 1.3) ** 2 + (y + 0.7) ** 2 + ripple + 1.0 / budget


@pytest.fixture
def threads():
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool


def made_trials(space: dict, rows: list[tuple[dict, float, float]]) -> list[Trial]:
    """Finished trials (config, budget, loss); a NaN loss is a failed trial."""
    trials = []
    for i, (config, budget, loss) in enumerate(rows):
        status = "failed" if math.isnan(loss) else "ok"
        trials.append(Trial(i, i, config, budget, loss=loss, status=status))
    return trials


# --- the schedule ------------------------------------------------------------------------------

def test_the_brackets_are_hyperbands(threads) -> None:
    result = tune.bohb(noisy_bowl, SPACE_2D, 27, 3, executor=threads, seed=0)
    hb = tune.hyperband(noisy_bowl, SPACE_2D, 27, 3, executor=threads, seed=0)
    assert result.schedule == hb.schedule
    for k, rungs in enumerate(tune.hyperband_schedule(27, 3)):
        for i, rung in enumerate(rungs):
            ran = [t for t in result.trials if t.bracket == k and t.rung == i]
            assert len(ran) == rung.n and {t.budget for t in ran} == {rung.budget}
    assert result.total_budget == hb.total_budget == 423
    assert result.method == "bohb"


def test_n_iterations_repeats_the_brackets(threads) -> None:
    result = tune.bohb(noisy_bowl, SPACE_2D, 9, 3, n_iterations=2, executor=threads, seed=0)
    one = [[(r.n, r.budget) for r in rungs] for rungs in tune.hyperband_schedule(9, 3)]
    assert result.schedule == one + one
    assert result.total_budget == 2 * sum(n * b for rungs in one for n, b in rungs)


# --- when there is a model, and on which budget -----------------------------------------------

def test_random_until_a_budget_has_n_min_plus_2_results(threads) -> None:
    # with a model that never gets enough points, BOHB draws exactly Hyperband's configurations
    never = tune.bohb(noisy_bowl, SPACE_2D, 27, 3, min_points_in_model=1000, executor=threads,
                      seed=3)
    hb = tune.hyperband(noisy_bowl, SPACE_2D, 27, 3, executor=threads, seed=3)
    assert [t.config for t in never.trials] == [t.config for t in hb.trials]
    assert not any(t.model_based for t in never.trials)
    # by default the first bracket (nothing observed yet) is random, later ones use the model
    result = tune.bohb(noisy_bowl, SPACE_2D, 27, 3, executor=threads, seed=3)
    assert [t.config for t in result.trials if t.bracket == 0] == \
        [t.config for t in hb.trials if t.bracket == 0]
    assert not any(t.model_based for t in result.trials if t.bracket == 0)
    assert any(t.model_based for t in result.trials if t.bracket > 0)


def test_fit_model_needs_n_min_plus_2_observations() -> None:
    rng = np.random.default_rng(0)
    n_min = 3  # d + 1 for two hyperparameters
    rows = [(tune.sample(SPACE_2D, rng), 1, float(k)) for k in range(n_min + 1)]
    settings = B.BOHBSettings()
    assert B.fit_model(SPACE_2D, made_trials(SPACE_2D, rows), n_min, settings) is None
    rows.append((tune.sample(SPACE_2D, rng), 1, 9.0))
    model = B.fit_model(SPACE_2D, made_trials(SPACE_2D, rows), n_min, settings)
    assert model is not None and model.budget == 1


def test_model_uses_the_largest_budget_with_enough_points() -> None:
    assert B.model_budget({1: 30, 3: 5, 9: 4, 27: 1}, min_points=3) == 3
    assert B.model_budget({1: 30, 3: 5, 9: 5}, min_points=3) == 9
    assert B.model_budget({1: 4, 3: 2}, min_points=3) is None
    rng = np.random.default_rng(1)
    rows = [(tune.sample(SPACE_2D, rng), b, float(k)) for b, count in ((1, 20), (3, 6), (9, 4))
            for k in range(count)]
    model = B.fit_model(SPACE_2D, made_trials(SPACE_2D, rows), 3, B.BOHBSettings())
    at_3 = np.array([encode(SPACE_2D, c) for c, b, _ in rows if b == 3])
    assert model.budget == 3
    # good = best 3 of the 6 at budget 3 (losses 0, 1, 2); bad = worst 3
    np.testing.assert_array_equal(model.good.data, at_3[:3])
    np.testing.assert_array_equal(model.bad.data, at_3[3:])


# --- the good / bad split, Eqs. (2) and (3) ----------------------------------------------------

@pytest.mark.parametrize("n, n_min, q, n_good, n_bad", [
    (100, 3, 15, 15, 85),    # q N_b = 15 good, the other 85 bad
    (10, 4, 15, 4, 6),       # q N_b = 1.5 < N_min: N_min good
    (6, 4, 15, 4, 4),        # N_b < 2 N_min: the two sets overlap
    (40, 3, 50, 20, 20),
])
def test_good_bad_split_sizes(n, n_min, q, n_good, n_bad) -> None:
    losses = np.random.default_rng(n).permutation(n).astype(float)
    good, bad = B.good_bad_split(losses, n_min, q)
    assert (len(good), len(bad)) == (n_good, n_bad)
    np.testing.assert_array_equal(np.sort(losses[good]), np.arange(n_good))      # the best
    np.testing.assert_array_equal(np.sort(losses[bad]), np.arange(n - n_bad, n))  # the worst


def test_failed_trials_are_bad_observations() -> None:
    rows = [({"x": 0.1 * k}, 1, float(k)) for k in range(6)] + [({"x": 2.9}, 1, math.nan)]
    data = B.observations({"x": tune.uniform(-3.0, 3.0)}, made_trials({}, rows))
    vectors, losses = data[1]
    assert losses[-1] == math.inf and vectors.shape == (7, 1)
    good, bad = B.good_bad_split(losses, 2, 15)
    assert 6 in bad and 6 not in good


# --- the KDEs and the acquisition ---------------------------------------------------------------

def test_bandwidths_follow_the_normal_reference_rule() -> None:
    data = np.array([[0.1, 0.0], [0.3, 1.0], [0.5, 2.0], [0.9, 1.0]])
    kde = fit_kde(data, np.array([0, 3]), min_bandwidth=1e-3)
    expected = 1.06 * data.std(axis=0) * 4 ** (-1 / 6)
    np.testing.assert_allclose(kde.bandwidth, [expected[0], min(expected[1], 2 / 3)])
    same = fit_kde(np.full((5, 1), 0.4), np.array([0]), min_bandwidth=1e-3)
    assert same.bandwidth[0] == 1e-3  # all agree: min_bandwidth, never 0


def test_log_pdf_is_the_product_kernel_density() -> None:
    data = np.array([[0.2, 0.0], [0.6, 2.0], [0.7, 2.0]])
    kde = fit_kde(data, np.array([0, 3]), min_bandwidth=1e-3)
    h, lam = kde.bandwidth
    points = np.array([[0.25, 0.0], [0.65, 2.0], [0.4, 1.0]])
    direct = []
    for x, option in points:
        total = 0.0
        for centre, seen in data:
            gauss = math.exp(-0.5 * ((x - centre) / h) ** 2) / (h * math.sqrt(2 * math.pi))
            total += gauss * ((1 - lam) if option == seen else lam / 2)
        direct.append(total / len(data))
    np.testing.assert_allclose(np.exp(kde.log_pdf(points)), direct, rtol=1e-12)
    # over a choice alone, the Aitchison-Aitken density sums to 1 over the options
    only_choice = fit_kde(data[:, 1:], np.array([3]), min_bandwidth=1e-3)
    total = np.exp(only_choice.log_pdf(np.array([[0.0], [1.0], [2.0]]))).sum()
    assert total == pytest.approx(1.0)


def test_the_proposal_maximises_l_over_g_among_the_candidates() -> None:
    # good results near x = 0.2, bad ones spread over the rest: the answer is near 0.2
    space = {"x": tune.uniform(0.0, 1.0)}
    good_x, bad_x = [0.18, 0.2, 0.22], [0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
    rows = [({"x": x}, 1, 0.1 * k) for k, x in enumerate(good_x)]
    rows += [({"x": x}, 1, 10.0 + k) for k, x in enumerate(bad_x)]
    model = B.fit_model(space, made_trials(space, rows), 3, B.BOHBSettings())
    np.testing.assert_array_equal(model.good.data[:, 0], good_x)
    best, candidates, scores = B.propose(model, np.random.default_rng(0), 64, 3.0)
    assert candidates.shape == (64, 1) and np.all((candidates >= 0) & (candidates <= 1))

    def density(x, centres, h):  # the ratio computed from the formula, not from the model's code
        gauss = np.exp(-0.5 * ((x - np.array(centres)) / h) ** 2) / (h * math.sqrt(2 * math.pi))
        return np.mean(gauss)

    h_good, h_bad = model.good.bandwidth[0], model.bad.bandwidth[0]
    ratio = [density(c, good_x, h_good) / density(c, bad_x, h_bad) for c in candidates[:, 0]]
    # the bad KDE holds the worst max(N_min, N_b - N_l) = 6 points
    np.testing.assert_array_equal(np.sort(model.bad.data[:, 0]), sorted(bad_x))
    assert best[0] == candidates[int(np.argmax(ratio)), 0]
    np.testing.assert_allclose(np.exp(scores), ratio, rtol=1e-9)
    assert abs(best[0] - 0.2) < 0.1
    # widened by bandwidth_factor: the candidates spread about 3x the good KDE's bandwidth
    spread = np.std(B.propose(model, np.random.default_rng(1), 4000, 3.0)[1][:, 0] - 0.2)
    assert spread == pytest.approx(math.hypot(np.std(good_x), 3 * model.good.bandwidth[0]), rel=0.1)


def test_random_fraction_is_respected_in_expectation() -> None:
    rng = np.random.default_rng(0)
    rows = [(tune.sample(SPACE_2D, rng), 1, float(k)) for k in range(20)]
    model = B.fit_model(SPACE_2D, made_trials(SPACE_2D, rows), 3, B.BOHBSettings())
    draws = 3000
    for rho in (0.0, 1 / 3, 0.8, 1.0):
        settings = B.BOHBSettings(random_fraction=rho, num_samples=1)  # the coin is what counts
        random_share = sum(not B.draw_config(SPACE_2D, model, rng, settings)[1]
                           for _ in range(draws)) / draws
        assert abs(random_share - rho) <= 4 * math.sqrt(rho * (1 - rho) / draws) + 1e-12


def test_random_fraction_in_a_whole_search(threads) -> None:
    result = tune.bohb(noisy_bowl, SPACE_2D, 81, 3, executor=threads, seed=0)
    later = {t.config_id: t.model_based for t in result.trials if t.bracket > 0}
    share = 1 - sum(later.values()) / len(later)  # 63 configurations after the first bracket
    assert abs(share - 1 / 3) < 4 * math.sqrt(2 / 9 / len(later))


# --- the space: choices, log scales, integers ---------------------------------------------------

def test_encode_decode_every_kind_of_hyperparameter() -> None:
    config = {"lr": 1e-2, "width": 32, "layers": 4, "dropout": 0.125, "epochs": 10}
    vector = encode(MIXED, config)
    np.testing.assert_allclose(vector, [0.5, 2.0, 3.5 / 4, 0.25])  # lr halfway in log space
    assert decode(MIXED, vector) == pytest.approx(config)
    rng = np.random.default_rng(0)
    for _ in range(200):
        c = tune.sample(MIXED, rng)
        back = decode(MIXED, encode(MIXED, c))
        assert back["width"] == c["width"] and back["layers"] == c["layers"]
        assert back["lr"] == pytest.approx(c["lr"])
        assert back["dropout"] == pytest.approx(c["dropout"])
    # every integer owns an equal slice of [0, 1]
    layers = [decode(MIXED, np.array([0.5, 0, u, 0]))["layers"] for u in np.linspace(0, 1, 401)]
    assert [layers.count(k) for k in range(1, 5)] == [100, 100, 100, 101]


def test_categorical_kernel_samples_aitchison_aitken() -> None:
    kde = fit_kde(np.array([[1.0], [1.0], [1.0], [0.0]]), np.array([4]), min_bandwidth=1e-3)
    lam = kde.bandwidth[0]
    draws = kde.sample(np.random.default_rng(0), 40000, bandwidth_factor=3.0)[:, 0]
    # P(option) = 3/4 (1 - λ) + 1/4 λ/3 for option 1, and so on; λ is not widened
    expected = [0.25 * (1 - lam) + 0.75 * lam / 3, 0.75 * (1 - lam) + 0.25 * lam / 3,
                lam / 3, lam / 3]
    got = np.bincount(draws.astype(int), minlength=4) / len(draws)
    np.testing.assert_allclose(got, expected, atol=0.01)


def test_choices_the_good_results_share_are_proposed(threads) -> None:
    space = {"x": tune.uniform(-1.0, 1.0), "kind": tune.choice(["bad", "good", ("a", "tuple")])}

    def objective(config, budget):
        return config["x"] ** 2 + (0.0 if config["kind"] == "good" else 1.0) + 1.0 / budget

    result = tune.bohb(objective, space, 27, 3, executor=threads, seed=0)
    proposed = [t.config["kind"] for t in result.trials if t.model_based and t.rung == 0]
    assert proposed and proposed.count("good") / len(proposed) > 0.8
    assert {t.config["kind"] for t in result.trials} <= {"bad", "good", ("a", "tuple")}
    assert result.best_config["kind"] == "good"


# --- seeds, executors, and a search that helps --------------------------------------------------

def outcome(result):
    return [(t.config, t.budget, t.loss, t.model_based) for t in result.trials]


def test_same_seed_same_configurations(threads) -> None:
    a = tune.bohb(noisy_bowl, SPACE_2D, 27, 3, executor=threads, seed=7)
    b = tune.bohb(noisy_bowl, SPACE_2D, 27, 3, executor=threads, seed=7)
    c = tune.bohb(noisy_bowl, SPACE_2D, 27, 3, executor=threads, seed=8)
    assert outcome(a) == outcome(b) and outcome(a) != outcome(c)
    with ThreadPoolExecutor(max_workers=4) as four:
        d = tune.bohb(noisy_bowl, SPACE_2D, 27, 3, executor=four, seed=7)
    assert outcome(d) == outcome(a)


def test_process_pool_gives_the_same_search(threads) -> None:
    space = {"x": tune.uniform(-3.0, 3.0)}  # quadratic_objective crashes or diverges at the edges
    local = tune.bohb(quadratic_objective, space, 9, 3, max_workers=2, seed=1)
    in_threads = tune.bohb(quadratic_objective, space, 9, 3, executor=threads, seed=1)
    assert [(t.config, t.status, t.model_based) for t in local.trials] == \
        [(t.config, t.status, t.model_based) for t in in_threads.trials]


def test_beats_random_search_with_the_same_budget(threads) -> None:
    seeds = range(9)
    budget = sum(r.n * r.budget for rungs in tune.hyperband_schedule(81, 3) for r in rungs)
    n_random = budget // 81  # full-budget trials for (about) the same total budget: 23
    bohb_best = [tune.bohb(noisy_bowl, SPACE_2D, 81, 3, executor=threads, seed=s).best_loss
                 for s in seeds]
    random_best = [tune.random_search(noisy_bowl, SPACE_2D, n_random, 81, executor=threads,
                                      seed=100 + s).best_loss for s in seeds]
    assert statistics.median(bohb_best) <= statistics.median(random_best)
    assert min(bohb_best) >= -0.05 + 1 / 81 - 1e-9  # the bowl's floor at budget 81: sanity


# --- bad input, refused before any trial --------------------------------------------------------

class Spiky(tune.Distribution):
    def sample(self, rng):
        return 1.0


@pytest.mark.parametrize("kwargs, space, error, words", [
    ({"min_points_in_model": 2}, SPACE_2D, ValueError, "d + 1 = 3"),
    ({"min_points_in_model": 3.5}, SPACE_2D, ValueError, "min_points_in_model"),
    ({"top_n_percent": 0}, SPACE_2D, ValueError, "top_n_percent"),
    ({"top_n_percent": 100}, SPACE_2D, ValueError, "top_n_percent"),
    ({"num_samples": 0}, SPACE_2D, ValueError, "num_samples"),
    ({"random_fraction": 1.5}, SPACE_2D, ValueError, "random_fraction"),
    ({"random_fraction": math.nan}, SPACE_2D, ValueError, "random_fraction"),
    ({"bandwidth_factor": 0}, SPACE_2D, ValueError, "bandwidth_factor"),
    ({"min_bandwidth": -1e-3}, SPACE_2D, ValueError, "min_bandwidth"),
    ({"n_iterations": 0}, SPACE_2D, ValueError, "n_iterations"),
    ({"seed": 1.5}, SPACE_2D, TypeError, "seed"),
    ({"trial_timeout": -1}, SPACE_2D, ValueError, "trial_timeout"),
    ({}, {"x": Spiky()}, TypeError, "cannot describe"),
    ({}, {"epochs": 10}, ValueError, "no hyperparameter to search"),
    ({"eta": 1}, SPACE_2D, ValueError, "eta"),
    ({"max_budget": 2}, SPACE_2D, ValueError, "max_budget=2 is less than eta"),
])
def test_bad_arguments_are_refused_before_any_trial(kwargs, space, error, words) -> None:
    calls = []

    def objective(config, budget):
        calls.append(config)
        return 0.0

    arguments = {"max_budget": 9, "eta": 3, "executor": ThreadPoolExecutor(1), **kwargs}
    with pytest.raises(error, match=words.replace("+", r"\+")):
        tune.bohb(objective, space, **arguments)
    assert calls == []

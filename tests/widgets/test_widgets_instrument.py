"""LiveCurves, LayerStats and TuneView: the data they draw comes from the engine's own calls."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import teachgrad as tg
from teachgrad import nn, tune
from teachgrad.tune.objectives import quadratic_objective
from teachgrad.utils.tensorboard import SummaryWriter
from teachgrad.widgets import LayerStats, LiveCurves, TuneView


class FakeClock:
    """A clock the test moves by hand, so throttling is checked without sleeping."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_live_curves_record_every_point_but_redraw_at_most_max_fps() -> None:
    clock = FakeClock()
    curves = LiveCurves(max_fps=4, clock=clock)
    assert curves.redraws == 1  # the empty picture
    for step in range(1000):
        clock.now = step * 0.001  # 1000 steps in one second
        curves.add_scalar("loss", 1.0 / (step + 1), step)
    assert curves.series["loss"][0] == list(range(1000))
    assert curves.series["loss"][1][-1] == pytest.approx(1e-3)
    assert 4 <= curves.redraws <= 6  # ~4 redraws in the second, not 1000
    curves.redraw()
    assert "loss" in curves.value and "0.001" in curves.to_svg()


def test_live_curves_draw_a_bounded_number_of_points_but_keep_all() -> None:
    from teachgrad.widgets.live_curves import MAX_DRAWN_POINTS, thinned

    curves = LiveCurves(max_fps=1e-9)
    for step in range(10_001):
        curves.add_scalar("loss", float(step), step)
    assert len(curves.series["loss"][0]) == 10_001
    steps, values = thinned(*curves.series["loss"])
    assert len(steps) <= MAX_DRAWN_POINTS + 1 and steps[0] == 0 and steps[-1] == 10_000
    assert values == [float(s) for s in steps]
    assert thinned([1, 2, 3], [4.0, 5.0, 6.0]) == ([1, 2, 3], [4.0, 5.0, 6.0])
    curves.redraw()
    polyline = curves.value.split("<polyline points=\"")[1].split("\"")[0]
    assert len(polyline.split()) == len(steps)


def test_live_curves_listen_to_a_summary_writer(tmp_path) -> None:
    curves = LiveCurves()
    with SummaryWriter(tmp_path) as writer:
        writer.add_listener(curves)
        for step in range(3):
            writer.add_scalar("loss/train", 2.0 - step, step)
            writer.add_scalars("acc", {"train": 0.5 + step / 10, "val": 0.4}, step)
    assert curves.series["loss/train"] == ([0, 1, 2], [2.0, 1.0, 0.0])
    assert curves.series["acc/val"] == ([0, 1, 2], [0.4, 0.4, 0.4])
    curves.redraw()
    svg = curves.to_svg()
    assert svg.count("<polyline") == 3 and "acc/train" in svg


@pytest.mark.parametrize("call, message", [
    (lambda c: c.add_scalar("loss", "x", 0), "needs a number, got str"),
    (lambda c: c.add_scalar("", 1.0, 0), "a tag is a non-empty string"),
])
def test_live_curves_bad_input(call, message) -> None:
    curves = LiveCurves()
    with pytest.raises(TypeError, match=message):
        call(curves)
    assert curves.series == {}
    with pytest.raises(ValueError, match="max_fps must be a positive number"):
        LiveCurves(max_fps=0)


def _train(model, stats, steps=3, lr=0.1):
    X, y = tg.data.make_spirals(n_samples=60, seed=0)
    opt = tg.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        loss = nn.CrossEntropyLoss()(model(X), y)
        opt.zero_grad()
        loss.backward()
        stats.step()
        opt.step()
    return X


def test_layer_stats_one_row_per_layer_and_step() -> None:
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3))
    stats = LayerStats(model)
    assert list(stats.layers) == ["0", "1", "2"]
    _train(model, stats, steps=3)
    assert all([r.step for r in rows] == [0, 1, 2] for rows in stats.history.values())
    assert all(r.weight_grad_norm > 0 for r in stats.history["0"])
    assert math.isnan(stats.history["1"][0].weight_grad_norm)  # ReLU has no parameters
    assert math.isnan(stats.history["0"][0].dead_fraction)  # only ReLU layers have dead units
    assert all(math.isfinite(r.grad_norm) for rows in stats.history.values() for r in rows)


def test_layer_stats_values_against_hand_computation() -> None:
    model = nn.Sequential(nn.Linear(2, 4), nn.ReLU())
    with tg.no_grad():
        model[0].weight.copy_(tg.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.0, 0.0]]))
        model[0].bias.copy_(tg.tensor([0.0, 0.0, -10.0, 0.0]))
    stats = LayerStats(model)
    x = tg.tensor([[1.0, 2.0], [3.0, -1.0]])
    model(x).sum().backward()
    stats.step()
    relu_out = np.array([[1.0, 2.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0]])
    row = stats.history["1"][0]
    assert row.act_mean == pytest.approx(relu_out.mean()) and row.act_std == pytest.approx(relu_out.std())
    assert row.dead_fraction == 0.5  # units 2 and 3 are zero for both examples
    assert row.grad_norm == pytest.approx(math.sqrt(8))  # d(sum)/d(out) = ones(2, 4)
    grad_w = (np.ones((2, 4)) * (relu_out > 0)).T @ x.numpy()
    grad_b = (np.ones((2, 4)) * (relu_out > 0)).sum(0)
    expected = math.sqrt((grad_w**2).sum() + (grad_b**2).sum())
    assert stats.history["0"][0].weight_grad_norm == pytest.approx(expected)
    assert stats.latest("dead_fraction") == {"0": pytest.approx(math.nan, nan_ok=True), "1": 0.5}


def test_layer_stats_sees_a_dead_network_and_vanishing_gradients() -> None:
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))
    with tg.no_grad():
        model[2].bias.fill_(-100.0)  # every unit of layer 3 is pushed below zero
    stats = LayerStats(model)
    _train(model, stats, steps=2)
    assert stats.latest("dead_fraction")["3"] == 1.0
    assert stats.latest("weight_grad_norm")["0"] == 0.0  # nothing flows back past the dead layer
    assert "dead ReLU fraction" in stats.to_svg()


def test_layer_stats_ignores_no_grad_passes_and_removes_hooks() -> None:
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    stats = LayerStats(model)
    with tg.no_grad():
        model(tg.randn(4, 2))
    stats.step()
    assert math.isnan(stats.history["0"][0].act_mean)
    stats.remove()
    assert not any(m._has_hooks() for m in model.modules())
    with pytest.raises(ValueError, match="unknown metric 'loss'"):
        stats.latest("loss")
    with pytest.raises(TypeError, match="LayerStats watches an nn.Module"):
        LayerStats("model")


@pytest.fixture(scope="module")
def searches():
    space = {"x": tune.uniform(-3.0, 3.0)}
    with ThreadPoolExecutor(2) as pool:
        hb = tune.hyperband(quadratic_objective, space, 9, eta=3, executor=pool, seed=0)
        rs = tune.random_search(quadratic_objective, space, 10, 9, executor=pool, seed=0)
    return hb, rs


def test_tune_view_counts_come_from_the_result(searches) -> None:
    hb, rs = searches
    view = TuneView(hb, compare_with=rs)
    brackets = view.brackets()
    assert [b["rungs"] for b in brackets] == hb.schedule
    for k, b in enumerate(brackets):
        trials = [t for t in hb.trials if t.bracket == k]
        assert b["trials"] == len(trials)
        assert b["promoted"] == sum(t.promoted for t in trials)
        assert b["promoted"] + b["stopped"] + b["failed"] + len(
            [t for t in trials if t.rung + 1 == len(b["rungs"]) and t.status == "ok"]) == len(trials)
    svg = view.to_svg()
    assert svg.count("bracket ") >= len(hb.schedule)
    assert f"{hb.total_budget:g}" in svg and f"{rs.total_budget:g}" in svg
    assert svg.count("<circle") + svg.count("<path") == len(hb.trials)


def test_tune_view_refuses_other_things() -> None:
    with pytest.raises(TypeError, match="TuneView draws a teachgrad.tune.SearchResult"):
        TuneView({"trials": []})


def test_chart_keeps_zeros_on_a_log_axis_inside_the_panel() -> None:
    from teachgrad.widgets._chart import Panel

    panel = Panel.fit(10, 20, 100, 50, [0, 1, 2], [1e-3, 0.0, 1.0], ylog=True)
    assert panel.ys == (1e-3, 1.0)  # the 0 does not stretch the axis
    for x, y in [(0, 1e-3), (1, 0.0), (2, 1.0), (5, 1e9)]:
        px, py = panel.px(x, y)
        assert 10 <= px <= 110 and 20 <= py <= 70
    assert panel.px(1, 0.0)[1] == 70  # on the bottom edge

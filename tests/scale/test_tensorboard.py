"""SummaryWriter: event files read back with TensorBoard's own EventAccumulator (no server)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata, plugin_data_pb2

import teachgrad as tg
from teachgrad import nn
from teachgrad.utils.tensorboard import SummaryWriter


def _read(log_dir) -> EventAccumulator:
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    return acc


def test_add_scalar_reads_back(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path) as w:
        for step in range(5):
            w.add_scalar("loss/train", 1.0 / (step + 1), step)
        w.add_scalar("lr", tg.tensor(0.1), 0)  # a one-element tensor is a number
    acc = _read(tmp_path)
    assert sorted(acc.Tags()["scalars"]) == ["loss/train", "lr"]
    events = acc.Scalars("loss/train")
    assert [e.step for e in events] == [0, 1, 2, 3, 4]
    np.testing.assert_allclose([e.value for e in events], [1, 1 / 2, 1 / 3, 1 / 4, 1 / 5], rtol=1e-6)
    assert acc.Scalars("lr")[0].value == pytest.approx(0.1)


def test_add_scalars_writes_one_run_per_key(tmp_path: Path) -> None:
    w = SummaryWriter(tmp_path)
    for step in range(3):
        w.add_scalars("loss", {"train": step + 0.5, "val": step + 1.5}, step)
    w.close()
    for key, offset in (("train", 0.5), ("val", 1.5)):
        acc = _read(tmp_path / f"loss_{key}")
        assert [e.value for e in acc.Scalars("loss")] == [offset, offset + 1, offset + 2]


def test_add_histogram_counts_match_numpy(tmp_path: Path) -> None:
    values = np.random.default_rng(0).normal(size=1000)
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("weights", tg.tensor(values), 3, bins=10)
    histo = _read(tmp_path).Histograms("weights")[0]
    assert histo.step == 3
    h = histo.histogram_value
    counts, edges = np.histogram(values, bins=10)
    # as torch.utils.tensorboard lays them out: an empty bucket whose right edge is the left one
    assert list(h.bucket) == [0] + counts.tolist()
    np.testing.assert_allclose(h.bucket_limit, edges)
    assert h.num == 1000 and h.min == values.min() and h.max == values.max()
    assert h.sum == pytest.approx(values.sum()) and h.sum_squares == pytest.approx((values**2).sum())


def test_add_graph_groups_operations_by_module(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 3))
    with SummaryWriter(tmp_path) as w:
        w.add_graph(model, tg.randn(5, 2))
    graph = _read(tmp_path).Graph()
    nodes = {n.name: n for n in graph.node}
    ops = [n for n in graph.node if n.op not in ("Parameter", "Output")]
    assert {n.name.split("/")[0] for n in ops} == {"0", "1", "2"}  # one box per module
    assert {"0/weight", "0/bias", "2/weight", "2/bias"} <= set(nodes)
    second_linear = next(n for n in ops if n.name.startswith("2/"))
    assert "2/weight" in second_linear.input and any(i.startswith("1/") for i in second_linear.input)
    dims = [d.size for d in nodes["output"].attr["_output_shapes"].list.shape[0].dim]
    assert dims == [5, 3]


def test_add_hparams_for_the_hparams_dashboard(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path) as w:
        w.add_hparams({"lr": 0.1, "width": 16, "optimizer": "sgd", "nesterov": False},
                      {"hparam/loss": 0.25}, run_name="trial0")
    acc = _read(tmp_path / "trial0")
    content = acc.PluginTagToContent(metadata.PLUGIN_NAME)
    start = plugin_data_pb2.HParamsPluginData.FromString(content[metadata.SESSION_START_INFO_TAG])
    hp = start.session_start_info.hparams
    assert hp["lr"].number_value == 0.1 and hp["width"].number_value == 16
    assert hp["optimizer"].string_value == "sgd" and hp["nesterov"].bool_value is False
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content[metadata.EXPERIMENT_TAG])
    assert [m.name.tag for m in experiment.experiment.metric_infos] == ["hparam/loss"]
    assert acc.Scalars("hparam/loss")[0].value == 0.25


def test_flush_makes_events_visible_before_close(tmp_path: Path) -> None:
    w = SummaryWriter(tmp_path, flush_secs=3600)
    w.add_scalar("x", 1.0, 0)
    w.flush()
    assert _read(tmp_path).Scalars("x")[0].value == 1.0
    w.close()
    w.close()  # twice is fine
    with pytest.raises(RuntimeError, match="this SummaryWriter is closed"):
        w.add_scalar("x", 2.0, 1)


def test_listeners_get_every_scalar(tmp_path: Path) -> None:
    class Recorder:
        def __init__(self):
            self.points = []

        def add_scalar(self, tag, value, step, walltime):
            self.points.append((tag, value, step))

    rec = Recorder()
    with SummaryWriter(tmp_path) as w:
        w.add_listener(rec)
        w.add_scalar("loss", 0.5, 1)
        w.add_scalars("acc", {"train": 0.9}, 1)
    assert rec.points == [("loss", 0.5, 1), ("acc/train", 0.9, 1)]
    with pytest.raises(TypeError, match="a listener needs an add_scalar"):
        SummaryWriter(tmp_path).add_listener(object())


def test_unwritable_log_dir_fails_at_construction(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(PermissionError, match=r"SummaryWriter cannot write to log_dir .*a_file/runs"
                       r".*Fix: pass a directory you can write to"):
        SummaryWriter(blocker / "runs")
    with pytest.raises(PermissionError, match="cannot write to log_dir '/proc/teachgrad-runs'"):
        SummaryWriter("/proc/teachgrad-runs")


def test_default_log_dir_is_under_runs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with SummaryWriter(comment="_lr0.1") as w:
        assert w.get_logdir().startswith("runs" + os.sep) and w.get_logdir().endswith("_lr0.1")
    assert any((tmp_path / w.get_logdir()).iterdir())


@pytest.mark.parametrize("call, error, message", [
    (lambda w: w.add_scalar("loss", "low", 0), TypeError, "value must be a number, got str"),
    (lambda w: w.add_scalar("loss", tg.ones(3), 0), ValueError, r"shape \[3\]"),
    (lambda w: w.add_scalar(3, 1.0, 0), TypeError, "a tag is a non-empty string"),
    (lambda w: w.add_scalar("loss", 1.0, 1.5), TypeError, "global_step must be an int"),
    (lambda w: w.add_scalars("loss", {}, 0), TypeError, "non-empty dict"),
    (lambda w: w.add_histogram("h", np.array([1.0, np.nan])), ValueError, "NaN or infinity"),
    (lambda w: w.add_histogram("h", np.array([])), ValueError, "no values"),
    (lambda w: w.add_hparams({"lr": [1, 2]}, {"m": 1.0}), TypeError, "hparam 'lr' must be"),
    (lambda w: w.add_hparams({"lr": 0.1}, {"m": float("nan")}), ValueError, "metric 'm' is nan"),
    (lambda w: w.add_graph(nn.Linear(1, 1)), TypeError, "needs an example input"),
    (lambda w: w.add_graph("model", 1), TypeError, "add_graph takes an nn.Module"),
])
def test_bad_input_is_refused_and_nothing_is_written(tmp_path: Path, call, error, message) -> None:
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(error, match=message):
            call(w)
    acc = _read(tmp_path)
    assert acc.Tags()["scalars"] == [] and acc.Tags()["histograms"] == []
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []


def test_add_graph_under_no_grad_is_explained(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path) as w, tg.no_grad():
        with pytest.raises(RuntimeError, match="no grad_fn"):
            w.add_graph(nn.Linear(2, 2), tg.randn(1, 2))

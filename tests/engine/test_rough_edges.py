"""clip_grad_norm_ of order 0, add_histogram as PyTorch writes it, and DataLoader without
batching, each against what PyTorch did (tests/fixtures/torch_rough_edges.json, written
by scripts/record_rough_edges.py)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from sample_description import describe as describe_sample, samples
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import teachgrad as tg
from teachgrad.utils.data import DataLoader, default_convert
from teachgrad.utils.tensorboard import SummaryWriter

FIXTURE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "torch_rough_edges.json").read_text())


def _number(x):
    return float(x) if isinstance(x, str) else x


# -- clip_grad_norm_ -----------------------------------------------------------------------
ACCEPTED = [c for c in FIXTURE["clip_grad_norm"] if c["norm_type"] not in (-1, -2.5, "-inf")]
REFUSED = [c for c in FIXTURE["clip_grad_norm"] if c not in ACCEPTED]


@pytest.mark.parametrize("case", ACCEPTED, ids=lambda c: f"p={c['norm_type']},max={c['max_norm']}")
def test_clip_grad_norm_matches_pytorch(case):
    params = [tg.zeros(np.shape(g), dtype=tg.float64, requires_grad=True) for g in case["grads"]]
    for p, g in zip(params, case["grads"]):
        p.grad = tg.tensor(g, dtype=tg.float64)
    total = tg.nn.utils.clip_grad_norm_(params, case["max_norm"], norm_type=case["norm_type"])
    assert total.item() == pytest.approx(_number(case["total"]), rel=1e-12)
    for p, want in zip(params, case["clipped"]):
        np.testing.assert_allclose(p.grad.numpy(), want, rtol=1e-12, atol=0)


def test_clip_grad_norm_zero_order_counts_nonzero_gradients():
    a, b = tg.zeros(3, requires_grad=True), tg.zeros(2, requires_grad=True)
    a.grad, b.grad = tg.tensor([0.0, 4.0, 1.0]), tg.tensor([0.0, 0.0])
    assert tg.nn.utils.clip_grad_norm_([a, b], 0.5, norm_type=0).item() == 1.0  # one grad not zero
    np.testing.assert_allclose(a.grad.numpy(), [0.0, 2.0, 0.5], rtol=1e-5)


@pytest.mark.parametrize("case", REFUSED[::2], ids=lambda c: f"p={c['norm_type']}")
def test_negative_orders_pytorch_takes_are_refused_with_the_reason(case):
    p = tg.zeros(2, requires_grad=True)
    p.grad = tg.ones(2)
    order = float(case["norm_type"]) if isinstance(case["norm_type"], str) else case["norm_type"]
    with pytest.raises(ValueError, match=r"positive number or inf.*or 0.*refuses the negative orders"):
        tg.nn.utils.clip_grad_norm_([p], 1.0, norm_type=order)
    assert p.grad.tolist() == [1.0, 1.0]


# -- add_histogram -------------------------------------------------------------------------
def _written(tmp_path, tag, values, **options):
    with SummaryWriter(tmp_path) as w:
        w.add_histogram(tag, values, 0, **options)
    acc = EventAccumulator(str(tmp_path), size_guidance={"histograms": 0})
    acc.Reload()
    return acc.Histograms(tag)[0].histogram_value


@pytest.mark.parametrize("case", FIXTURE["histogram"], ids=lambda c: f"{c['name']}-{c['bins']}")
def test_histogram_buckets_match_pytorch(case, tmp_path):
    h = _written(tmp_path, "h", tg.tensor(case["values"], dtype=tg.float64), bins=case["bins"])
    assert list(h.bucket) == case["bucket"]
    np.testing.assert_allclose(h.bucket_limit, case["bucket_limit"], rtol=1e-15)
    for field in ("min", "max", "num", "sum", "sum_squares"):
        assert getattr(h, field) == pytest.approx(case[field], rel=1e-12), field


def test_histogram_default_bins_are_tensorflows(tmp_path):
    case = next(c for c in FIXTURE["histogram"] if c["bins"] == "tensorflow" and c["name"] == "normal")
    h = _written(tmp_path, "w", tg.tensor(case["values"]))  # no bins=: PyTorch's default
    assert list(h.bucket) == case["bucket"]


def test_histogram_of_a_parameter_that_requires_grad(tmp_path):
    layer = tg.nn.Linear(20, 30)
    assert layer.weight.requires_grad
    h = _written(tmp_path, "weight", layer.weight)
    assert h.num == 600 and sum(h.bucket) == 600
    assert h.min == pytest.approx(layer.weight.detach().numpy().min())


def test_histogram_max_bins_merges_neighbours(tmp_path):
    values = np.random.default_rng(1).normal(size=500)
    counts, _ = np.histogram(values, bins=40)
    h = _written(tmp_path, "m", values, bins=40, max_bins=7)  # 40 // 7 = 5 buckets per bucket
    assert len(h.bucket) <= 9 and sum(h.bucket) == 500
    assert list(h.bucket)[1:] == counts.reshape(-1, 5).sum(axis=1).tolist()


@pytest.mark.parametrize("options, error", [
    ({"bins": "tensorfloww"}, r"bins='tensorfloww' is not a binning rule: use 'tensorflow'"),
    ({"bins": 2.5}, r"bins must be a rule name, a number of bins or a list of edges"),
    ({"max_bins": 0}, r"max_bins must be a positive int"),
])
def test_bad_bins_are_refused(options, error, tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises((ValueError, TypeError), match=error):
            w.add_histogram("h", np.ones(3), **options)


# -- DataLoader(batch_size=None) ----------------------------------------------------------
def describe(value) -> dict:
    return describe_sample(value, tg.Tensor, lambda t: t.dtype.name)


def test_no_batching_converts_each_sample_as_pytorch():
    got = [describe(s) for s in DataLoader(samples(), batch_size=None)]
    assert got == FIXTURE["dataloader_no_batching"]["default_convert"]


def test_no_batching_applies_collate_fn_to_each_sample():
    got = [describe(s) for s in DataLoader(samples(), batch_size=None, collate_fn=lambda s: ("one", s))]
    assert got == FIXTURE["dataloader_no_batching"]["collate_fn_per_sample"]


def test_default_convert_copies_arrays_and_keeps_tensors():
    array = np.arange(4.0)
    tensor = default_convert(array)
    array[0] = 9.0
    assert tensor.tolist()[0] == 0.0  # teachgrad owns its arrays (PyTorch would share this one)
    t = tg.ones(2)
    assert default_convert(t) is t and default_convert("text") == "text"
    assert math.isnan(default_convert(float("nan")))


def test_batched_loading_is_unchanged():
    data = [(np.array([1.0, 2.0]), 1), (np.array([3.0, 4.0]), 0)]
    xb, yb = next(iter(DataLoader(data, batch_size=2)))
    assert xb.tolist() == [[1.0, 2.0], [3.0, 4.0]] and yb.tolist() == [1, 0]

"""WeightedRandomSampler: the frequencies of its draws (chi-square tests at fixed seeds,
with and without replacement), reproducibility, its place in a DataLoader, and its
refusals (PyTorch's errors, compared in scripts/differential_nn_layers.py too)."""
import numpy as np
import pytest

import teachgrad as tg
from teachgrad.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

#: chi-square at p = 0.001: a correct sampler fails one seed in a thousand, a wrong one
#: (a weight off by 5%) fails at these sample sizes almost surely
CHI2_CRITICAL = {2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52}


def _chi_square(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = counts.sum() * probabilities
    return float(((counts - expected) ** 2 / expected).sum())


def test_draws_with_replacement_follow_the_weights():
    weights = [1.0, 2.0, 3.0, 4.0, 0.0, 10.0]
    draws = np.array(list(WeightedRandomSampler(weights, 200_000, generator=3)))
    counts = np.bincount(draws, minlength=6)
    assert counts[4] == 0  # weight 0: never
    kept = np.array([0, 1, 2, 3, 5])
    p = np.array(weights)[kept] / sum(weights)
    assert _chi_square(counts[kept], p) < CHI2_CRITICAL[4]


def test_a_wrong_weight_would_be_caught():
    # the same test against weights off by 5% for one index fails: the test has power
    draws = np.array(list(WeightedRandomSampler([1.0, 2.0, 3.0], 200_000, generator=4)))
    wrong = np.array([1.05, 2.0, 3.0]) / 6.05
    assert _chi_square(np.bincount(draws), wrong) > CHI2_CRITICAL[2]


def test_without_replacement_the_first_and_second_draws_follow_sequential_drawing():
    weights = np.array([5.0, 1.0, 2.0, 0.5])
    p = weights / weights.sum()
    sampler = WeightedRandomSampler(weights, 2, replacement=False, generator=tg.Generator().manual_seed(9))
    pairs = np.array([list(sampler) for _ in range(20_000)])
    assert (pairs[:, 0] != pairs[:, 1]).all()
    assert _chi_square(np.bincount(pairs[:, 0], minlength=4), p) < CHI2_CRITICAL[3]
    # P(second = j) = sum over i != j of p_i * p_j / (1 - p_i): drawn, then the rest renormalised
    second = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(4) if i != j) for j in range(4)])
    assert _chi_square(np.bincount(pairs[:, 1], minlength=4), second) < CHI2_CRITICAL[3]


def test_without_replacement_every_index_once_and_weight_zero_last():
    sampler = WeightedRandomSampler([0.0, 3.0, 0.0, 1.0, 2.0], 5, replacement=False, generator=1)
    for _ in range(50):
        order = list(sampler)
        assert sorted(order) == [0, 1, 2, 3, 4] and set(order[3:]) == {0, 2}


def test_a_generator_or_the_global_seed_makes_the_draws_reproducible():
    def draws(**kw):
        return list(WeightedRandomSampler([0.2, 0.5, 0.3], 30, **kw))

    assert draws(generator=tg.Generator().manual_seed(7)) == draws(generator=tg.Generator().manual_seed(7))
    tg.manual_seed(3)
    first = draws()
    tg.manual_seed(3)
    assert draws() == first
    sampler = WeightedRandomSampler([0.2, 0.5, 0.3], 30, generator=7)
    assert list(sampler) != list(sampler)  # a new draw every epoch


def test_weights_of_any_sequence_kind_and_the_attributes_pytorch_has():
    for weights in ([1, 2], (1.0, 2.0), np.array([1.0, 2.0], np.float32), tg.tensor([1.0, 2.0])):
        sampler = WeightedRandomSampler(weights, 4)
        assert sampler.weights.dtype == tg.float64 and sampler.weights.tolist() == [1.0, 2.0]
        assert sampler.num_samples == len(sampler) == 4 and sampler.replacement is True
    sampler = WeightedRandomSampler(tg.tensor([1.0, 2.0], requires_grad=True), 3)
    assert sampler.weights.requires_grad is False


def test_it_drives_a_data_loader():
    data = TensorDataset(tg.arange(10).float(), tg.arange(10))
    rare = [1.0] * 9 + [0.0]  # the last sample never comes
    loader = DataLoader(data, batch_size=4, sampler=WeightedRandomSampler(rare, 10, generator=2))
    batches = [labels.tolist() for _, labels in loader]
    assert [len(b) for b in batches] == [4, 4, 2] and 9 not in sum(batches, [])


@pytest.mark.parametrize("args, kwargs, error, message", [
    (([1.0, -1.0, 2.0], 3), {}, RuntimeError, r"probability entry < 0"),
    (([1.0, float("nan")], 3), {}, RuntimeError, r"probability entry < 0"),
    (([1.0, float("inf")], 3), {}, RuntimeError, r"= infinity or NaN"),
    (([0.0, 0.0], 3), {}, RuntimeError, r"sum of probabilities <= 0"),
    (([], 3), {}, RuntimeError, r"sum of probabilities <= 0"),
    (([1.0, 1.0], 3), {"replacement": False}, RuntimeError, r"n_sample > prob_dist.size\(-1\)"),
    (([[1.0, 2.0]], 3), {}, ValueError, r"1d sequence but given weights have shape \(1, 2\)"),
    ((2.0, 3), {}, ValueError, r"have shape \(\)"),
    (("ab", 3), {}, TypeError, "sequence of numbers"),
    (([1.0], 0), {}, ValueError, "num_samples=0"),
    (([1.0], True), {}, ValueError, "num_samples=True"),
    (([1.0], 2), {"replacement": "yes"}, ValueError, "replacement=yes"),
    (([1.0], 2), {"generator": "seed"}, TypeError, "generator must be"),
])
def test_bad_arguments_are_refused_when_the_sampler_is_made(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        WeightedRandomSampler(*args, **kwargs)

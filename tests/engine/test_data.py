"""teachgrad.data: synthetic data sets, TensorDataset, DataLoader, random_split."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.data import (
    DataLoader, Dataset, TensorDataset, make_moons, make_regression, make_spirals, random_split,
)


# -- synthetic sets ------------------------------------------------------------------------
def test_moons_shapes_labels_and_geometry():
    X, y = make_moons(101, seed=0)
    assert X.shape == (101, 2) and X.dtype == tg.float32
    assert y.shape == (101,) and y.dtype == tg.int64
    x, labels = X.numpy().astype(np.float64), y.numpy()
    assert (labels == 0).sum() == 50 and (labels == 1).sum() == 51
    # without noise, class 0 lies on the unit circle around (0, 0), class 1 on one around (1, 0.5)
    top, bottom = x[labels == 0], x[labels == 1]
    np.testing.assert_allclose(np.hypot(top[:, 0], top[:, 1]), 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.hypot(bottom[:, 0] - 1, bottom[:, 1] - 0.5), 1.0, rtol=1e-6)


def test_moons_noise_and_reproducibility():
    a, _ = make_moons(50, noise=0.1, seed=3)
    b, _ = make_moons(50, noise=0.1, seed=3)
    c, _ = make_moons(50, noise=0.1, seed=4)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(a.numpy(), c.numpy())
    tg.manual_seed(7)
    d, _ = make_moons(50, noise=0.1)
    tg.manual_seed(7)
    e, _ = make_moons(50, noise=0.1)
    np.testing.assert_array_equal(d.numpy(), e.numpy())  # the global seed governs unseeded calls


def test_spirals_classes_and_radius():
    X, y = make_spirals(100, n_classes=3, noise=0.3, seed=0)
    assert X.shape == (100, 2) and X.dtype == tg.float32 and y.dtype == tg.int64
    assert np.bincount(y.numpy()).tolist() == [34, 33, 33]
    radius = np.hypot(*X.numpy().T)  # the noise moves the angle only
    assert radius.min() >= 0.0 and radius.max() <= 1.0 + 1e-6
    with pytest.raises(ValueError, match="n_classes must be at least 1, got 0"):
        make_spirals(10, n_classes=0)


def test_regression_follows_its_coefficients():
    X, y, coef = make_regression(500, n_features=3, noise=0.0, bias=1.5, seed=0, return_coef=True)
    assert X.shape == (500, 3) and y.shape == (500,) and y.dtype == tg.float32 and coef.shape == (3,)
    np.testing.assert_allclose(y.numpy(), X.numpy() @ coef.numpy() + 1.5, rtol=1e-5, atol=1e-5)
    X, y, coef = make_regression(2000, n_features=2, noise=0.5, seed=1, return_coef=True)
    residual = y.numpy() - X.numpy() @ coef.numpy()
    assert abs(residual.std() - 0.5) < 0.03


# -- datasets ----------------------------------------------------------------------------------
def test_tensor_dataset_rows_and_size_check():
    X, y = tg.arange(12).reshape(6, 2), tg.arange(6)
    dataset = TensorDataset(X, y)
    assert len(dataset) == 6
    row, label = dataset[4]
    assert row.tolist() == [8, 9] and label.item() == 4
    with pytest.raises(ValueError, match=r"Size mismatch between tensors: .* got shapes \(6, 2\), \(5,\)"):
        TensorDataset(X, tg.arange(5))


def test_random_split_partitions_the_dataset():
    dataset = TensorDataset(tg.arange(10))
    train, test = random_split(dataset, [7, 3], generator=0)
    assert (len(train), len(test)) == (7, 3)
    assert sorted(train.indices + test.indices) == list(range(10))
    assert [len(part) for part in random_split(dataset, [0.5, 0.3, 0.2], generator=0)] == [5, 3, 2]
    with pytest.raises(ValueError, match=r"Sum of input lengths \(9\) does not equal the length of the input dataset \(10\)"):
        random_split(dataset, [5, 4])


# -- DataLoader -----------------------------------------------------------------------------------
def _dataset(n: int = 10) -> TensorDataset:
    return TensorDataset(tg.arange(n * 2).reshape(n, 2).float(), tg.arange(n))


def test_loader_batches_in_order_without_shuffle():
    loader = DataLoader(_dataset(), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 == len(batches)
    assert [yb.tolist() for _, yb in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    xb, _ = batches[0]
    assert xb.shape == (4, 2) and xb.dtype == tg.float32


def test_loader_drop_last():
    loader = DataLoader(_dataset(), batch_size=4, drop_last=True)
    assert len(loader) == 2
    assert [len(yb) for _, yb in loader] == [4, 4]


def test_loader_shuffle_visits_every_sample_once_in_new_orders():
    loader = DataLoader(_dataset(20), batch_size=6, shuffle=True, generator=0)
    epochs = [np.concatenate([yb.numpy() for _, yb in loader]) for _ in range(2)]
    for order in epochs:
        assert sorted(order.tolist()) == list(range(20))
    assert not np.array_equal(epochs[0], epochs[1])
    again = DataLoader(_dataset(20), batch_size=6, shuffle=True, generator=0)
    np.testing.assert_array_equal(np.concatenate([yb.numpy() for _, yb in again]), epochs[0])


def test_loader_keeps_features_and_labels_together():
    loader = DataLoader(_dataset(), batch_size=3, shuffle=True, generator=1)
    for xb, yb in loader:
        np.testing.assert_array_equal(xb.numpy()[:, 0], 2 * yb.numpy())


def test_loader_collates_any_dataset():
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return tg.tensor([float(i), float(i * i)]), i

    xb, yb = next(iter(DataLoader(Squares(), batch_size=3)))
    assert xb.tolist() == [[0.0, 0.0], [1.0, 1.0], [2.0, 4.0]]
    assert yb.tolist() == [0, 1, 2] and yb.dtype == tg.int64


def test_loader_rejects_bad_batch_size():
    with pytest.raises(ValueError, match="batch_size should be a positive integer value, but got batch_size=0"):
        DataLoader(_dataset(), batch_size=0)

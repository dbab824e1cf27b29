"""tg.utils.data as torch.utils.data spells it: datasets, samplers, DataLoader, random_split."""
from collections import namedtuple

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.utils.data import (
    BatchSampler, DataLoader, Dataset, RandomSampler, Sampler, SequentialSampler, Subset,
    SubsetRandomSampler, TensorDataset, default_collate, random_split,
)


def _dataset(n: int = 10) -> TensorDataset:
    return TensorDataset(tg.arange(n * 2).reshape(n, 2).float(), tg.arange(n))


def test_tg_data_and_tg_utils_data_are_one_implementation():
    assert tg.data.DataLoader is tg.utils.data.DataLoader is DataLoader
    assert tg.data.TensorDataset is TensorDataset and tg.data.random_split is random_split


def test_a_tensor_dataset_batch_is_a_list_like_pytorch_s():
    xb, yb = batch = next(iter(DataLoader(_dataset(), batch_size=4)))
    assert isinstance(batch, list) and xb.shape == (4, 2) and yb.tolist() == [0, 1, 2, 3]


def test_the_same_generator_seed_gives_the_same_epochs_and_the_global_seed_too():
    def epochs(loader):
        return [np.concatenate([yb.numpy() for _, yb in loader]).tolist() for _ in range(2)]

    seeded = epochs(DataLoader(_dataset(), batch_size=3, shuffle=True,
                               generator=tg.Generator().manual_seed(5)))
    assert seeded == epochs(DataLoader(_dataset(), batch_size=3, shuffle=True,
                                       generator=tg.Generator().manual_seed(5)))
    assert seeded[0] != seeded[1] and sorted(seeded[0]) == list(range(10))
    tg.manual_seed(1)
    first = epochs(DataLoader(_dataset(), batch_size=3, shuffle=True))
    tg.manual_seed(1)
    assert epochs(DataLoader(_dataset(), batch_size=3, shuffle=True)) == first


def test_collate_handles_tuples_dicts_namedtuples_numbers_strings_and_arrays():
    Point = namedtuple("Point", "x y")
    samples = [{"image": np.full((2,), i, np.float32), "label": i, "weight": 0.5 * i,
                "name": f"s{i}", "point": Point(tg.tensor(float(i)), i), "flag": i > 0}
               for i in range(3)]
    batch = default_collate(samples)
    assert batch["image"].shape == (3, 2) and batch["image"].dtype == tg.float32
    assert batch["label"].dtype == tg.int64 and batch["weight"].dtype == tg.float64
    assert batch["name"] == ["s0", "s1", "s2"] and batch["flag"].tolist() == [False, True, True]
    assert isinstance(batch["point"], Point) and batch["point"].x.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match=r"found object\. Fix: pass collate_fn="):
        default_collate([object()])


def test_a_custom_sampler_batch_sampler_collate_fn_and_no_batching():
    class EvenFirst(Sampler):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(list(range(0, self.n, 2)) + list(range(1, self.n, 2)))

        def __len__(self):
            return self.n

    loader = DataLoader(_dataset(6), batch_size=4, sampler=EvenFirst(6))
    assert [yb.tolist() for _, yb in loader] == [[0, 2, 4, 1], [3, 5]]
    pairs = DataLoader(_dataset(6), batch_sampler=[[5, 0], [1]])
    assert [yb.tolist() for _, yb in pairs] == [[5, 0], [1]] and len(pairs) == 2
    joined = DataLoader(_dataset(4), batch_size=2, collate_fn=lambda s: [int(y) for _, y in s])
    assert list(joined) == [[0, 1], [2, 3]]
    singles = list(DataLoader(_dataset(3), batch_size=None))
    assert len(singles) == 3 and singles[1][1].item() == 1


def test_samplers():
    data = list(range(5))
    assert list(SequentialSampler(data)) == [0, 1, 2, 3, 4]
    order = list(RandomSampler(data, generator=0))
    assert sorted(order) == data and order == list(RandomSampler(data, generator=0))
    drawn = list(RandomSampler(data, replacement=True, num_samples=12, generator=1))
    assert len(drawn) == 12 and set(drawn) <= set(data)
    more = list(RandomSampler(data, num_samples=7, generator=2))  # a whole permutation, then 2
    assert len(more) == 7 and sorted(more[:5]) == data and len(set(more[5:])) == 2
    assert sorted(SubsetRandomSampler([4, 1, 3], generator=0)) == [1, 3, 4]
    batches = BatchSampler(SequentialSampler(data), 2, drop_last=False)
    assert list(batches) == [[0, 1], [2, 3], [4]] and len(batches) == 3
    assert list(BatchSampler(range(5), 2, drop_last=True)) == [[0, 1], [2, 3]]


def test_random_split_by_counts_or_fractions_with_a_generator():
    dataset = _dataset(10)
    a, b = random_split(dataset, [0.75, 0.25], generator=tg.Generator().manual_seed(0))
    assert (len(a), len(b)) == (8, 2)  # floor 7 and 2, the remainder to the first
    assert sorted(a.indices + b.indices) == list(range(10))
    again, _ = random_split(dataset, [0.75, 0.25], generator=tg.Generator().manual_seed(0))
    assert again.indices == a.indices
    assert isinstance(a, Subset) and a[0][1].item() == a.indices[0]
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        random_split(TensorDataset(tg.arange(2)), [0.9, 0.1])
    with pytest.raises(ValueError, match="Fraction at index 0 is not between 0 and 1"):
        random_split(dataset, [1.5, -0.5])
    with pytest.raises(ValueError, match=r"lengths must be non-negative ints .* got \[5, 2.5\]"):
        random_split(dataset, [5, 2.5])


@pytest.mark.parametrize("make, error, message", [
    (lambda: DataLoader(_dataset(), batch_size=0), ValueError,
     "batch_size should be a positive integer value, but got batch_size=0"),
    (lambda: DataLoader(_dataset(), shuffle=True, sampler=SequentialSampler(range(10))), ValueError,
     "sampler option is mutually exclusive with shuffle"),
    (lambda: DataLoader(_dataset(), batch_size=2, batch_sampler=[[0]]), ValueError,
     "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"),
    (lambda: DataLoader(_dataset(), batch_size=None, drop_last=True), ValueError,
     "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"),
    (lambda: DataLoader(_dataset(), num_workers=-1), ValueError, "num_workers option should be non-negative"),
    (lambda: DataLoader(_dataset(), timeout=5), NotImplementedError, "does not support timeout=5"),
    (lambda: DataLoader(_dataset(), persistent_workers=True), NotImplementedError,
     "does not support persistent_workers=True"),
    (lambda: DataLoader(_dataset(), shuffle=True, generator="seed"), TypeError,
     "generator must be a tg.Generator, a numpy Generator or an int seed, got str"),
    (lambda: RandomSampler(range(3), replacement=1), TypeError, "replacement should be a boolean value"),
    (lambda: RandomSampler(range(3), num_samples=0), ValueError,
     "num_samples should be a positive integer value, but got num_samples=0"),
    (lambda: BatchSampler(range(3), 2, drop_last="no"), ValueError, "drop_last should be a boolean value"),
    (lambda: TensorDataset(tg.ones(3), [1, 2, 3]), TypeError, "TensorDataset takes tensors, got list"),
    (lambda: tg.Generator().manual_seed(-1), ValueError, "manual_seed expects a non-negative int"),
])
def test_bad_arguments_are_refused(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_num_workers_is_accepted_with_a_warning_and_loading_stays_in_process():
    with pytest.warns(UserWarning, match="loads batches in the calling process; num_workers=2 is ignored"):
        loader = DataLoader(_dataset(4), batch_size=2, num_workers=2)
    assert [yb.tolist() for _, yb in loader] == [[0, 1], [2, 3]]


def test_any_dataset_subclass_works():
    class Squares(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return {"x": tg.tensor([float(i)]), "y": i * i}

    batch = next(iter(DataLoader(Squares(), batch_size=4)))
    assert batch["x"].shape == (4, 1) and batch["y"].tolist() == [0, 1, 4, 9]

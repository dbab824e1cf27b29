"""Gather and scatter-add on the device against numpy's indexing and np.add.at."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import numpy as np
import pytest

from teachgrad.kernels import indexing
from teachgrad.kernels.transfer import download, upload

rng = np.random.default_rng(3)
X = rng.standard_normal((4, 5, 6))
IDX = np.array([3, -1, 0, 3], dtype=np.int64)  # repeats and a negative index
IDX2 = np.array([[1, 2], [0, 4]], dtype=np.int64)


def device_index(index):
    return tuple(upload(i) if isinstance(i, np.ndarray) else i for i in index)


CASES = {
    "basic slices": (slice(1, 4, 2), None, -1),
    "one array": (IDX,),
    "array in the middle": (slice(None), IDX2, 2),  # int next to the array: adjacent, stays in place
    "arrays split by a slice": (IDX[:2], slice(None), IDX[2:] % 6),  # advanced axes go first
    "two arrays together": (IDX % 4, IDX % 5),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gather_matches_numpy(name):
    index = CASES[name]
    got = download(indexing.gather(upload(X), device_index(index)))
    np.testing.assert_array_equal(got, X[index])


def test_basic_indexing_is_a_view_not_a_copy():
    x = upload(X)
    view = indexing.gather(x, (1, slice(None, None, 2)))
    assert view.buffer is x.buffer
    assert view.shape == (3, 6) and view.strides == (12, 1) and view.offset == 30


@pytest.mark.parametrize("name", ["one array", "array in the middle", "arrays split by a slice"])
def test_scatter_add_matches_np_add_at(name):
    index = CASES[name]
    values = rng.standard_normal(X[index].shape)
    out = upload(np.zeros_like(X))
    indexing.scatter(out, device_index(index), upload(values), accumulate=True)
    expected = np.zeros_like(X)
    np.add.at(expected, index, values)
    np.testing.assert_allclose(download(out), expected)


def test_scatter_assign_with_a_broadcast_value():
    out = upload(X.copy())
    indexing.scatter(out, device_index((slice(None), np.array([0, 2]))), 9.0, accumulate=False)
    expected = X.copy()
    expected[:, [0, 2]] = 9.0
    np.testing.assert_array_equal(download(out), expected)


def test_an_int_out_of_bounds_is_refused():
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        indexing.gather(upload(X), (4,))


def test_too_many_indices_are_refused():
    with pytest.raises(IndexError, match="too many indices: 4 given for a 3-d array"):
        indexing.gather(upload(X), (0, 0, 0, 0))

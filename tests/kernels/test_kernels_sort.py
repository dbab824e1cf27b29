"""The rank-sort kernel against its numpy spec (a stable argsort), and the cuda backend's
sort along any axis of a strided view against the CPU backends' sort."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import numpy as np
import pytest

from teachgrad.backends import get_backend
from teachgrad.kernels import sort
from teachgrad.kernels.transfer import to_device

rng = np.random.default_rng(3)


def spec(x: np.ndarray, descending: bool) -> np.ndarray:
    """numpy's stable argsort, NaN last ascending and first descending (PyTorch's order)."""
    key = np.where(np.isnan(x), np.inf, x)
    if descending:
        key = np.where(np.isnan(x), -np.inf, -x)
    return np.argsort(key, axis=1, kind="stable")


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, 33), (0, 4), (3, 0)])
def test_rank_sort_matches_a_stable_argsort(shape, dtype, descending):
    x = rng.integers(-3, 4, size=shape).astype(dtype)  # small integers: many ties
    if dtype != np.int64 and x.size > 2:
        x.flat[1] = np.nan
    values, indices = sort.sort_rows(to_device(x), descending)
    order = spec(x.astype(np.float64), descending)
    np.testing.assert_array_equal(indices.copy_to_host(), order)
    np.testing.assert_array_equal(values.copy_to_host(), np.take_along_axis(x, order, 1))


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("descending", [False, True])
def test_cuda_backend_sorts_a_transposed_view_along_any_axis(axis, descending):
    x = rng.integers(0, 5, size=(4, 3, 5)).astype(np.float32)
    cpu, cuda = get_backend("cpu"), get_backend("cuda")
    view = cuda.permute(cuda.from_numpy(x.transpose(2, 0, 1).copy()), (1, 2, 0))  # strided
    values, indices = cuda.sort(view, axis, descending)
    want_values, want_indices = cpu.sort(x, axis, descending)
    np.testing.assert_array_equal(cuda.to_numpy(indices), want_indices)
    np.testing.assert_array_equal(cuda.to_numpy(values), want_values)

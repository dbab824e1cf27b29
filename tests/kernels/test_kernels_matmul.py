"""The three matmul kernels against numpy: ragged sizes, both float types, batches."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import numpy as np
import pytest
from numba import cuda

from teachgrad.kernels import matmul
from teachgrad.kernels.transfer import to_device

rng = np.random.default_rng(2)
SMALL = {  # small tiles keep the simulator quick and still leave ragged edges
    "naive": {},
    "tiled": {"tile": 4},
    "register": {"block": (8, 8, 4), "per_thread": (2, 2)},
}


def run(name, A, B, batch):
    C = cuda.device_array((batch, A.shape[1], B.shape[2]), dtype=A.dtype)
    matmul.KERNELS[name](to_device(A), to_device(B), C, **SMALL[name])
    return C.copy_to_host()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(matmul.KERNELS))
@pytest.mark.parametrize("M,K,N", [(9, 7, 10), (1, 13, 3), (5, 1, 6)])
def test_matches_numpy_on_ragged_sizes(name, dtype, M, K, N):
    A = rng.standard_normal((1, M, K)).astype(dtype)
    B = rng.standard_normal((1, K, N)).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(run(name, A, B, 1), A @ B, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", list(matmul.KERNELS))
def test_batched_with_a_shared_right_operand(name):
    A = rng.standard_normal((3, 6, 5)).astype(np.float32)
    B = rng.standard_normal((1, 5, 7)).astype(np.float32)  # one matrix for every product
    np.testing.assert_allclose(run(name, A, B, 3), A @ B, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(matmul.KERNELS))
def test_batched_with_a_shared_left_operand(name):
    A = rng.standard_normal((1, 5, 3)).astype(np.float64)
    B = rng.standard_normal((2, 3, 6)).astype(np.float64)
    np.testing.assert_allclose(run(name, A, B, 2), A @ B, rtol=1e-12)


def test_default_tile_sizes_are_correct_too():
    A = rng.standard_normal((2, 19, 11)).astype(np.float32)
    B = rng.standard_normal((2, 11, 17)).astype(np.float32)
    for name, launcher in matmul.KERNELS.items():
        C = cuda.device_array((2, 19, 17), dtype=np.float32)
        launcher(to_device(A), to_device(B), C)
        np.testing.assert_allclose(C.copy_to_host(), A @ B, rtol=1e-5, atol=1e-5, err_msg=name)


def test_shapes_that_do_not_fit_are_refused_before_launch():
    A, B = to_device(np.ones((1, 2, 3))), to_device(np.ones((1, 4, 2)))
    C = cuda.device_array((1, 2, 2))
    with pytest.raises(ValueError, match=r"matmul shapes do not fit: A \(1, 2, 3\) @ B \(1, 4, 2\)"):
        matmul.naive(A, B, C)


def test_register_block_must_split_evenly_over_threads():
    A, B, C = (to_device(np.ones((1, 4, 4))) for _ in range(3))
    with pytest.raises(ValueError, match=r"block \(8, 6\) must be a multiple of the per-thread block \(4, 4\)"):
        matmul.register_blocked(A, B, C, block=(8, 6, 4), per_thread=(4, 4))

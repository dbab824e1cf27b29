"""Launch checks the simulator would skip: each is a clear error, raised before launch."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import numpy as np
import pytest
from numba import cuda

from teachgrad.kernels.launch import device_limits, launch
from teachgrad.kernels.transfer import to_device


@cuda.jit
def add_one(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


def test_a_good_launch_runs():
    x = to_device(np.zeros(10, np.float32))
    launch(add_one, 2, 8, x)
    np.testing.assert_array_equal(x.copy_to_host(), np.ones(10, np.float32))


def test_too_many_threads_per_block():
    x = to_device(np.zeros(4))
    with pytest.raises(ValueError) as error:
        launch(add_one, 1, (64, 32), x)
    assert str(error.value) == (
        "add_one: a block of 64 x 32 = 2048 threads is over the limit of 1024 threads per "
        "block. Use at most 1024 threads per block (e.g. 256) and more blocks."
    )


def test_block_axis_over_its_own_limit():
    x = to_device(np.zeros(4))
    with pytest.raises(ValueError) as error:
        launch(add_one, 1, (1, 1, 128), x)
    assert str(error.value) == (
        "add_one: block size 128 along z is over the limit of 64 for that axis "
        "(limits x, y, z = (1024, 1024, 64)). Move threads to another axis or use at most 64 along z."
    )


def test_grid_axis_over_its_limit():
    x = to_device(np.zeros(4))
    with pytest.raises(ValueError, match=r"add_one: grid size 70000 along y is over the limit of 65535 blocks"):
        launch(add_one, (1, 70000), 32, x)


def test_shared_memory_over_48_kib():
    x = to_device(np.zeros(4))
    with pytest.raises(ValueError) as error:
        launch(add_one, 1, 32, x, shared_bytes=64 * 1024)
    assert str(error.value) == (
        "add_one: 65536 bytes of shared memory per block is over the limit of 49152 bytes "
        "(48 KiB). Use smaller tiles."
    )


def test_a_kernels_declared_shared_memory_counts():
    from teachgrad.kernels import matmul

    kernel = matmul.tiled_kernel(np.dtype(np.float64), 64)  # 2 * 64*64 * 8 bytes = 64 KiB
    A = to_device(np.ones((1, 2, 2)))
    with pytest.raises(ValueError, match="tiled_matmul: 65536 bytes of shared memory per block"):
        launch(kernel, (1, 1, 1), (8, 8), A, A, A)


def test_host_array_instead_of_device_array():
    with pytest.raises(TypeError) as error:
        launch(add_one, 1, 32, np.zeros((3, 4)))
    assert str(error.value) == (
        "add_one: argument 0 is a numpy array (host memory) of shape (3, 4), but kernels read "
        "device memory. Copy it to the device first, e.g. with "
        "teachgrad.kernels.transfer.to_device(array)."
    )


def test_nothing_ran_when_a_check_failed():
    x = to_device(np.zeros(4, np.float32))
    with pytest.raises(ValueError):
        launch(add_one, 1, 2048, x)
    np.testing.assert_array_equal(x.copy_to_host(), np.zeros(4, np.float32))


def test_simulator_limits_are_cudas():
    limits = device_limits()
    assert limits.max_threads_per_block == 1024
    assert limits.max_block_dims == (1024, 1024, 64)
    assert limits.max_shared_bytes_per_block == 48 * 1024
    assert limits.warp_size == 32

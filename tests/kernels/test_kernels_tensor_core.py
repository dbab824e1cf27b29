"""The tensor-core model: float16 inputs, float32 sums, against numpy on ragged sizes; the
mma calls counted in the launch and the notes' FLOP accounting."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import numpy as np
import pytest
from numba import cuda

import teachgrad as tg
from teachgrad.kernels import tensor_core as tc
from teachgrad.kernels.transfer import to_device, to_host

rng = np.random.default_rng(11)


def rounded_reference(a, b):
    """What tensor cores compute: inputs rounded to float16, products and sums in float32."""
    return np.matmul(np.asarray(a, np.float16).astype(np.float32),
                     np.asarray(b, np.float16).astype(np.float32))


@pytest.mark.parametrize("fragment", tc.FRAGMENTS)
@pytest.mark.parametrize("M,K,N", [(19, 23, 7), (1, 1, 1), (5, 33, 2), (16, 16, 16)])
def test_matches_numpy_with_rounded_inputs(M, K, N, fragment):
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    record = tc.record_tensor_core_matmul(a, b, fragment)
    assert record.c.dtype == np.float32 and record.c.shape == (M, N)
    np.testing.assert_allclose(record.c, rounded_reference(a, b), rtol=1e-5, atol=1e-5)
    assert record.mma_calls == record.expected_mma_calls()


def test_small_integers_are_exact_and_rounding_to_float16_shows():
    a = rng.integers(-8, 9, size=(2, 9, 21)).astype(np.float64)
    b = rng.integers(-8, 9, size=(1, 21, 6)).astype(np.float64)  # shared by both products
    c = tc.tensor_core_matmul(a, b, fragment=8)
    assert np.array_equal(c, (a @ b).astype(np.float32))
    x = np.array([[1 + 2 ** -12]])  # not a float16: rounds to 1
    assert tc.tensor_core_matmul(x, np.ones((1, 1)))[0, 0] == 1.0


def test_float32_accumulation_keeps_what_float16_would_lose():
    """2048 + 1 is not a float16 (its spacing there is 2), but the sum is float32."""
    a = np.ones((1, 2049))
    b = np.ones((2049, 1))
    assert tc.tensor_core_matmul(a, b)[0, 0] == 2049.0


def test_flop_accounting_of_the_notes():
    assert tc.FLOPS_PER_TENSOR_CORE_STEP == 128  # (4 + 4 - 1) * 4 * 4 + 4 * 4
    assert tc.mma_flops(4) == 128 and tc.mma_flops(16) == 64 * 128 == 2 * 16 ** 3
    assert tc.tensor_core_peak_tflops() == pytest.approx(130.5, abs=0.05)
    record = tc.record_tensor_core_matmul(np.ones((33, 20)), np.ones((20, 17)), fragment=16)
    assert record.mma_calls == 3 * 2 * 2  # tiles of C (3 x 2), steps of K (2)
    assert record.flops == 12 * 8192 and record.tensor_core_steps == 12 * 64
    assert record.useful_flops == 2 * 33 * 20 * 17
    assert record.utilisation == pytest.approx(22440 / 98304)
    exact = tc.record_tensor_core_matmul(np.ones((32, 16)), np.ones((16, 48)), fragment=16)
    assert exact.flops == exact.useful_flops and exact.utilisation == 1.0


def test_kernel_level_checks_types_and_fragments_before_launching():
    A = to_device(np.zeros((1, 4, 4), np.float16))
    C = cuda.device_array((1, 4, 4), np.float32)
    with pytest.raises(TypeError, match="float16.*float32"):
        tc.mma_matmul(to_device(np.zeros((1, 4, 4), np.float32)), A, C)
    with pytest.raises(ValueError, match="fragment must be one of"):
        tc.mma_matmul(A, A, C, fragment=6)
    with pytest.raises(ValueError, match="shapes do not fit"):
        tc.mma_matmul(A, to_device(np.zeros((1, 3, 4), np.float16)), C)
    with pytest.raises(ValueError, match="shapes do not fit"):
        tc.record_tensor_core_matmul(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="2-D or 3-D"):
        tc.record_tensor_core_matmul(np.ones(3), np.ones((3, 1)))


def test_without_counts_the_launch_still_multiplies():
    a, b = rng.standard_normal((1, 7, 5)), rng.standard_normal((1, 5, 9))
    C = cuda.device_array((1, 7, 9), np.float32)
    tc.mma_matmul(to_device(a.astype(np.float16)), to_device(b.astype(np.float16)), C, fragment=4)
    np.testing.assert_allclose(to_host(C), rounded_reference(a, b), rtol=1e-5, atol=1e-5)


def test_entry_point_on_the_kernels_package():
    assert tg.kernels.tensor_core_matmul is tc.tensor_core_matmul

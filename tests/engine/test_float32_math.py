"""float32_math's exp and erf against float64 numpy and math: error in ulp (units in the
last place of the correctly rounded float32) over dense ranges, and the special values
(infinities, NaN, signed zeros, underflow and overflow) exactly as IEEE 754's exp and erf."""
import teachgrad as tg  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import math

import numpy as np
import pytest
from numba import njit

from teachgrad.backends.float32_math import (
    FMA_OPTIONS, erf_float32, exp_float32, float32_from_bits, power_of_two_float32)

_LOOP_OPTIONS = {key: value for key, value in FMA_OPTIONS.items() if key != "cache"}


@njit(**_LOOP_OPTIONS)
def _exp_loop(out, x):
    for i in range(x.size):
        out[i] = exp_float32(x[i])


@njit(**_LOOP_OPTIONS)
def _erf_loop(out, x):
    for i in range(x.size):
        out[i] = erf_float32(x[i])


@njit
def _floats_from_bits_and_powers_of_two(bits, exponents):
    floats, powers = np.empty(bits.size, np.float32), np.empty(exponents.size, np.float32)
    for i in range(bits.size):
        floats[i] = float32_from_bits(bits[i])
    for i in range(exponents.size):
        powers[i] = power_of_two_float32(exponents[i])
    return floats, powers


def _apply(loop, values):
    x = np.asarray(values, np.float32)
    out = np.empty_like(x)
    loop(out, x)
    return out


def _ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the float32 spacing at the correctly rounded result."""
    spacing = np.spacing(np.abs(exact.astype(np.float32))).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / spacing


def test_bits_become_the_float32_they_spell():
    patterns = np.array([0, 1, 0x3F800000, 0x7F800000, -0x80000000, 0x7F7FFFFF, 12345678], np.int32)
    exponents = np.arange(-126, 128, dtype=np.int32)
    floats, powers = _floats_from_bits_and_powers_of_two(patterns, exponents)
    np.testing.assert_array_equal(floats.view(np.int32), patterns)
    np.testing.assert_array_equal(powers, np.ldexp(np.float32(1), exponents))


def test_exp_is_within_one_ulp_and_a_hundredth_over_the_whole_range():
    # dense over every input whose exp is a finite, nonzero float32: normal results from
    # -87.34 up, subnormal ones (gradual underflow) below
    x = np.concatenate([np.linspace(-104.0, 89.0, 2_000_001, dtype=np.float32),
                        np.random.default_rng(0).uniform(-2, 2, 200_000).astype(np.float32)])
    with np.errstate(over="ignore"):
        exact = np.exp(x.astype(np.float64))
        finite = (exact.astype(np.float32) > 0) & np.isfinite(exact.astype(np.float32))
    got = _apply(_exp_loop, x)
    assert _ulp_error(got[finite], exact[finite]).max() <= 1.01
    assert (got[~finite & (x < 0)] == 0).all() and np.isposinf(got[~finite & (x > 0)]).all()


@pytest.mark.parametrize("x, expected", [
    (0.0, 1.0), (-0.0, 1.0), (np.inf, np.inf), (-np.inf, 0.0), (1e-30, 1.0), (-1e-30, 1.0),
    (88.72283, 3.4027985e38),  # the largest input with a finite exp
    (88.7229, np.inf), (1000.0, np.inf), (3e38, np.inf),  # overflow to inf
    (-87.33, 1.1832107e-38),  # the smallest normal results
    (-102.5, 2.0 ** -148), (-103.97, 2.0 ** -149),  # subnormals
    (-103.98, 0.0), (-200.0, 0.0), (-3e38, 0.0),  # underflow to 0
])
def test_exp_special_values_and_both_ends(x, expected):
    assert _apply(_exp_loop, [x])[0] == np.float32(expected)


def test_exp_of_nan_is_nan():
    assert np.isnan(_apply(_exp_loop, [np.nan, -np.nan])).all()


def test_erf_is_within_four_ten_millionths_of_math_erf():
    x = np.concatenate([np.linspace(-7.0, 7.0, 1_000_001, dtype=np.float32),
                        np.geomspace(1e-30, 1e-2, 2001, dtype=np.float32)])
    exact = np.array([math.erf(v) for v in x.astype(np.float64)])
    got = _apply(_erf_loop, x)
    assert np.abs(got - exact).max() <= 4e-7
    small = np.abs(x) < 1e-2  # near 0 erf is about 2x/sqrt(pi): relative error matters
    assert _ulp_error(got[small], exact[small]).max() <= 4


def test_erf_special_values():
    got = _apply(_erf_loop, [np.inf, -np.inf, 0.0, -0.0, 4.0, -4.0, 1e4, -3e38, np.nan])
    np.testing.assert_array_equal(got[:2], [1.0, -1.0])
    assert got[2] == 0 and not np.signbit(got[2]) and got[3] == 0 and np.signbit(got[3])
    np.testing.assert_array_equal(got[4:8], [1.0, -1.0, 1.0, -1.0])
    assert np.isnan(got[8])

"""GELU's (and softmax's and log_softmax's) forward and backward in one pass over memory,
for the CPU backends.

Composed from primitives, GELU is about five whole-array passes forward (scale, erf,
add, multiply, multiply) and ten backward; on a transformer's MLP activations (half a
million floats) those passes cost thirty times PyTorch's one fused loop. So the CPU
backends hand large contiguous arrays to the loops below (see
``Backend.fused_activation``): ordinary Python that numba compiles once per dtype
(``cache=True`` keeps the machine code on disk), the same formulas as
:mod:`teachgrad.ops.pointwise_activation`, element by element.

GELU is one loop each way, with fused multiply-adds allowed. For float32 its ``erf`` and
``exp`` are :mod:`teachgrad.backends.float32_math`'s, made of ``*``, ``+``, ``/`` and
comparisons only, so the loop runs in SIMD lanes; the C library's ``erff`` and ``expf``
would be a call per element, ten times slower. float64 takes the C library's ``erf`` (a
call per element: float64 is the precise dtype, not the fast one) and numpy's
vectorised ``exp``, in the output array before the loop.
The tanh GELU is one loop each way the same way, with its tanh written through
``exp(-2|u|)``. Softmax takes numpy's vectorised ``exp``, in one scratch array or in the
output itself.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import overload

from .float32_math import FMA_OPTIONS, erf_float32, exp_float32

_OPTIONS = dict(cache=True, error_model="numpy")
# For the row sums: "reassoc" lets the compiler add a row in SIMD lanes (eight or sixteen
# partial sums, added at the end) instead of one element after the other; the sum then
# differs from numpy's (pairwise) in the last bits, as any two summation orders do.
_ROW_SUM_OPTIONS = dict(_OPTIONS, fastmath={"reassoc"})
# GELU's loops may fuse a multiply and an add into one instruction (float32_math's option)
_GELU_OPTIONS = FMA_OPTIONS
SQRT_HALF = math.sqrt(0.5)
NORMAL_PDF_SCALE = 1.0 / math.sqrt(2.0 * math.pi)
TANH_SCALE = math.sqrt(2.0 / math.pi)
TANH_CUBIC = 0.044715
# float32 copies: numba freezes them into the loops as float32 constants
HALF_32, ONE_32, SQRT_HALF_32 = np.float32(0.5), np.float32(1.0), np.float32(SQRT_HALF)
TWO_32, THREE_32 = np.float32(2.0), np.float32(3.0)  # (exact: in float64 loops too)


def normal_cdf(v):
    """Phi(v) = (1 + erf(v / sqrt(2))) / 2 (in Python; compiled code takes the overload below)."""
    return 0.5 * (1.0 + math.erf(v * SQRT_HALF))


# Phi in ``v``'s own precision, chosen when a loop is compiled for a dtype: float32
# throughout with float32_math's erf (float64 constants would widen every element, and a
# float32 SIMD lane is half as wide, so twice as many per instruction), or float64 with
# the C library's.
@overload(normal_cdf, jit_options=dict(fastmath=_GELU_OPTIONS["fastmath"]))
def _normal_cdf_compiled(v):
    if v == types.float32:
        return lambda v: HALF_32 * (ONE_32 + erf_float32(v * SQRT_HALF_32))
    return lambda v: 0.5 * (1.0 + math.erf(v * SQRT_HALF))


# The exponentials: for float32 computed in the loop itself (float32_math's, in SIMD lanes);
# for float64 computed before the loop by numpy's vectorised exp into the output array,
# which the loop reads as ``given`` and then overwrites (numba's own exp is a C library
# call per element, slower than numpy's whole-array pass).
def exp_or_given(v, given):
    """exp(v), which for float64 is ``given`` (compiled: the overload below, which computes
    it for float32)."""
    return given


@overload(exp_or_given, jit_options=dict(fastmath=_GELU_OPTIONS["fastmath"]))
def _exp_or_given_compiled(v, given):
    if given == types.float32:
        return lambda v, given: exp_float32(v)
    return lambda v, given: given


@njit(**_GELU_OPTIONS)
def _density_exponent(v):
    """``-v^2 / 2``: the normal density is ``exp`` of it over ``sqrt(2 pi)``."""
    return -HALF_32 * v * v


@njit(**_GELU_OPTIONS)
def _tanh_exponent(v, scale, cubic):
    """``-2 |u|``, ``u = scale * (v + cubic v^3)`` (sqrt(2/pi) and 0.044715 in the data's
    dtype): the tanh GELU takes everything from ``e = exp(-2|u|)``, in (0, 1]."""
    return -TWO_32 * abs(scale * (v + cubic * v * v * v))


@njit(**_GELU_OPTIONS)
def _one_plus_tanh_halved(v, e):
    """``(1 + tanh(u)) / 2`` from ``e = exp(-2|u|)``: ``1 / (1 + e)`` where ``u >= 0`` and
    ``e / (1 + e)`` below, so no ``1 + tanh(u)`` cancels to nothing where tanh is near -1."""
    return (ONE_32 if v >= 0 else e) / (ONE_32 + e)


@njit(**_GELU_OPTIONS)
def gelu(out, x):
    """``out = x * Phi(x)`` element by element; all 1-D, one length and dtype."""
    for i in range(x.size):
        out[i] = x[i] * normal_cdf(x[i])


@njit(**_GELU_OPTIONS)
def gelu_backward(out, x, grad, pdf_scale):
    """``out = grad * (Phi(x) + x * phi(x))``: GELU's derivative, times the gradient;
    ``pdf_scale = 1 / sqrt(2 pi)`` in the data's dtype (float64: ``out`` holds
    ``exp(-x^2 / 2)`` on entry)."""
    for i in range(x.size):
        v = x[i]
        density = pdf_scale * exp_or_given(_density_exponent(v), out[i])
        out[i] = grad[i] * (normal_cdf(v) + v * density)


@njit(**_GELU_OPTIONS)
def gelu_tanh(out, x, scale, cubic):
    """``out = x * (1 + tanh(u)) / 2`` (float64: ``out`` holds ``exp(-2|u|)`` on entry)."""
    for i in range(x.size):
        v = x[i]
        e = exp_or_given(_tanh_exponent(v, scale, cubic), out[i])
        out[i] = v * _one_plus_tanh_halved(v, e)


@njit(**_GELU_OPTIONS)
def gelu_tanh_backward(out, x, grad, scale, cubic):
    """``out = grad * ((1 + t) / 2 + x / 2 * (1 - t^2) * u'(x))``, ``t = tanh(u)``,
    ``u'(x) = scale * (1 + 3 cubic x^2)``, with ``1 - t^2 = 4 e / (1 + e)^2`` (float64:
    ``out`` holds ``e = exp(-2|u|)`` on entry)."""
    for i in range(x.size):
        v = x[i]
        e = exp_or_given(_tanh_exponent(v, scale, cubic), out[i])
        slope = scale * (ONE_32 + THREE_32 * cubic * v * v)
        one_minus_t_squared_halved = TWO_32 * e / ((ONE_32 + e) * (ONE_32 + e))
        out[i] = grad[i] * (_one_plus_tanh_halved(v, e) + v * one_minus_t_squared_halved * slope)


@njit(**_OPTIONS)
def _float64_exponents(out, x, tanh_gelu):
    """``out`` = the exponent the GELU loop needs (``-x^2 / 2``, or with ``tanh_gelu``
    ``-2|u|``) of every element, for numpy's ``exp`` to take in place."""
    for i in range(x.size):
        v = x[i]
        out[i] = _tanh_exponent(v, TANH_SCALE, TANH_CUBIC) if tanh_gelu else _density_exponent(v)


@njit(**_ROW_SUM_OPTIONS)
def _divide_by_row_sum(e):
    for r in range(e.shape[0]):
        total = e[r, 0] * 0
        for j in range(e.shape[1]):
            total += e[r, j]
        for j in range(e.shape[1]):
            e[r, j] = e[r, j] / total


@njit(**_ROW_SUM_OPTIONS)
def softmax_backward(out, s, grad):
    """``out = s * (grad - sum(grad * s))`` row by row, given the softmax ``s``."""
    for r in range(s.shape[0]):
        dot = s[r, 0] * 0
        for j in range(s.shape[1]):
            dot += grad[r, j] * s[r, j]
        for j in range(s.shape[1]):
            out[r, j] = s[r, j] * (grad[r, j] - dot)


def softmax(x: np.ndarray, grad: np.ndarray | None) -> np.ndarray:
    """Softmax over the last axis (``x``: the input), or with ``grad`` its input gradient
    (``x``: then softmax's own output). Three passes forward (numpy's exp between two
    loops), one backward; composed from primitives it is five and four."""
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    if grad is None:
        from .loss_loops import shift_by_row_maxima

        shift_by_row_maxima(rows, out)
        np.exp(out, out=out)
        _divide_by_row_sum(out)
    else:
        softmax_backward(out, rows, grad.reshape(rows.shape))
    return out.reshape(x.shape)


@njit(**_ROW_SUM_OPTIONS)
def log_softmax_backward(out, grad):
    """``out = grad - softmax * sum(grad)`` row by row; ``out`` holds the softmax on entry."""
    for r in range(out.shape[0]):
        total = grad[r, 0] * 0
        for j in range(out.shape[1]):
            total += grad[r, j]
        for j in range(out.shape[1]):
            out[r, j] = grad[r, j] - out[r, j] * total


def log_softmax(x: np.ndarray, grad: np.ndarray | None) -> np.ndarray:
    """Log-softmax over the last axis (``x``: the input), or with ``grad`` its input
    gradient (``x``: then log-softmax's own output). Forward: the row loops of
    :mod:`~teachgrad.backends.loss_loops` (the row maxima, the shift, numpy's ``exp``, the
    row sums, the log-sums subtracted: each a walk that vectorises); backward numpy's
    ``exp`` and one loop. Composed from primitives it is six passes forward and four
    operations back."""
    rows = x.reshape(-1, x.shape[-1])
    if grad is None:
        from .loss_loops import log_softmax as log_softmax_rows
        return log_softmax_rows(rows).reshape(x.shape)
    out = np.exp(rows)  # the softmax, from its logarithm
    log_softmax_backward(out, grad.reshape(rows.shape))
    return out.reshape(x.shape)


def run(name: str, x: np.ndarray, grad: np.ndarray | None) -> np.ndarray:
    """``name`` ("gelu", "gelu_tanh"; "softmax", "log_softmax" over the last axis) of ``x``,
    or with ``grad`` its input gradient.

    GELU's loops compute their exponential themselves (float32) or read numpy's from the
    output array (float64); softmax's is numpy's (vectorised; numba's is a C library
    call per element, ten to forty times slower), in one scratch array or in the output
    itself; the rest is one loop.
    """
    if name in ("softmax", "log_softmax"):
        return (softmax if name == "softmax" else log_softmax)(x, grad)
    flat = x.reshape(-1)
    out = np.empty_like(flat)
    if x.dtype == np.float64 and (name == "gelu_tanh" or grad is not None):
        _float64_exponents(out, flat, name == "gelu_tanh")
        np.exp(out, out=out)
    dtype = x.dtype.type  # (constants in the data's dtype: no widening of float32)
    if name == "gelu" and grad is None:
        gelu(out, flat)
    elif name == "gelu":
        gelu_backward(out, flat, grad.reshape(-1), dtype(NORMAL_PDF_SCALE))
    elif grad is None:
        gelu_tanh(out, flat, dtype(TANH_SCALE), dtype(TANH_CUBIC))
    else:
        gelu_tanh_backward(out, flat, grad.reshape(-1), dtype(TANH_SCALE), dtype(TANH_CUBIC))
    return out.reshape(x.shape)

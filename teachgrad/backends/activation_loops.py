"""GELU's (and softmax's and log_softmax's) forward and backward in one pass over memory,
for the CPU backends.

Composed from primitives, GELU is about five whole-array passes forward (scale, erf,
add, multiply, multiply) and ten backward; on a transformer's MLP activations (half a
million floats) those passes cost thirty times PyTorch's one fused loop. So the CPU
backends hand large contiguous arrays to the loops below (see
``Backend.fused_activation``): ordinary Python that numba compiles once per dtype
(``cache=True`` keeps the machine code on disk), the same formulas as
:mod:`teachgrad.ops.pointwise_activation`, element by element.

The exponential and tanh come from numpy's own vectorised loops, each in one scratch
array. For float32 the error function is a rational function of ``x`` (Eigen's
``generic_fast_erf_float``: odd polynomial over even polynomial on [-4, 4], beyond which
float32 erf is ±1), within 4e-7 of the exact erf and made of ``*``, ``+`` and ``/`` only,
so the loop around it can use SIMD; the C library's ``erff`` would be a call per
element, ten times slower. float64 takes the C library's ``erf``.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import overload

_OPTIONS = dict(cache=True, error_model="numpy")
# For the row sums: "reassoc" lets the compiler add a row in SIMD lanes (eight or sixteen
# partial sums, added at the end) instead of one element after the other; the sum then
# differs from numpy's (pairwise) in the last bits, as any two summation orders do.
_ROW_SUM_OPTIONS = dict(_OPTIONS, fastmath={"reassoc"})
SQRT_HALF = math.sqrt(0.5)
NORMAL_PDF_SCALE = 1.0 / math.sqrt(2.0 * math.pi)
TANH_SCALE = math.sqrt(2.0 / math.pi)
TANH_CUBIC = 0.044715
# float32 copies: numba freezes them into the loops as float32 constants
HALF_32, ONE_32, SQRT_HALF_32 = np.float32(0.5), np.float32(1.0), np.float32(SQRT_HALF)


@njit(**_OPTIONS)
def erf_float32(x):
    """erf(x) for a float32 ``x`` as p(x)/q(x) (NaN passes through the clamps)."""
    x = min(max(x, np.float32(-4.0)), np.float32(4.0))
    x2 = x * x
    p = np.float32(-2.72614225801306e-10)
    p = p * x2 + np.float32(2.77068142495902e-08)
    p = p * x2 + np.float32(-2.10102402082508e-06)
    p = p * x2 + np.float32(-5.69250639462346e-05)
    p = p * x2 + np.float32(-7.34990630326855e-04)
    p = p * x2 + np.float32(-2.95459980854025e-03)
    p = p * x2 + np.float32(-1.60960333262415e-02)
    q = np.float32(-1.45660718464996e-05)
    q = q * x2 + np.float32(-2.13374055278905e-04)
    q = q * x2 + np.float32(-1.68282697438203e-03)
    q = q * x2 + np.float32(-7.37332916720468e-03)
    q = q * x2 + np.float32(-1.42647390514189e-02)
    return x * p / q


def normal_cdf(v):
    """Phi(v) = (1 + erf(v / sqrt(2))) / 2 (in Python; compiled code takes the overload below)."""
    return 0.5 * (1.0 + math.erf(v * SQRT_HALF))


@overload(normal_cdf)
def _normal_cdf_compiled(v):
    """Phi in ``v``'s own precision, chosen when a loop is compiled for a dtype: float32
    throughout with the fast erf (float64 constants would widen every element, and a
    float32 SIMD lane is half as wide, so twice as many per instruction), or float64 with
    the C library's erf."""
    if v == types.float32:
        return lambda v: HALF_32 * (ONE_32 + erf_float32(v * SQRT_HALF_32))
    return lambda v: 0.5 * (1.0 + math.erf(v * SQRT_HALF))


@njit(**_OPTIONS)
def gelu(out, x):
    """``out = x * Phi(x)`` element by element; all 1-D, one length and dtype."""
    for i in range(x.size):
        out[i] = x[i] * normal_cdf(x[i])


@njit(**_OPTIONS)
def gelu_backward(out, x, grad, pdf_scale):
    """``out = grad * (Phi(x) + x * phi(x))``; ``out`` holds ``exp(-x^2 / 2)`` on entry (one
    array for both: no scratch), ``pdf_scale = 1 / sqrt(2 pi)`` in the data's dtype."""
    for i in range(x.size):
        v = x[i]
        out[i] = grad[i] * (normal_cdf(v) + v * (pdf_scale * out[i]))


@njit(**_OPTIONS)
def gelu_tanh(out, x, t):
    """``out = x * (1 + t) / 2``, given ``t = tanh(u(x))``."""
    for i in range(x.size):
        out[i] = 0.5 * x[i] * (1.0 + t[i])


@njit(**_OPTIONS)
def gelu_tanh_backward(out, x, t, grad):
    """``out = grad * ((1 + t) / 2 + x / 2 * (1 - t^2) * u'(x))``, given ``t = tanh(u(x))``."""
    for i in range(x.size):
        v, tv = x[i], t[i]
        slope = TANH_SCALE * (1.0 + 3.0 * TANH_CUBIC * v * v)
        out[i] = grad[i] * (0.5 * (1.0 + tv) + 0.5 * v * (1.0 - tv * tv) * slope)


def _tanh_of_inner(x: np.ndarray) -> np.ndarray:
    """``tanh(sqrt(2/pi) * (x + 0.044715 x^3))`` in one scratch array (numpy's SIMD tanh)."""
    t = np.multiply(x, x)
    t *= x.dtype.type(TANH_CUBIC)
    t += 1
    t *= x
    t *= x.dtype.type(TANH_SCALE)
    return np.tanh(t, out=t)


@njit(**_OPTIONS)
def _scaled_square(out, x, scale):
    """``out = x * x * scale`` (``scale`` in x's dtype), one pass."""
    for i in range(x.size):
        out[i] = x[i] * x[i] * scale


def _density(out: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``out = exp(-x^2 / 2)``: ``-x^2 / 2`` in one loop, then numpy's SIMD exp in place."""
    _scaled_square(out, x, x.dtype.type(-0.5))  # (-0.5 in x's dtype: no widening)
    return np.exp(out, out=out)


def _subtract_row_max(out, rows):
    """``out[r] = rows[r] - max(rows[r])`` (2-D, C order): what keeps ``exp`` from overflowing.

    The maxima are attention's (``row_maxima``: eight running lanes the compiler
    vectorises; the same maximum, bit for bit). A row holding a NaN comes out NaN either
    way: whether or not the NaN is its maximum, ``exp`` of it is NaN, and so is the row's
    sum (or log-sum) that every element then meets."""
    from .attention_loops import row_maxima, subtract_rows

    tops = np.empty(rows.shape[0], rows.dtype)
    row_maxima(rows, tops)
    # a copy, then attention's subtraction in place (a loop with an output of its own
    # would check at run time whether the two overlap, and attention's in-place call
    # would then take the loop's slow, element-by-element version)
    out[...] = rows
    subtract_rows(out, tops)


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
        _subtract_row_max(out, rows)
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

    The exponential and tanh are numpy's (vectorised; numba's are a C library call per
    element, ten to forty times slower), in one scratch array or in the output itself;
    the rest is one loop.
    """
    if name in ("softmax", "log_softmax"):
        return (softmax if name == "softmax" else log_softmax)(x, grad)
    flat = x.reshape(-1)
    out = np.empty_like(flat)
    if name == "gelu" and grad is None:
        gelu(out, flat)
    elif name == "gelu":
        pdf_scale = x.dtype.type(NORMAL_PDF_SCALE)
        gelu_backward(_density(out, flat), flat, grad.reshape(-1), pdf_scale)
    elif grad is None:
        gelu_tanh(out, flat, _tanh_of_inner(flat))
    else:
        gelu_tanh_backward(out, flat, _tanh_of_inner(flat), grad.reshape(-1))
    return out.reshape(x.shape)

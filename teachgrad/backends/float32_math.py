"""``exp`` and ``erf`` for float32, written so that a loop around them runs in SIMD lanes.

A CPU core with AVX-512 multiplies sixteen float32 numbers in one instruction (eight with
AVX2), and a fused multiply-add (FMA) computes ``a * b + c`` with one rounding in one
instruction. A numba loop gets both only if every step of its body is an arithmetic
operation, a comparison or a select that the compiler can widen to a vector of lanes.
``math.exp`` and ``math.erf`` are not: each is a call into the C library for one number, so
a loop that calls them runs one element at a time, ten or more times slower than its
neighbours. numpy's own ``np.exp`` is vectorised, but it is a whole pass over memory of its
own, with a scratch array; inside a fused loop (GELU's backward, say) it would cost a
second and a third pass.

So this module writes the two functions out of ``*``, ``+``, ``/``, comparisons and one
reinterpretation of bits, each a few lines, compiled inline into whatever loop calls them:

- ``exp_float32``: split ``x = n ln2 + r`` with ``n`` an integer and ``|r| <= ln2 / 2``;
  then ``exp(x) = 2^n exp(r)``, ``exp(r)`` a short polynomial (Cephes ``expf``'s) and
  ``2^n`` built directly from its bits (:func:`float32_from_bits`).
- ``erf_float32``: an odd polynomial over an even one on [-4, 4] (Eigen's
  ``generic_fast_erf_float``), beyond which float32 ``erf`` is ±1.

The functions are compiled with ``fastmath={"contract"}``: the compiler may fuse a multiply
and an add into one FMA (fewer instructions, one rounding instead of two), and nothing
else; in particular it must still treat NaN and infinity by the rules, so both pass through
as IEEE 754 says. Loops that call these should be compiled with the same option, or their
own multiply-adds stay two instructions. (numba's on-disk cache of a loop that calls these
is keyed by the loop's own file: after editing this one, delete that file's cached
``__pycache__/*.nbi`` and ``*.nbc`` so that the loop is compiled again.)
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

#: Let the compiler fuse ``a * b + c`` into one instruction (one rounding), nothing more.
FMA_OPTIONS = dict(cache=True, error_model="numpy", fastmath={"contract"})

LOG2_E = np.float32(1.4426950408889634)
# ln 2 in two parts: LN2_HIGH has few enough bits that ``n * LN2_HIGH`` is exact for every
# ``n`` used here, and LN2_LOW carries the rest; ``x - n ln2`` loses nothing to rounding
LN2_HIGH, LN2_LOW = np.float32(0.693359375), np.float32(-2.12194440e-4)
# 1.5 * 2^23: adding it to a float32 of magnitude below 2^22 leaves no bits for a fraction,
# so the sum is rounded to an integer (to nearest, ties to even); subtracting it gives that
# integer back, without a conversion the compiler might not vectorise
ROUNDING_SHIFT = np.float32(12582912.0)
# Beyond these, exp is 0 (below 2^-150 even as a subnormal) or inf (above the largest
# float32); clamping to them keeps n an integer of a few bits, and the formula below still
# comes out exactly 0 or inf there
EXP_INPUT_LOW, EXP_INPUT_HIGH = np.float32(-104.0), np.float32(89.0)
ONE_32 = np.float32(1.0)


@intrinsic
def float32_from_bits(typingctx, bits):
    """The float32 whose 32 bits are ``bits`` (an integer; its low 32 bits): no conversion,
    the bits as they are. ``float32_from_bits((n + 127) << 23)`` is ``2^n``: exponent field ``n + 127``,
    mantissa zero. (numpy does this with ``array.view(np.float32)``; inside a compiled
    loop it is one LLVM ``bitcast``, which costs nothing at run time.)"""
    if not isinstance(bits, types.Integer):
        return None
    signature = types.float32(bits)

    def codegen(context, builder, sig, args):
        # (numba does integer arithmetic in 64 bits: keep the low 32)
        low_bits = builder.trunc(args[0], ir.IntType(32)) if bits.bitwidth > 32 else args[0]
        return builder.bitcast(low_bits, ir.FloatType())

    return signature, codegen


@njit(**FMA_OPTIONS)
def power_of_two_float32(n):
    """``2.0 ** n`` for an int32 ``n`` in [-126, 127] (a normal float32), from its bits."""
    return float32_from_bits((n + np.int32(127)) << np.int32(23))


@njit(**FMA_OPTIONS)
def exp_float32(x):
    """``e**x`` for a float32 ``x``, within 1.01 ulp over float32's whole range (0 below
    about -103.97, subnormals from there to -87.34, inf above 88.72; NaN gives NaN)."""
    clamped = x if x > EXP_INPUT_LOW else EXP_INPUT_LOW  # (-inf and NaN: LOW; NaN is put
    clamped = clamped if clamped < EXP_INPUT_HIGH else EXP_INPUT_HIGH  # back at the end)
    n = (clamped * LOG2_E + ROUNDING_SHIFT) - ROUNDING_SHIFT  # round(x / ln 2)
    r = clamped - n * LN2_HIGH
    r = r - n * LN2_LOW  # |r| <= ln2 / 2
    p = np.float32(1.9875691500e-4)  # exp(r) - 1 - r, as r^2 (p(r)): Cephes expf's
    p = p * r + np.float32(1.3981999507e-3)
    p = p * r + np.float32(8.3334519073e-3)
    p = p * r + np.float32(4.1665795894e-2)
    p = p * r + np.float32(1.6666665459e-1)
    p = p * r + np.float32(5.0000001201e-1)
    exp_r = p * r * r + r + ONE_32
    # 2^n in two factors, each a normal float32 for n in [-150, 129]: so the product
    # underflows gradually to subnormals and 0 (one rounding, the last multiply), and
    # overflows to inf, as exp does, where one factor 2^n would not exist
    whole = np.int32(n)
    half = whole >> np.int32(1)
    result = exp_r * power_of_two_float32(half) * power_of_two_float32(whole - half)
    return result if x == x else x  # NaN in, NaN out


@njit(**FMA_OPTIONS)
def erf_float32(x):
    """``erf(x)`` for a float32 ``x`` as ``x p(x^2) / q(x^2)``, within 4e-7 of the exact
    erf (Eigen's ``generic_fast_erf_float``); NaN passes through the clamps."""
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


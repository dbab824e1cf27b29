"""The sigmoid and its gradient as compiled passes, for numpy float arrays on the CPU,
with the bits of the numpy formulas they replace.

numpy's sigmoid (``numpy_backend._sigmoid``) is seven whole-array calls: ``-|x|`` (two),
``exp``, the numerator ``max(e, sign(x))`` (two), ``1 + e`` and the division. On a
thousand floats each call costs about half a microsecond whatever it computes, so the
sigmoid takes 4 µs where PyTorch's one loop takes 1.4. Here it is three calls:

1. ``-|x|`` by a compiled pass, into the output array;
2. numpy's own vectorised ``exp`` on that array, in place: the same function on the same
   numbers as in the numpy formula, so the same bits;
3. a compiled pass that divides: ``(1 if x > 0 else e) / (e + 1)``. For ``x > 0`` that is
   numpy's ``max(e, 1)`` (``e <= 1``), for ``x < 0`` its ``max(e, -1)``, at ``x = ±0`` both
   give ``e = 1``, and NaN stays NaN; one IEEE division and one addition, each rounded once,
   as numpy's are.

The gradient ``grad * s * (1 - s)`` is one pass with numpy's order of operations and its
roundings (numba contracts nothing into a fused multiply-add unless asked); a gradient
that is one number spread over the shape (a ``sum()``'s) is read as that number.

The numpy backend takes the forward from 64 KiB (loading numba for it, half a second
once) and, once numba is loaded anyway, from two elements; the gradient from 512
elements once numba is loaded (below that numpy's three calls are as quick). Every other
backend, and arrays these loops do not take, keep the numpy formulas
(:class:`teachgrad.ops.elementwise.Sigmoid`). ``tests/engine/test_sigmoid_loops.py``
holds the two to the same bits, NaN for NaN (IEEE 754 leaves a NaN's sign to the order in
which an instruction takes its operands).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .compiled_loops import LOOP_DTYPES


@njit(cache=True, error_model="numpy")
def _minus_magnitude(x, out):
    for k in range(x.size):
        out[k] = -abs(x[k])


@njit(cache=True, error_model="numpy")
def _divide(x, e):
    one = e.dtype.type(1)  # (float32 arrays stay float32: a float64 1 would widen the sum)
    for k in range(x.size):
        value = e[k]
        e[k] = (one if x[k] > 0 else value) / (value + one)  # (NaN is not > 0: e, NaN)


@njit(cache=True, error_model="numpy")
def _gradient(grad, s, out):
    one = s.dtype.type(1)
    for k in range(s.size):
        value = s[k]
        out[k] = grad[k] * value * (one - value)


@njit(cache=True, error_model="numpy")
def _gradient_of_one(grad, s, out):
    one = s.dtype.type(1)
    for k in range(s.size):
        value = s[k]
        out[k] = grad * value * (one - value)


def sigmoid(x: np.ndarray) -> np.ndarray | None:
    """The sigmoid of ``x`` in three calls (see above), or None when the loops do not
    take ``x`` (another dtype, not C-contiguous, empty)."""
    if type(x) is not np.ndarray or x.dtype not in LOOP_DTYPES or not x.flags.c_contiguous \
            or not x.size:
        return None
    out = np.empty_like(x)
    if x.ndim != 1:  # (the loops take one dimension; a view costs 0.15 µs, so only if needed)
        x, flat = x.reshape(-1), out.reshape(-1)
    else:
        flat = out
    _minus_magnitude(x, flat)
    np.exp(flat, out=flat)
    _divide(x, flat)
    return out


def sigmoid_gradient(grad: np.ndarray, s: np.ndarray) -> np.ndarray | None:
    """``grad * s * (1 - s)`` in one pass, or None when the loops do not take these arrays
    (not of one float dtype and shape, or not C-contiguous). A gradient that is one number
    spread over the shape (every stride 0: the gradient of a ``sum()``) is taken as that
    number, as numpy's broadcasting reads it."""
    if (type(grad) is not np.ndarray or type(s) is not np.ndarray or grad.dtype is not s.dtype
            or grad.shape != s.shape
            or s.dtype not in LOOP_DTYPES or not s.flags.c_contiguous or not s.size):
        return None
    out = np.empty_like(s)
    flat_s, flat_out = (s, out) if s.ndim == 1 else (s.reshape(-1), out.reshape(-1))
    if grad.flags.c_contiguous:
        _gradient(grad if grad.ndim == 1 else grad.reshape(-1), flat_s, flat_out)
    elif not any(grad.strides):
        _gradient_of_one(grad.reshape(-1)[0], flat_s, flat_out)  # (a numpy scalar of s's dtype)
    else:
        return None
    return out

"""ReLU's forward and backward as compiled passes, for numpy float arrays on the CPU.

The forward, ``maximum(a, 0)``, reads one array where numpy's fast loop reads two
(``a`` and an array of zeros: against the number 0 numpy takes a slower loop), and
keeps numpy's bits: NaN stays NaN, ``-0.0`` becomes ``0.0``.

Written with numpy, the backward ``grad * (a > 0)`` makes two passes: the
comparison writes a bool array, then the product reads it back through numpy's
mixed-dtype loop (a cast per element). The loop below multiplies by the
comparison's 0 or 1 as it goes: the same product, so the same bits (``-0.0`` and
NaN gradients included), in one pass and with no bool array. Every other backend,
and arrays these loops do not take, keep the numpy expressions
(:class:`teachgrad.ops.elementwise.Relu`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .compiled_loops import loops_take

#: Below this many elements numpy's call is as quick (the compiled call's set-up, a
#: microsecond or two, is most of the time there), so small arrays keep numpy's path.
LOOPS_FROM = 4096


@njit(cache=True, error_model="numpy")
def _forward(a, out):
    for k in range(a.size):
        value = a[k]
        out[k] = value if not value <= 0 else 0  # (NaN is not <= 0: it stays)


@njit(cache=True, error_model="numpy")
def _gradient(grad, a, out):
    for k in range(grad.size):
        out[k] = grad[k] * (a[k] > 0)


def relu(a):
    """``maximum(a, 0)`` by the compiled pass, or None when it does not take ``a`` (small,
    another dtype or backend, or not contiguous)."""
    if a.size < LOOPS_FROM or not (loops_take(a) and a.flags.c_contiguous):
        return None
    out = np.empty_like(a)
    _forward(a.reshape(-1), out.reshape(-1))
    return out


def relu_gradient(grad, a):
    """``grad * (a > 0)`` by the compiled pass, or None when it does not take these
    arrays (small, another dtype or backend, or not both contiguous and of one shape)."""
    if grad.size < LOOPS_FROM or not loops_take(grad, a):
        return None
    if grad.shape != a.shape or not (grad.flags.c_contiguous and a.flags.c_contiguous):
        return None
    out = np.empty_like(grad)
    _gradient(grad.reshape(-1), a.reshape(-1), out.reshape(-1))
    return out

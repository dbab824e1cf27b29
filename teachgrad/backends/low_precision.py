"""float16 and bfloat16 arrays: stored in 2 bytes, computed in float32, rounded once.

PyTorch's CPU kernels for the 16-bit types load each element, widen it to float32,
compute (a sum accumulates in float32 too) and round the result to the 16-bit type
once, when it is stored. :class:`LowPrecisionBackend` does the same around any
backend: every primitive that computes gets float32 copies of its 16-bit arrays and
its floating-point result is rounded back to that 16-bit type. Primitives that only
move data (reshape, slicing, views) pass through untouched, so views stay views.

A 16-bit tensor's ``_backend`` is the wrapper of its device's backend (``Tensor._make``
picks it), so every path an operation can take (an op's Function, the lean path for
operators, backward) computes this way without knowing it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import LOW_PRECISION

LOW_NUMPY = _LOW_NUMPY = frozenset(d.numpy for d in LOW_PRECISION)
_FLOAT32 = np.dtype(np.float32)

#: Primitives that move or describe data without computing: the 16-bit arrays pass
#: as they are (a reshape must stay a view of the very same memory).
PASS_THROUGH = frozenset({
    "from_numpy", "to_numpy", "shape", "dtype", "astype", "reshape", "permute",
    "broadcast_to", "contiguous", "shares_memory", "is_contiguous", "concatenate",
    "getitem", "setitem", "synchronize", "windows",
})
#: Primitives that change an argument in place (name -> which one): computed on a
#: float32 copy, then the rounded result is written back into the 16-bit array.
IN_PLACE = {"binary_inplace": 1, "addcmul_inplace": 0, "addcdiv_inplace": 0,
            "lerp_inplace": 0, "_add_scaled": 0}


class LowPrecisionBackend:
    """``base``'s primitives with float32 arithmetic for 16-bit arrays (see the module).

    With ``rounds=False`` results stay float32: a Function's forward computes with that
    one, so an operation made of several primitives (layer_norm, linear's product plus
    bias) rounds once, at its end, where ``Function._apply`` rounds its output, as
    PyTorch's fused kernels do.
    """

    #: the engine may not run backward formulas on raw 16-bit arrays (numpy would
    #: accumulate a 16-bit matmul differently): formulas go through the primitives
    array_arithmetic = False

    def __init__(self, base: Any, rounds: bool = True) -> None:
        self.base = base
        self.rounds = rounds

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.base, name)
        if not callable(attr) or name in PASS_THROUGH or name.startswith("__"):
            return attr
        if name in IN_PLACE:
            return lambda *args: self._in_place(attr, args, IN_PLACE[name])
        return lambda *args, **kwargs: self._compute(attr, args, kwargs)

    def _compute(self, primitive: Any, args: tuple, kwargs: dict) -> Any:
        low: list[np.dtype] = []
        wide_args = tuple([self._widen(a, low) for a in args])
        wide_kwargs = {k: self._widen(v, low) for k, v in kwargs.items()}
        out = primitive(*wide_args, **wide_kwargs)
        if not low or not self.rounds:
            return out
        return narrow(self.base, out, low[0])

    def _in_place(self, primitive: Any, args: tuple, target: int) -> None:
        low: list[np.dtype] = []
        wide = [self._widen(a, low) for a in args]
        primitive(*wide)
        x = args[target]
        if getattr(x, "dtype", None) in _LOW_NUMPY:  # write the result back, rounded
            self.base.setitem(x, (Ellipsis,), self.base.astype(wide[target], x.dtype))

    def _widen(self, a: Any, low: list) -> Any:
        """``a`` with every 16-bit array (or numpy dtype) in it made float32; the 16-bit
        dtype met is noted in ``low`` (the type results round back to)."""
        dtype = getattr(a, "dtype", None)
        if dtype is not None and dtype in _LOW_NUMPY:
            low.append(dtype)
            return self.base.astype(a, _FLOAT32)
        if isinstance(a, np.dtype) and a in _LOW_NUMPY:
            low.append(a)
            return _FLOAT32
        if type(a) in (list, tuple):
            return type(a)([self._widen(x, low) for x in a])
        return a

    def __repr__(self) -> str:
        return f"LowPrecisionBackend({self.base!r}, rounds={self.rounds})"


def narrow(base: Any, out: Any, dtype: np.dtype) -> Any:
    """The float32 arrays in ``out`` rounded to ``dtype`` (indices, bools stay as they are)."""
    if type(out) in (list, tuple):
        return type(out)([narrow(base, x, dtype) for x in out])
    if getattr(out, "dtype", None) == _FLOAT32:
        return base.astype(out, dtype)
    return out


_WRAPPERS: dict[tuple[int, bool], LowPrecisionBackend] = {}


def low_precision(base: Any, rounds: bool = True) -> LowPrecisionBackend:
    """The one wrapper of ``base`` of each kind (made on first use)."""
    if isinstance(base, LowPrecisionBackend):
        base = base.base
    wrapper = _WRAPPERS.get((id(base), rounds))
    if wrapper is None:
        wrapper = _WRAPPERS[(id(base), rounds)] = LowPrecisionBackend(base, rounds)
    return wrapper

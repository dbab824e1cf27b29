"""Logical operations: ``a & b``, ``a | b``, ``a ^ b``, ``~a`` on bool tensors, and
``tg.logical_and`` / ``logical_or`` / ``logical_xor`` / ``logical_not`` on any dtype
(where every non-zero element counts as true).

No backend needs a primitive of its own for them: each is a comparison or a ``where``,
which every backend (numpy, numba, the cuda kernels) already runs::

    a & b  =  where(a, b, False)      a | b  =  where(a, True, b)
    a ^ b  =  a != b                  ~a     =  a == False

None of them has a gradient (their results are bool), as in PyTorch.
"""
from __future__ import annotations

from typing import Any

from .. import dtypes
from ..tensor import Tensor
from .functional import _compare, where


def _truth(a: Any) -> Any:
    """``a`` as a bool tensor (non-zero is true); a Python number as a Python bool."""
    if isinstance(a, Tensor):
        return a if a.dtype is dtypes.bool_ else _compare("ne", a, 0)
    return bool(a)


def _both_bool(a: Any, b: Any, symbol: str) -> None:
    """``&``, ``|`` and ``^`` are logical on bool tensors; PyTorch's bitwise meaning on
    integers is not implemented, so refuse it rather than answer a logical result."""
    for x in (a, b):
        kind = x.dtype if isinstance(x, Tensor) else type(x).__name__
        if not (isinstance(x, bool) or (isinstance(x, Tensor) and x.dtype is dtypes.bool_)):
            raise TypeError(f"teachgrad supports {symbol} between bool tensors (logical), not on "
                            f"{kind}: the bitwise operation on integers is not implemented. Fix: "
                            f"compare first (e.g. (x > 0) {symbol} (y > 0)) or use "
                            "tg.logical_and / logical_or / logical_xor")


def logical_and(a: Tensor, b: Any) -> Tensor:
    return where(_truth(a), _truth(b), False)


def logical_or(a: Tensor, b: Any) -> Tensor:
    return where(_truth(a), True, _truth(b))


def logical_xor(a: Tensor, b: Any) -> Tensor:
    return _compare("ne", _truth(a), _truth(b))


def logical_not(a: Tensor) -> Tensor:
    return _compare("eq", _truth(a), False)


def _and(a: Tensor, b: Any) -> Tensor:
    _both_bool(a, b, "&")
    return logical_and(a, b)


def _or(a: Tensor, b: Any) -> Tensor:
    _both_bool(a, b, "|")
    return logical_or(a, b)


def _xor(a: Tensor, b: Any) -> Tensor:
    _both_bool(a, b, "^")
    return logical_xor(a, b)


def _invert(a: Tensor) -> Tensor:
    if a.dtype is not dtypes.bool_:
        raise TypeError(f"teachgrad supports ~ on bool tensors (logical not), not on {a.dtype}: "
                        "the bitwise not of integers is not implemented. Fix: tg.logical_not(x)")
    return logical_not(a)


#: Tensor methods and operators (attached in tensor_methods.py)
TENSOR_METHODS = {
    "logical_and": logical_and, "logical_or": logical_or, "logical_xor": logical_xor,
    "logical_not": logical_not,
    "__and__": _and, "__rand__": _and, "__or__": _or, "__ror__": _or,
    "__xor__": _xor, "__rxor__": _xor, "__invert__": _invert,
}

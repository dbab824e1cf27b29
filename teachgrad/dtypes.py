"""The dtypes teachgrad knows, named like PyTorch's, and its promotion rule.

float16 is numpy's own half type; bfloat16 comes from ``ml_dtypes`` (the package
JAX and TensorFlow use), so both store and round exactly as PyTorch's do.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np


class DType:
    """A tensor element type: a thin, named wrapper around a numpy dtype."""

    __slots__ = ("name", "numpy", "is_floating_point", "itemsize")

    def __init__(self, name: str, np_dtype: type) -> None:
        self.name = name
        self.numpy = np.dtype(np_dtype)
        # (ml_dtypes' bfloat16 is a numpy "void"-kind type: name it a float by hand)
        self.is_floating_point = self.numpy.kind == "f" or name == "bfloat16"
        self.itemsize = self.numpy.itemsize

    def __repr__(self) -> str:
        return f"teachgrad.{self.name}"

    def __reduce__(self):  # pickle as the module-level singleton
        return (get_dtype, (self.name,))


float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int64 = DType("int64", np.int64)
bool_ = DType("bool", np.bool_)
float16 = DType("float16", np.float16)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16)

ALL_DTYPES = (float32, float64, int64, bool_, float16, bfloat16)
#: The 16-bit floating-point dtypes: stored in 2 bytes, computed in float32 (see
#: ``backends/low_precision.py``).
LOW_PRECISION = (float16, bfloat16)
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update({"float": float32, "double": float64, "long": int64, "half": float16})
_BY_NUMPY = {d.numpy: d for d in ALL_DTYPES}
# numpy types with no teachgrad twin land on the closest one we support
_BY_NUMPY.update({np.dtype(np.int32): int64,
                  np.dtype(np.int16): int64, np.dtype(np.int8): int64,
                  np.dtype(np.uint8): int64})



def file_dtype(d: DType) -> np.dtype:
    """The numpy dtype a file (``tg.save``) stores ``d`` as: bfloat16 as its uint16 bit
    patterns (``.npy`` has no bfloat16, and numpy would write it as opaque bytes)."""
    return np.dtype(np.uint16) if d is bfloat16 else d.numpy


#: ``tg.get_default_dtype()``: what floating-point tensors are made of unless told.
_default_float = float32


def get_default_dtype() -> DType:
    return _default_float


def set_default_dtype(dtype: DType) -> None:
    global _default_float
    dtype = get_dtype(dtype)
    if not dtype.is_floating_point:
        raise TypeError(f"the default dtype must be a floating-point type, not {dtype}")
    _default_float = dtype


def get_dtype(d: "DType | str | np.dtype | type") -> DType:
    """Turn anything dtype-like (a DType, 'float32', np.float64, float) into a DType."""
    if isinstance(d, DType):
        return d
    if d is float:
        return _default_float
    if d is int:
        return int64
    if d is bool:
        return bool_
    if isinstance(d, str):
        if d in _BY_NAME:
            return _BY_NAME[d]
    else:
        try:
            return _BY_NUMPY[np.dtype(d)]
        except (TypeError, KeyError):
            pass
    known = ", ".join(f"tg.{x.name}" for x in ALL_DTYPES)
    raise TypeError(f"unknown dtype {d!r}: teachgrad supports {known}")


def from_numpy_dtype(d: np.dtype) -> DType:
    """The DType of a numpy dtype (the fast path: ``d`` usually is one already)."""
    return _BY_NUMPY.get(d) or _BY_NUMPY.get(np.dtype(d)) or get_dtype(d)


_RANK = {bool_: 0, int64: 1, float16: 2, bfloat16: 2, float32: 3, float64: 4}


def promote_types(a: DType, b: DType) -> DType:
    """The dtype of ``a op b`` for two tensors: the 'larger' kind wins.

    float16 and bfloat16 share a rank but neither holds the other (float16 has the
    finer mantissa, bfloat16 the wider range), so together they make float32, as
    in PyTorch.
    """
    a, b = get_dtype(a), get_dtype(b)
    if a is not b and _RANK[a] == _RANK[b] == 2:
        return float32
    return a if _RANK[a] >= _RANK[b] else b


# bool < integer < floating point
_KIND = {bool_: 0, int64: 1, float16: 2, bfloat16: 2, float32: 2, float64: 2}


def can_cast(src: DType, dst: DType) -> bool:
    """Whether an in-place result of ``src`` may be stored into a ``dst`` tensor.

    As in PyTorch, only a change of kind towards bool is refused: float into int,
    or a number into bool (within a kind, float64 into float32 is fine).
    """
    return _KIND[src] <= _KIND[dst]


def scalar_result_type(t: DType, scalar: object) -> DType:
    """The dtype of ``tensor op python_scalar``, as in PyTorch.

    A Python scalar never widens a tensor of the same kind (``float32 * 2.5`` stays
    float32); it only lifts the kind: ``int64 * 2.5`` is the default float dtype.
    """
    if isinstance(scalar, bool):
        return t
    if isinstance(scalar, int):
        return int64 if t is bool_ else t
    if isinstance(scalar, float):
        return t if t.is_floating_point else _default_float
    raise TypeError(f"cannot combine a tensor with {type(scalar).__name__} {scalar!r}")


def _combine_categories(higher: DType | None, lower: DType | None) -> DType | None:
    """PyTorch's rule for a higher-priority group meeting a lower one: the lower group
    only counts when it is of a higher kind (an int tensor meets a float 0-d tensor)."""
    if higher is None:
        return lower
    if lower is None or higher.is_floating_point:
        return higher
    if higher is bool_ or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def result_type(*operands: object) -> DType:
    """The dtype of an operation on ``operands`` (tensors and Python numbers), as in PyTorch.

    Operands fall in three groups, in priority order: tensors with dimensions,
    0-d tensors, Python numbers. Within a group the larger type wins; a later
    group matters only if it is of a higher kind (bool < int < float). So
    ``float32 vector + float64 0-d`` stays float32, but ``int64 vector + float64 0-d``
    is float64 and ``int64 vector + 2.5`` is the default float dtype.
    """
    groups: list[DType | None] = [None, None, None]
    for x in operands:
        if x is None:
            continue
        dtype = getattr(x, "dtype", None)
        if isinstance(dtype, DType):
            slot = 0 if x.ndim else 1
        elif isinstance(x, bool):
            slot, dtype = 2, bool_
        elif isinstance(x, int):
            slot, dtype = 2, int64
        elif isinstance(x, float):
            slot, dtype = 2, _default_float
        else:
            raise TypeError(f"cannot combine a tensor with {type(x).__name__} {x!r}")
        groups[slot] = dtype if groups[slot] is None else promote_types(groups[slot], dtype)
    result = _combine_categories(groups[0], _combine_categories(groups[1], groups[2]))
    if result is None:
        raise TypeError("result_type needs at least one operand")
    return result

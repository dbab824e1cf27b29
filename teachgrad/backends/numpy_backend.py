"""The reference backend: every primitive is one numpy call.

Other backends are checked against this one, so it favours obviousness.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .base import COMPARISONS, Array, Backend, Scalar

_UNARY = {
    "neg": np.negative,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "abs": np.abs,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "sign": np.sign,
}
_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def _array(x: Array) -> np.ndarray:
    """numpy turns 0-d results into scalars (``np.exp(np.array(1.0))`` is a float64);
    the backend contract is arrays, so wrap them back."""
    return x if type(x) is np.ndarray else np.asarray(x)


#: 1 as a 0-d array of each float dtype (adding an array is quicker than a Python 1.0)
_ONE = {np.dtype(t): np.ones((), t) for t in (np.float16, np.float32, np.float64)}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # e = e^-|x| never overflows: 1/(1+e) is the answer for x >= 0, e/(1+e) for x < 0
    # (computing 1/(1+e^-x) straight would overflow e^-x for x below about -88 in float32)
    if x.ndim == 0:  # (numpy makes 0-d results scalars, and out= needs an array)
        return _sigmoid(x.reshape(1)).reshape(())
    e = np.exp(np.minimum(x, np.negative(x)))
    d = np.add(e, _ONE.get(x.dtype, 1))
    out = np.reciprocal(d)
    np.divide(e, d, out=out, where=np.signbit(x))  # the x < 0 entries (and -0.0: the same)
    return out


class NumpyBackend(Backend):
    name = "numpy"
    device_type = "cpu"
    array_arithmetic = True  # every primitive is the numpy operator itself

    def from_numpy(self, a: np.ndarray) -> np.ndarray:
        return np.array(a, copy=True)

    def to_numpy(self, x: np.ndarray) -> np.ndarray:
        return np.array(x, copy=True)

    def full(self, shape, value, dtype):
        out = np.empty(shape, dtype=dtype)  # (what np.full does, minus its Python wrapper)
        out.fill(value)
        return out

    def unary(self, op: str, x: Array) -> Array:
        fn = _UNARY.get(op)
        if fn is not None:
            out = fn(x)
            return out if type(out) is np.ndarray else np.asarray(out)
        if op == "sigmoid":
            return _sigmoid(x)
        if op == "relu":
            return _array(np.maximum(x, 0).astype(x.dtype, copy=False))
        if op == "step":
            return _array((x > 0).astype(x.dtype))
        raise KeyError(op)

    def binary(self, op: str, a: Array | Scalar, b: Array | Scalar) -> Array:
        out = _BINARY[op](a, b)
        if type(out) is np.ndarray:
            if type(a) is np.ndarray and out.dtype is a.dtype:
                return out  # the usual case: the operands' own dtype, nothing to fix
        else:  # (_array written out: this runs for every operation)
            out = np.asarray(out)
        # numpy may widen `int_array ** negative` etc.; keep the operand dtype
        if op not in COMPARISONS:
            ref = a if isinstance(a, np.ndarray) else b
            if out.dtype is not ref.dtype and out.dtype != ref.dtype:
                out = out.astype(ref.dtype)
        return out

    def binary_inplace(self, op, x, other):
        _BINARY[op](x, other, out=x)  # the ufunc writes into x: no temporary array

    def where(self, cond, a, b):
        out = np.where(cond, a, b)
        ref = a if isinstance(a, np.ndarray) else b
        if isinstance(ref, np.ndarray) and out.dtype != ref.dtype:
            out = out.astype(ref.dtype)
        return out

    def astype(self, x, dtype):
        return x.astype(dtype)

    def reduce(self, op, x, axes, keepdims):
        if op == "sum" and x.dtype == np.bool_:
            x = x.astype(np.int64)  # count the Trues (np.add on bools would be a logical or)
        # the ufuncs' own reduce: what np.sum/np.max call, minus their Python wrappers
        return _array(_REDUCE[op].reduce(x, axis=axes, keepdims=keepdims))

    def arg_reduce(self, op, x, axis, keepdims):
        fn = np.argmax if op == "argmax" else np.argmin
        out = fn(x, axis=axis, keepdims=keepdims) if axis is not None else fn(x)
        if axis is None and keepdims:
            out = np.reshape(out, (1,) * x.ndim)
        return np.asarray(out, dtype=np.int64)

    def matmul(self, a, b):
        return _array(np.matmul(a, b))

    def reshape(self, x, shape):
        return x.reshape(shape)

    def permute(self, x, axes):
        return x.transpose(axes)

    def broadcast_to(self, x, shape):
        return np.broadcast_to(x, shape)

    def is_contiguous(self, x):
        return x.flags.c_contiguous

    def shares_memory(self, a, b):
        return np.may_share_memory(a, b)  # compares address ranges: quick, may say yes wrongly

    def contiguous(self, x):
        # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
        return x if x.flags.c_contiguous else np.array(x, order="C")

    def concatenate(self, xs: Sequence[Array], axis: int) -> Array:
        return np.concatenate(xs, axis=axis)

    def getitem(self, x, index):
        return np.asarray(x[index])

    def index_add(self, shape, dtype, index, values):
        out = np.zeros(shape, dtype=dtype)
        np.add.at(out, index, values)
        return out

    def setitem(self, x, index, value):
        x[index] = value

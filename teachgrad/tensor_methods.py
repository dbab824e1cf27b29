"""Tensor methods and operators, each one a function from :mod:`teachgrad.ops.functional`.

Kept apart from ``tensor.py`` so the class itself stays short: ``x.exp()`` is
``ops.functional.exp(x)``, ``x + y`` is ``ops.functional.add(x, y)``.
"""
from __future__ import annotations

from typing import Any

from .ops import functional as F
from .tensor import Tensor


def _reflected(fn):
    def method(self: Tensor, other: Any) -> Tensor:
        return fn(other, self)
    return method


_METHODS = {
    # operators
    "__add__": F.add, "__radd__": _reflected(F.add),
    "__sub__": F.sub, "__rsub__": _reflected(F.sub),
    "__mul__": F.mul, "__rmul__": _reflected(F.mul),
    "__truediv__": F.div, "__rtruediv__": _reflected(F.div),
    "__pow__": F.pow, "__rpow__": _reflected(F.pow),
    "__matmul__": F.matmul, "__rmatmul__": _reflected(F.matmul),
    "__neg__": F.neg, "__abs__": F.abs, "__getitem__": F.getitem,
    "__eq__": F.eq, "__ne__": F.ne, "__lt__": F.lt, "__le__": F.le, "__gt__": F.gt, "__ge__": F.ge,
    # math
    "add": F.add, "sub": F.sub, "mul": F.mul, "div": F.div, "pow": F.pow, "neg": F.neg,
    "exp": F.exp, "log": F.log, "sqrt": F.sqrt, "abs": F.abs, "sin": F.sin, "cos": F.cos,
    "tanh": F.tanh, "sigmoid": F.sigmoid, "relu": F.relu, "sign": F.sign,
    "maximum": F.maximum, "minimum": F.minimum, "clamp": F.clamp, "clip": F.clamp,
    "eq": F.eq, "ne": F.ne, "lt": F.lt, "le": F.le, "gt": F.gt, "ge": F.ge,
    # reductions
    "sum": F.sum, "mean": F.mean, "max": F.max, "min": F.min, "amax": F.amax, "amin": F.amin,
    "argmax": F.argmax, "argmin": F.argmin, "any": F.any, "all": F.all,
    # linear algebra
    "matmul": F.matmul, "mm": F.mm, "bmm": F.bmm, "softmax": F.softmax, "log_softmax": F.log_softmax,
    # shapes
    "reshape": F.reshape, "view": F.view, "flatten": F.flatten, "unsqueeze": F.unsqueeze,
    "squeeze": F.squeeze, "permute": F.permute, "transpose": F.transpose, "t": F.t,
    "expand": F.expand, "contiguous": F.contiguous, "clone": F.clone,
}

for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)


def _eq(self: Tensor, other: Any) -> Any:
    return False if other is None else F.eq(self, other)  # `t == None` is False, as in PyTorch


def _ne(self: Tensor, other: Any) -> Any:
    return True if other is None else F.ne(self, other)


Tensor.__eq__ = _eq
Tensor.__ne__ = _ne


def _expand_as(self: Tensor, other: Tensor) -> Tensor:
    return F.expand(self, tuple(other.shape))


def _view_as(self: Tensor, other: Tensor) -> Tensor:
    return F.view(self, tuple(other.shape))


def _reshape_as(self: Tensor, other: Tensor) -> Tensor:
    return F.reshape(self, tuple(other.shape))


Tensor.expand_as = _expand_as
Tensor.view_as = _view_as
Tensor.reshape_as = _reshape_as
Tensor.T = property(lambda self: F.permute(self, tuple(reversed(range(self.ndim)))))
Tensor.mT = property(lambda self: F.transpose(self, -2, -1))

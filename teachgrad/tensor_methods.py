"""Tensor methods and operators, each one a function from :mod:`teachgrad.ops.functional`.

Kept apart from ``tensor.py`` so the class itself stays short: ``x.exp()`` is
``ops.functional.exp(x)``, ``x + y`` is ``ops.functional.add(x, y)``.
"""
from __future__ import annotations

from typing import Any

from .autograd import lean
from .ops import elementwise as ew, functional as F
from .tensor import Tensor


def _reflected(fn):
    def method(self: Tensor, other: Any) -> Tensor:
        return fn(other, self)
    return method


_METHODS = {
    # operators (+ - * / below, after this table)
    "__pow__": F.pow, "__rpow__": _reflected(F.pow),
    "__matmul__": F.matmul, "__rmatmul__": _reflected(F.matmul),
    "__abs__": F.abs, "__getitem__": F.getitem,
    "__eq__": F.eq, "__ne__": F.ne, "__lt__": F.lt, "__le__": F.le, "__gt__": F.gt, "__ge__": F.ge,
    # math
    "add": F.add, "sub": F.sub, "mul": F.mul, "div": F.div, "pow": F.pow, "neg": F.neg,
    "abs": F.abs, "relu": F.relu, "sign": F.sign,
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

# Arithmetic operators take a shortcut when their operands need no promotion or
# broadcasting (see autograd/lean.py): straight to the Function when recording,
# straight to the backend when not, which is what backward formulas like `grad * b` run.
for _op, _full, _fn in (("add", F.add, ew.Add), ("sub", F.sub, ew.Sub),
                        ("mul", F.mul, ew.Mul), ("truediv", F.div, ew.Div)):
    _primitive = "div" if _op == "truediv" else _op
    _METHODS[f"__{_op}__"] = lean.binary_method(_primitive, _full, _fn)
    _METHODS[f"__r{_op}__"] = lean.binary_method(_primitive, _full, _fn, reflected=True)

# ... and so do the float-valued functions of one tensor (and -x)
for _op, _full, _fn in (("neg", F.neg, ew.Neg), ("exp", F.exp, ew.Exp), ("log", F.log, ew.Log),
                        ("sqrt", F.sqrt, ew.Sqrt), ("sin", F.sin, ew.Sin), ("cos", F.cos, ew.Cos),
                        ("tanh", F.tanh, ew.Tanh), ("sigmoid", F.sigmoid, ew.Sigmoid)):
    _METHODS["__neg__" if _op == "neg" else _op] = lean.unary_method(_op, _full, _fn)

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

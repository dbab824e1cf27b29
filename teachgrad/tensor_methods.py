"""Tensor methods and operators, each one a function from :mod:`teachgrad.ops`.

Kept apart from ``tensor.py`` so the class itself stays short, and so that imports
point one way: :mod:`teachgrad.ops` imports ``Tensor``, and this module, above both,
attaches the operations to the class. ``x.exp()`` is ``ops.functional.exp(x)``,
``x + y`` is ``ops.functional.add(x, y)``, ``x.to("cuda")`` is ``ops.convert.to``.
Importing it also attaches the in-place methods (``tensor_inplace.py``).
"""
from __future__ import annotations

from typing import Any

from . import dtypes, tensor_inplace  # noqa: F401  (tensor_inplace attaches add_, copy_, ...)
from .autograd import lean
from .device import Device, as_device
from .ops import counting, elementwise as ew, functional as F, norms, sampling, statistics
from .ops import diagonals, gather_scatter, logical, masked, scans, sorting, splitting
from .ops import reduce as red
from .ops.convert import to as _convert
from .ops.indexing import setitem as _setitem
from .tensor import Tensor
from .unsupported import install_missing_methods


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
    "abs": F.abs, "relu": F.relu, "sign": F.sign, "erf": F.erf, "log1p": F.log1p, "expm1": F.expm1,
    "addcmul": F.addcmul, "addcdiv": F.addcdiv, "lerp": F.lerp,
    "maximum": F.maximum, "minimum": F.minimum, "clamp": F.clamp, "clip": F.clamp,
    "eq": F.eq, "ne": F.ne, "lt": F.lt, "le": F.le, "gt": F.gt, "ge": F.ge,
    # reductions (sum and mean below)
    "max": F.max, "min": F.min, "amax": F.amax, "amin": F.amin,
    "argmax": F.argmax, "argmin": F.argmin, "any": F.any, "all": F.all,
    # linear algebra
    "matmul": F.matmul, "mm": F.mm, "bmm": F.bmm, "softmax": F.softmax, "log_softmax": F.log_softmax,
    # shapes
    "reshape": F.reshape, "view": F.view, "flatten": F.flatten, "unsqueeze": F.unsqueeze,
    "squeeze": F.squeeze, "permute": F.permute, "transpose": F.transpose, "t": F.t,
    "expand": F.expand, "contiguous": F.contiguous, "clone": F.clone, "repeat": F.repeat,
    "isnan": F.isnan, "isinf": F.isinf, "isfinite": F.isfinite,
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

# ... and the sum and mean of a whole float tensor (a loss, the end of a chain)
for _op, _full, _fn in (("sum", F.sum, red.Sum), ("mean", F.mean, red.Mean)):
    _METHODS[_op] = lean.reduction_method(_full, _fn)

# sorting, gathering and scattering, running totals, matrix parts, splitting
for _module in (sorting, gather_scatter, masked, scans, diagonals, splitting, logical):
    _METHODS.update(_module.TENSOR_METHODS)

def _format(self: Tensor, spec: str) -> str:
    """``f"{loss:.4f}"``: a 0-d tensor formats as its number, as in PyTorch."""
    if self.ndim == 0:
        return format(self.item(), spec)
    if not spec:
        return str(self)
    raise TypeError(f"unsupported format string passed to Tensor.__format__: {spec!r} formats "
                    f"a number, and this tensor has shape {list(self.shape)}. Fix: format one "
                    f"number, e.g. f\"{{t.item():{spec}}}\" or f\"{{t.sum():{spec}}}\"")


_METHODS.update({
    # statistics and norms
    "std": statistics.std, "var": statistics.var, "logsumexp": statistics.logsumexp,
    "norm": norms.norm,
    # values rather than positions
    "unique": counting.unique, "nonzero": counting.nonzero, "bincount": counting.bincount,
    "mode": counting.mode, "isclose": counting.isclose, "allclose": counting.allclose,
    "equal": counting.equal,
    # sampling
    "multinomial": sampling.multinomial, "bernoulli": sampling.bernoulli,
    "__format__": _format,
})

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


# -- moving and converting ---------------------------------------------------------------

def _to(self: Tensor, *args: Any, dtype: Any = None, device: Any = None,
        copy: bool = False) -> Tensor:
    """``t.to("cuda")``, ``t.to(tg.float64)``, ``t.to("cpu", tg.float32)``: differentiable."""
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, (str, Device)):
            device = a
        else:
            dtype = a
    return _convert(self, device=None if device is None else as_device(device),
                    dtype=None if dtype is None else dtypes.get_dtype(dtype), copy=copy)


def _type(self: Tensor, dtype: Any = None) -> Any:
    return str(self.dtype) if dtype is None else self.to(dtypes.get_dtype(dtype))


def _setitem_method(self: Tensor, index: Any, value: Any) -> None:
    _setitem(self, index, value)


def _cpu(self: Tensor) -> Tensor:
    return self.to("cpu")


def _cuda(self: Tensor, device: Any = None) -> Tensor:
    """``t.cuda()`` (the current device), ``t.cuda(1)`` or ``t.cuda("cuda:1")``."""
    return self.to("cuda" if device is None else as_device(device))


def _float(self: Tensor) -> Tensor:
    return self.to(dtypes.float32)


def _double(self: Tensor) -> Tensor:
    return self.to(dtypes.float64)


def _half(self: Tensor) -> Tensor:
    return self.to(dtypes.float16)


def _bfloat16(self: Tensor) -> Tensor:
    return self.to(dtypes.bfloat16)


def _long(self: Tensor) -> Tensor:
    return self.to(dtypes.int64)


def _bool(self: Tensor) -> Tensor:
    return self.to(dtypes.bool_)


for _name, _fn in (("to", _to), ("type", _type), ("__setitem__", _setitem_method),
                   ("cpu", _cpu), ("cuda", _cuda), ("float", _float), ("double", _double),
                   ("long", _long), ("bool", _bool), ("half", _half), ("bfloat16", _bfloat16)):
    # named as methods of Tensor, in tracebacks and in the stream records (co_qualname)
    _fn.__name__, _fn.__qualname__ = _name, f"Tensor.{_name}"
    _fn.__code__ = _fn.__code__.replace(co_name=_name, co_qualname=f"Tensor.{_name}")
    setattr(Tensor, _name, _fn)


# Last, once every method is attached: torch.Tensor attributes teachgrad lacks raise an
# AttributeError that says so (see unsupported.py: no __getattr__, so no slower lookups).
install_missing_methods(Tensor)

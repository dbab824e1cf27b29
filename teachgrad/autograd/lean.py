"""The lean path: tensor arithmetic when nothing is recorded and nobody watches.

Every backward formula is ordinary tensor code (``grad * b``, ``grad * (1 - t * t)``),
and the engine runs it with recording off. An operation's full path checks and
promotes its arguments, builds a :class:`~teachgrad.autograd.function.Context` and
runs its Function, several microseconds of Python in all. In the commonest case
(two floating-point tensors of one dtype, shape and device, or one such tensor and
a Python number) none of that changes the answer, which is one backend primitive on
the two arrays. The wrappers here send exactly that case straight to the backend
and every other call down the full path, unchanged. ``x.sum()`` and ``x.mean()`` over
the whole of a float32 or float64 tensor (a loss, the end of a chain) take a shortcut
of the same kind.

Nothing is lost by skipping: with recording off there is no node for
``tg.graph`` to see, and while an observer (``tg.jit.trace``) is set every call
takes the full path, so a trace sees every operation.
"""
from __future__ import annotations

from typing import Any, Callable

from .. import dtypes
from ..cuda_devices import is_elsewhere as elsewhere
from . import function, grad_mode


def binary_method(op: str, full: Callable[[Any, Any], Any], fn: type[function.Function],
                  reflected: bool = False) -> Callable[[Any, Any], Any]:
    """``Tensor.__<op>__`` (or, ``reflected``, ``__r<op>__``: ``1 - t``): ``full`` on the
    operands, or for plain ones ``fn`` directly (recording: the checks ``full`` makes
    would change nothing) or the backend's ``op`` (nothing recorded, nobody watching)."""
    def method(self: Any, other: Any) -> Any:
        dtype = self.dtype
        if dtype.is_floating_point:
            # ``other`` as the operation takes it when it needs no promotion or broadcasting
            # against ``self``, else None: then the full path decides
            kind = type(other)
            if kind is float:
                b = other
            elif kind is int:
                b = float(other)  # a Python number keeps a float tensor's dtype, as in PyTorch
            elif (isinstance(other, function.Tensor) and other.dtype is dtype
                  and other.device is self.device and other._array.shape == self._array.shape):
                b = other
            else:
                b = None
            if b is not None:
                args = (b, self) if reflected else (self, b)
                if (function.observer is not None or function.cast_policy is not None
                        or (self.device.index is not None and elsewhere(self))):
                    return fn.apply(*args)
                if grad_mode._enabled:
                    return function.apply_plain(fn, args, self)
                x, y = args  # (a Python number here is a float: see above)
                return function.Tensor._make_as(self._backend.binary(
                    op, x if type(x) is float else x._array, y if type(y) is float else y._array),
                    self)
        return full(other, self) if reflected else full(self, other)
    method.__name__ = f"__r{op}__" if reflected else f"__{op}__"
    method.__doc__ = full.__doc__
    return method


def unary_method(op: str, full: Callable[[Any], Any],
                 fn: type[function.Function]) -> Callable[[Any], Any]:
    """``Tensor.__neg__``, ``Tensor.tanh``, ...: ``full(self)``, or for a floating-point
    tensor ``fn`` directly (recording) or the backend's ``op`` (nothing recorded)."""
    def method(self: Any) -> Any:
        if self.dtype.is_floating_point:
            if (function.observer is not None or function.cast_policy is not None
                    or (self.device.index is not None and elsewhere(self))):
                return fn.apply(self)
            if grad_mode._enabled:
                return function.apply_plain(fn, (self,), self)
            return function.Tensor._make_as(self._backend.unary(op, self._array), self)
        return full(self)
    method.__name__ = full.__name__
    method.__doc__ = full.__doc__
    return method


_WHOLE = (dtypes.float32, dtypes.float64)  # (a 16-bit tensor's sum runs in float32: full path)


def reduction_method(full: Callable[..., Any], fn: type[function.Function]) -> Callable[..., Any]:
    """``Tensor.sum``, ``Tensor.mean``: ``full(self, dim, keepdim)``, or over the whole of a
    float32 or float64 tensor (a loss, the end of a chain) ``fn`` directly, recording or
    not (:func:`~teachgrad.autograd.function.apply_one`): the same node and result
    without ``full``'s checks and ``Function._apply``'s general pass."""
    def method(self: Any, dim: Any = None, keepdim: bool = False) -> Any:
        if (dim is None and keepdim is False and self.dtype in _WHOLE
                and function.observer is None and function.cast_policy is None
                and (self.device.index is None or not elsewhere(self))):
            return function.apply_one(fn, self, (None, False))
        return full(self, dim, keepdim)
    method.__name__ = full.__name__
    method.__doc__ = full.__doc__
    return method

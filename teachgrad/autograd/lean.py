"""The lean path: tensor arithmetic when nothing is recorded and nobody watches.

Every backward formula is ordinary tensor code (``grad * b``, ``grad * (1 - t * t)``),
and the engine runs it with recording off. An operation's full path checks and
promotes its arguments, builds a :class:`~teachgrad.autograd.function.Context` and
runs its Function, several microseconds of Python in all. In the commonest case
(two floating-point tensors of one dtype, shape and device, or one such tensor and
a Python number) none of that changes the answer, which is one backend primitive on
the two arrays. The wrappers here send exactly that case straight to the backend
and every other call down the full path, unchanged.

Nothing is lost by skipping: with recording off there is no node for
``tg.graph`` to see, and while an observer (``tg.jit.trace``) is set every call
takes the full path, so a trace sees every operation.
"""
from __future__ import annotations

from typing import Any, Callable

from . import function, grad_mode


def _plain(self: Any, other: Any) -> Any:
    """``other`` as the operation takes it when it needs no promotion or broadcasting
    against ``self`` (a floating-point tensor), else ``None``: then the full path decides."""
    kind = type(other)
    if kind is float or kind is int:  # (not bool: True * x follows its own rules)
        return float(other)  # a Python number keeps a float tensor's dtype, as in PyTorch
    if (isinstance(other, function.Tensor) and other.dtype is self.dtype
            and other.device is self.device and other._array.shape == self._array.shape):
        return other
    return None


def _value(x: Any) -> Any:
    return x._array if isinstance(x, function.Tensor) else x


def binary_method(op: str, full: Callable[[Any, Any], Any],
                  fn: type[function.Function]) -> Callable[[Any, Any], Any]:
    """``Tensor.__<op>__``: ``full(self, other)``, or for plain operands ``fn`` directly
    (recording: the checks ``full`` makes would change nothing) or the backend's ``op``
    (nothing recorded, nobody watching)."""
    def method(self: Any, other: Any) -> Any:
        if self.dtype.is_floating_point:
            b = _plain(self, other)
            if b is not None:
                if grad_mode._enabled or function.observer is not None:
                    return fn.apply(self, b)
                backend = self._backend
                return function.Tensor._make(backend.binary(op, self._array, _value(b)),
                                             backend, self.device)
        return full(self, other)
    method.__name__ = f"__{op}__"
    method.__doc__ = full.__doc__
    return method


def reflected_method(op: str, full: Callable[[Any, Any], Any],
                     fn: type[function.Function]) -> Callable[[Any, Any], Any]:
    """``Tensor.__r<op>__`` (``1 - t``): :func:`binary_method` with the operands swapped."""
    def method(self: Any, other: Any) -> Any:
        if self.dtype.is_floating_point:
            a = _plain(self, other)
            if a is not None:
                if grad_mode._enabled or function.observer is not None:
                    return fn.apply(a, self)
                backend = self._backend
                return function.Tensor._make(backend.binary(op, _value(a), self._array),
                                             backend, self.device)
        return full(other, self)
    method.__name__ = f"__r{op}__"
    method.__doc__ = full.__doc__
    return method


def unary_method(op: str, full: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``Tensor.__neg__``: ``full(self)``, or the backend directly when nothing is recorded."""
    def method(self: Any) -> Any:
        if not grad_mode._enabled and function.observer is None and self.dtype.is_floating_point:
            backend = self._backend
            return function.Tensor._make(backend.unary(op, self._array), backend, self.device)
        return full(self)
    method.__name__ = f"__{op}__"
    method.__doc__ = full.__doc__
    return method

"""How the tracer records an in-place write (``buf += x``, ``running_mean.mul_(0.9)``).

A graph is made of operations that make new values, so a write is recorded as the
operation it performs, done out of place (``buf + x``); from then on the written
tensor stands for that new value in the graph (as ``torch.jit.trace`` records it).
When the tensor came from outside the function (a module's buffer, a captured
tensor), the graph's output also lists it under ``writes``: every call writes the
final value back, as the eager code did, so a compiled BatchNorm in training mode
moves its running statistics on every call.

A write that cannot be recorded this way stops the trace with a clear error: into an
input (the caller's tensor), into a tensor whose memory another traced value shares (a
view would not see the change), and the writes with no out-of-place twin here (random
fills, item assignment).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..creation import full
from ..ops import functional as F
from ..tensor import Tensor


def _same_dtype(other: Any, like: Tensor) -> Any:
    """The operand as eager's in-place arithmetic uses it: in the written tensor's dtype."""
    if isinstance(other, Tensor) and other.dtype is not like.dtype:
        return other.to(like.dtype)
    return other


def _filled(t: Tensor, value: Any) -> Tensor:
    """What ``t.copy_(value)`` / ``t.fill_(value)`` leaves in ``t``, as a new value."""
    if not isinstance(value, Tensor):
        return full(tuple(t.shape), value, dtype=t.dtype, device=t.device)  # a constant
    value = value.to(t.device, t.dtype)
    if tuple(value.shape) == tuple(t.shape):
        return value
    return value.expand(tuple(t.shape)).clone()


def _binary(op: Callable) -> Callable:
    return lambda t, other, alpha=1: op(t, _same_dtype(other, t), alpha=alpha)


def _product(op: Callable) -> Callable:
    return lambda t, other: op(t, _same_dtype(other, t))


#: each recorded in-place method -> the out-of-place computation of what it leaves in ``t``
OUT_OF_PLACE: dict[str, Callable[..., Tensor]] = {
    "add_": _binary(F.add), "__iadd__": _binary(F.add),
    "sub_": _binary(F.sub), "__isub__": _binary(F.sub),
    "mul_": _product(F.mul), "__imul__": _product(F.mul),
    "div_": _product(F.div), "__itruediv__": _product(F.div),
    "copy_": _filled, "fill_": _filled, "zero_": lambda t: _filled(t, 0),
    "clamp_": lambda t, min=None, max=None: F.clamp(t, min, max),  # noqa: A002
    "lerp_": lambda t, end, weight: F.lerp(t, end, weight),
    "addcmul_": lambda t, t1, t2, *, value=1: F.add(t, F.mul(t1, t2), alpha=value),
    "addcdiv_": lambda t, t1, t2, *, value=1: F.add(t, F.div(t1, t2), alpha=value),
}


def _may_share_memory(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    return getattr(a, "buffer", a) is getattr(b, "buffer", b)  # the cuda backend's arrays


def check_writable(tracer: Any, t: Tensor, method: str) -> None:
    """Refuse a write the graph cannot record faithfully (before anything is written)."""
    ref = tracer.values.get(id(t))
    if ref is not None and tracer.graph.node(ref.node).op == "placeholder":
        raise tracer.error(
            f"graph break: the in-place operation {method} writes into input '{ref.node}' of "
            "the traced function; a graph cannot change its caller's tensors. Fix: work on a "
            f"copy ({ref.node} = {ref.node}.clone()) or use the out-of-place form.")
    for other in tracer.keep_alive:
        if other is not t and _may_share_memory(other._array, t._array):
            raise tracer.error(
                f"graph break: the in-place operation {method} writes into "
                f"{tracer.last_op_of(t)}, whose memory another value of the trace shares (a "
                "view, or a detach()ed copy): the graph would not see the change there. Fix: "
                "clone() the tensor before writing into it, or use the out-of-place form.")


def recording(tracer: Any, method: str, original: Callable) -> Callable:
    """``original`` (an in-place Tensor method) made to record itself while tracing."""
    out_of_place = OUT_OF_PLACE[method]

    def write(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if tracer.depth:  # inside an operation's own code: not the traced program's write
            return original(self, *args, **kwargs)
        check_writable(tracer, self, method)
        tracer.before_write(self)  # the old value keeps a node of its own
        new = out_of_place(self, *args, **kwargs)  # recorded, from the old value
        tracer.depth += 1
        try:
            original(self, *args, **kwargs)  # the real write, with eager's own checks
        finally:
            tracer.depth -= 1
        tracer.after_write(self, new if new.dtype is self.dtype else new.to(self.dtype))
        return self
    write.__name__ = method
    return write


__all__ = ["OUT_OF_PLACE", "check_writable", "recording"]

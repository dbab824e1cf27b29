"""The one operation the tracer adds: comparisons, which the engine runs outside Functions.

``x > 0`` makes a bool tensor that has no gradient, so the engine computes it
directly instead of through a Function. A graph must still record it (a
``tg.where(x > 0, ...)`` depends on it), so while tracing, comparisons run as
:class:`Compare` and appear in the graph like any other operation.
"""
from __future__ import annotations

from ..autograd.function import Context, Function
from ..ops.dispatch import value


class Compare(Function):
    rule = "comparisons have no gradient (their result is bool)"

    @staticmethod
    def forward(ctx: Context, op: str, a, b):
        return ctx.backend.binary(op, value(a), value(b))

    @staticmethod
    def backward(ctx: Context, grad):
        return None, None, None


class ArgReduce(Function):
    """``argmax``/``argmin`` (integer results, no gradient), recorded while tracing."""

    rule = "argmax/argmin have no gradient (their result is an index)"

    @staticmethod
    def forward(ctx: Context, op: str, a, axis, keepdim: bool):
        return ctx.backend.arg_reduce(op, a._array, axis, keepdim)

    @staticmethod
    def backward(ctx: Context, grad):
        return None, None, None, None

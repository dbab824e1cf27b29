"""``Function`` and ``Context``: how one differentiable operation is defined.

A Function has a static ``forward`` (compute the result, save what backward
needs on ``ctx``) and a static ``backward`` (turn the gradient of the output
into one gradient per input). ``Function.apply`` runs forward and, when
recording, leaves behind a :class:`Node` in the graph that points at the nodes
of the inputs. That node is the tensor's ``grad_fn``.
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Callable

from . import grad_mode

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import Tensor

_sequence = itertools.count()  # creation order of nodes: later nodes run first in backward

FREED_GRAPH_MESSAGE = (
    "Trying to backward through the graph a second time (or to use saved tensors after "
    "they were freed). The first backward() frees what each operation saved, to save memory. "
    "Fix: pass retain_graph=True to the first backward() if you need to go through the graph "
    "again, or recompute the forward pass."
)


class Context:
    """What ``forward`` leaves for ``backward``: saved tensors and any attributes.

    ``ctx.needs_input_grad[i]`` tells whether input ``i`` wants a gradient, so
    backward can skip work nobody asked for.
    """

    def __init__(self) -> None:
        self.needs_input_grad: tuple[bool, ...] = ()
        self._saved: tuple | None = ()
        self._saved_versions: tuple = ()
        self._non_differentiable: set[int] = set()
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep ``tensors`` for backward (freed after it unless ``retain_graph``)."""
        from ..tensor import Tensor
        self._saved = tensors
        self._saved_versions = tuple(t._version if isinstance(t, Tensor) else None for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        if self._saved is None:
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        from ..tensor import Tensor
        for i, (t, v) in enumerate(zip(self._saved, self._saved_versions)):
            if isinstance(t, Tensor) and t._version != v:
                raise RuntimeError(
                    f"one of the tensors needed for gradient computation (saved tensor {i}, "
                    f"shape {list(t.shape)}) was modified in place after it was saved "
                    f"(its version is {t._version}, expected {v}). Fix: use an out-of-place "
                    "operation (x = x + 1 instead of x += 1), or .clone() it first."
                )
        return self._saved

    def mark_non_differentiable(self, *tensors: "Tensor") -> None:
        """Outputs listed here never require grad (e.g. the indices of ``max``)."""
        self._non_differentiable.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        """With False, backward receives ``None`` instead of zeros for unused outputs."""
        self.materialize_grads = value

    def _free(self) -> None:
        self._saved = None


class Node:
    """One recorded operation in the graph (what ``tensor.grad_fn`` is).

    ``next_functions`` lists, in argument order, where each input's gradient
    goes: the input's own ``grad_fn``, an :class:`AccumulateGrad` for a leaf that
    requires grad, or ``None``. An input used twice appears twice.
    """

    __slots__ = ("function", "ctx", "next_functions", "input_meta", "num_outputs",
                 "output_meta", "sequence", "pre_hooks", "output_values", "__weakref__")

    def __init__(self, function: type["Function"], ctx: Context) -> None:
        self.function = function
        self.ctx = ctx
        self.next_functions: tuple[tuple[Any, int], ...] = ()
        self.input_meta: tuple = ()  # (shape, dtype, device) per input, None for non-tensors
        self.num_outputs = 1
        self.output_meta: tuple = ()  # (shape, dtype, device) per output
        self.sequence = next(_sequence)
        self.pre_hooks: dict[int, list[Callable]] = {}  # output index -> tensor hooks
        self.output_values: tuple = ()  # small outputs' arrays, kept for the graph view

    def name(self) -> str:
        return self.function.__name__ + "Backward"

    @property
    def rule(self) -> str:
        """The derivative rule of this operation, as one line of text."""
        return getattr(self.function, "rule", "") or "(custom Function: see its backward)"

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


class AccumulateGrad:
    """The end of the line for a leaf: adds the incoming gradient into ``.grad``."""

    __slots__ = ("variable", "pre_hooks", "sequence", "__weakref__")
    next_functions: tuple = ()
    num_outputs = 1
    rule = "leaf.grad += incoming grad"

    def __init__(self, variable: "Tensor") -> None:
        self.variable = variable
        self.pre_hooks: dict[int, list[Callable]] = {}
        self.sequence = float("inf")  # leaves take their gradient as soon as it is ready

    def name(self) -> str:
        return "AccumulateGrad"

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {id(self):#x}>"


def _edge_of(t: Any) -> tuple[Any, int] | None:
    """Where the gradient of input ``t`` must go, or None."""
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    if t.requires_grad:
        return (t._accumulator(), 0)
    return None


class _FunctionMeta(type):
    def __repr__(cls) -> str:
        return f"<Function {cls.__module__}.{cls.__name__}>"


class Function(metaclass=_FunctionMeta):
    """Base class of every differentiable operation, built-in or your own.

    Subclass it, write two static methods, then call ``YourFunction.apply(...)``::

        class Square(tg.autograd.Function):
            rule = "d(x²)/dx = 2x"

            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x          # runs without recording

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * 2 * x   # one gradient per input of forward

    ``forward`` may return a tensor, a backend array (built-in ops do), or a tuple
    of them. ``backward`` returns one gradient (or ``None``) per forward input.
    """

    #: One-line derivative rule shown by the backprop stepper.
    rule: str = ""

    @staticmethod
    def forward(ctx: Context, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx: Context, *grad_outputs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define a static backward(ctx, grad)")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            f"{type(self).__name__} is used through its class: call "
            f"{type(self).__name__}.apply(...), not {type(self).__name__}(...)"
        )

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        from ..tensor import Tensor, _common_device, _wrap_output

        tensor_args = [a for a in args if isinstance(a, Tensor)]
        device = _common_device(tensor_args, cls.__name__)
        ctx = Context()
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        record = grad_mode._enabled and any(needs)
        ctx.needs_input_grad = needs
        ctx.backend = tensor_args[0]._backend if tensor_args else None

        previous = grad_mode._set(False)
        try:
            raw = cls.forward(ctx, *args, **kwargs)
        finally:
            grad_mode._enabled = previous

        is_tuple = isinstance(raw, tuple)
        outputs = tuple(_wrap_output(o, device, args) for o in (raw if is_tuple else (raw,)))
        if record:
            node = Node(cls, ctx)
            node.next_functions = tuple(
                (_edge_of(a) or (None, 0)) if isinstance(a, Tensor) else (None, 0) for a in args
            )
            node.input_meta = tuple(
                (a.shape, a.dtype, a.device) if isinstance(a, Tensor) else None for a in args
            )
            node.num_outputs = len(outputs)
            node.output_meta = tuple((o.shape, o.dtype, o.device) for o in outputs)
            node.output_values = tuple(o._array if o.numel() <= 16 else None for o in outputs)
            for i, o in enumerate(outputs):
                if id(o) in ctx._non_differentiable or not o.dtype.is_floating_point:
                    continue
                o.grad_fn = node
                o.requires_grad = True
                o._output_nr = i
        else:
            ctx._free()  # nothing will call backward: don't hold on to saved tensors
        return outputs if is_tuple else outputs[0]


class FunctionCtx(Context):
    """Alias kept for code written against ``torch.autograd.function.FunctionCtx``."""

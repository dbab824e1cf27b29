"""``tg.jit.trace``: run a function once and write down every operation it did.

The tracer sits on the engine's one seam for watchers, ``Function.apply``'s
``observer``: while tracing, every ``Function.apply(*args, **kwargs)`` comes here,
runs the operation for real (``cls._apply``) and appends a node to the graph:
which Function ran, which earlier values it read (:class:`~teachgrad.jit.ir.Ref`),
and its non-tensor attributes. A tensor the function reads but did not compute
(a parameter, a constant) becomes a ``get_attr`` node.

What a trace cannot see is *Python*: an ``if`` on a tensor's value, a loop whose
count depends on data. The trace records the one path that ran this time. That
is why ``check_inputs=`` re-traces on other inputs and warns when the graphs differ,
and why leaving the tensor world (``.item()``, ``.numpy()``, ``.tolist()`` on a
computed value) inside a traced function is an error: the graph would break there.
In-place writes are recorded as the out-of-place operation they perform
(:mod:`teachgrad.jit.writes`).

The tracer also notes where each constant came from: a tensor made while tracing
(``tg.zeros(3)`` inside the function) belongs to the graph, and is copied before a
write changes it; a tensor from outside (a parameter, a captured tensor) is
*captured*: read live on every call, and guarded by a compiled function where the
graph depends on its value (:mod:`teachgrad.jit.guards`).
"""
from __future__ import annotations

import inspect
import sys
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from ..autograd import function as function_module
from ..autograd import grad_mode
from ..tensor import Tensor
from . import writes
from .ir import Graph, Node, Ref, TensorMeta

# comparisons (x > 0) and argmax are not Functions in the engine (they have no gradient);
# while tracing they are routed through these Functions so the graph sees them
from .ops import ArgReduce, Compare


class TracingError(RuntimeError):
    """The function cannot be traced as it is (the message says why and what to do)."""


class TracerWarning(UserWarning):
    """The trace may not mean what the code says (a branch on a tensor was baked in)."""


def meta_of(t: Tensor) -> TensorMeta:
    return TensorMeta(tuple(int(s) for s in t.shape), t.dtype.name, t.device.type)


class Tracer:
    """Records the operations of one call into a :class:`Graph`."""

    def __init__(self, constant_names: dict[int, str]) -> None:
        self.graph = Graph()
        self.values: dict[int, Ref] = {}  # id(tensor) -> the node that produced it
        self.keep_alive: list[Tensor] = []  # so no id is reused while we trace
        self.constant_names = constant_names  # id(parameter) -> "fc1.weight"
        self.depth = 0  # > 0 while an operation's own forward runs: nested ops are not recorded
        self.fresh: set[int] = set()  # ids of the tensors made while tracing
        self.targets: dict[int, str] = {}  # id(constant tensor) -> its target in graph.constants
        self.written: dict[str, Tensor] = {}  # captured target -> the tensor written in place
        self.before: dict[str, Tensor] = {}  # captured target -> a copy from before the first write
        self.error = TracingError

    # -- values -----------------------------------------------------------------
    def placeholder(self, name: str, t: Tensor) -> Tensor:
        """A new handle on input ``t`` (the same tensor passed twice is still two inputs)."""
        node = self.graph.add(Node(self.graph.unique_name(name), "placeholder", name,
                                   meta=(meta_of(t),)))
        handle = Tensor._make(t._array, t._backend, t.device)
        handle.requires_grad = t.requires_grad
        self._bind(handle, Ref(node.name))
        return handle

    def _bind(self, t: Tensor, ref: Ref) -> None:
        self.values[id(t)] = ref
        self.keep_alive.append(t)

    def ref(self, t: Tensor) -> Ref:
        """The node that gives ``t``: a traced value, or a new ``get_attr`` for a constant."""
        found = self.values.get(id(t))
        if found is not None:
            return found
        target = self.constant_names.get(id(t)) or self._unnamed_constant()
        self.graph.constants[target] = t
        if id(t) not in self.fresh:
            self.graph.captured.add(target)  # from outside: read live on every call
        self.targets[id(t)] = target
        node = self.graph.add(Node(self.graph.unique_name(target), "get_attr", target,
                                   meta=(meta_of(t),)))
        self._bind(t, Ref(node.name))
        return Ref(node.name)

    def _unnamed_constant(self) -> str:
        """``constant0``, ``constant1``, ... skipping every name a parameter or buffer has."""
        taken = set(self.graph.constants) | set(self.constant_names.values())
        i = len(self.graph.constants)
        while f"constant{i}" in taken:
            i += 1
        return f"constant{i}"

    def bake(self, t: Tensor) -> None:
        """The trace read ``t``'s value into Python: the graph holds for this value only."""
        if id(t) in self.fresh or self.computed(t):
            return  # (a value of the graph's own: fixed, or a graph break, said elsewhere)
        self.ref(t)
        target = self.targets.get(id(t))
        if target in self.graph.captured:
            self.graph.baked.add(target)

    # -- in-place writes (see teachgrad.jit.writes) ---------------------------------
    def before_write(self, t: Tensor) -> None:
        """Give ``t``'s value before a write a node; a graph-owned constant is copied first,
        so the graph keeps the value it had, not the one the write leaves."""
        self.ref(t)
        target = self.targets.get(id(t))
        if target is None:
            return
        if target in self.graph.captured:
            if target not in self.before:
                self.before[target] = self._copy(t)  # (to undo the trace's own writes)
        elif self.graph.constants[target] is t:
            self.graph.constants[target] = self._copy(t)

    def _copy(self, t: Tensor) -> Tensor:
        self.depth += 1  # (the copy is not part of the program)
        try:
            with grad_mode.no_grad():
                return t.clone()
        finally:
            self.depth -= 1

    def undo_writes(self) -> None:
        """Give the captured tensors the trace wrote their values from before it."""
        for target, old in self.before.items():
            live = self.graph.constants[target]
            live._backend.setitem(live._array, (Ellipsis,), old._array)
            live._bump_version()

    def after_write(self, t: Tensor, new: Tensor) -> None:
        """From now on ``t`` stands for ``new``; a captured tensor is written back per call."""
        self.values[id(t)] = self.ref(new)
        target = self.targets.get(id(t))
        if target is not None and target in self.graph.captured:
            self.written[target] = t

    def as_arg(self, value: Any) -> Any:
        """A call argument as the graph stores it: tensors become refs, the rest stays."""
        if isinstance(value, Tensor):
            return self.ref(value)
        if isinstance(value, (tuple, list)):
            return type(value)(self.as_arg(v) for v in value)
        return value

    def computed(self, t: Tensor) -> bool:
        """Whether ``t`` is an input or an operation's result (not a constant) in the graph."""
        ref = self.values.get(id(t))
        return ref is not None and self.graph.node(ref.node).op != "get_attr"

    def last_op_of(self, t: Tensor) -> str:
        ref = self.values.get(id(t))
        if ref is None:
            return "a constant"
        node = self.graph.node(ref.node)
        if node.op == "call_function":
            return f"{node.target_name} (node '{node.name}')"
        return f"input '{node.name}'"

    # -- the observer -------------------------------------------------------------
    def observe(self, cls: type, args: tuple, kwargs: dict) -> Any:
        if self.depth:  # inside another operation's forward: only the outermost is recorded
            return cls._apply(*args, **kwargs)
        node_args = self.as_arg(args)
        node_kwargs = {k: self.as_arg(v) for k, v in kwargs.items()}
        self.depth += 1
        try:
            out = cls._apply(*args, **kwargs)
        finally:
            self.depth -= 1
        outputs = out if isinstance(out, tuple) else (out,)
        name = self.graph.unique_name(cls.__name__.lower())
        self.graph.add(Node(name, "call_function", cls, node_args, node_kwargs,
                            tuple(meta_of(o) for o in outputs), isinstance(out, tuple)))
        for i, o in enumerate(outputs):
            self._bind(o, Ref(name, i if isinstance(out, tuple) else None))
        return out


@contextmanager
def _watching(tracer: Tracer) -> Iterator[None]:
    """Install the tracer on the seam, and guard the ways out of the graph, for one call."""
    from ..ops import functional, indexing

    from ..profiler.recorder import Collector

    outer = function_module.observer  # a profile recording may be watching: it resumes after
    if outer is not None and not isinstance(getattr(outer, "__self__", None), Collector):
        raise TracingError("tg.jit.trace was called while another trace is running. "
                           "Fix: trace the inner function on its own, then call it.")
    saved = {name: Tensor.__dict__.get(name, getattr(Tensor, name)) for name in (
        "item", "numpy", "tolist", "__bool__", "_check_writable", "detach", "_make",
        *writes.OUT_OF_PLACE)}
    saved_compare, saved_arg = functional._compare, functional._arg
    saved_index_values = indexing.index_values

    def breaks(method: str) -> Callable:
        original = saved[method]

        def guarded(self: Tensor, *a: Any, **k: Any) -> Any:
            if not tracer.depth:
                tracer.bake(self)  # (a value from outside: the graph now depends on it)
            if not tracer.depth and tracer.computed(self):
                raise TracingError(
                    f"graph break: .{method}() was called on the result of "
                    f"{tracer.last_op_of(self)} inside a traced function. Its value leaves the "
                    "tensor world, so the graph cannot record what happens next. Fix: keep the "
                    "computation in tensor operations (tg.where instead of an if on a value), "
                    f"or call .{method}() on the traced function's output, outside it.")
            return original(self, *a, **k)
        return guarded

    def index_values(item: Tensor) -> Any:
        if not tracer.depth:
            tracer.bake(item)  # (a tensor from outside: the graph holds for its value only)
            if tracer.computed(item):
                raise TracingError(
                    f"graph break: indexing with {tracer.last_op_of(item)} inside a traced "
                    "function. The index's values decide which elements are read, and a graph "
                    "would keep this call's choice for every input. Fix: use operations that "
                    "take the index as a tensor: tg.where(mask, x, 0) or x.masked_fill(~mask, 0) "
                    "for a mask, x.index_select(dim, idx) or x.gather(dim, idx) for positions.")
        return saved_index_values(item)

    def guarded_bool(self: Tensor) -> bool:
        if not tracer.depth:
            tracer.bake(self)
        if not tracer.depth and tracer.computed(self):
            warnings.warn(
                f"converting the result of {tracer.last_op_of(self)} to a Python bool: the "
                "branch taken now is baked into the graph and will be taken for every input. "
                "Fix: use tg.where for a data-dependent choice, or pass check_inputs= to "
                "see whether other inputs take another path.", TracerWarning, stacklevel=2)
            return saved["__bool__"](saved["detach"](self))
        return saved["__bool__"](self)

    def guarded_inplace(self: Tensor) -> None:
        # every in-place path checks that its target is writable before it writes; the
        # ones teachgrad.jit.writes records run their real write at depth > 0
        if not tracer.depth:
            frame = sys._getframe(1)
            while (frame.f_code.co_name.startswith("_") and not frame.f_code.co_name.startswith("__")
                   and frame.f_back is not None):
                frame = frame.f_back  # past the private helpers, to normal_ / setitem / ...
            caller = frame.f_code.co_name
            raise TracingError(
                f"graph break: the in-place operation {caller} on {tracer.last_op_of(self)} "
                "inside a traced function cannot be recorded in a graph (the ones that can: "
                f"{', '.join(m for m in writes.OUT_OF_PLACE if not m.startswith('__'))}, +=, -=, "
                "*=, /=). Fix: use the out-of-place form (tg.where(mask, value, y) instead of "
                "y[mask] = value), or make the tensor outside the traced function.")
        return saved["_check_writable"](self)

    def make(array: Any, backend: Any, device: Any) -> Tensor:
        t = saved["_make"].__func__(array, backend, device)
        if not tracer.depth:  # (inside an operation: its output is bound to a node anyway)
            tracer.fresh.add(id(t))  # made while tracing: the graph's own if it becomes a constant
            tracer.keep_alive.append(t)  # (so no id is reused while we trace)
        return t

    def compare(op: str, a: Any, b: Any) -> Tensor:
        if tracer.depth:
            return saved_compare(op, a, b)
        return Compare.apply(op, *_prepared(a, b, op))

    def arg_reduce(op: str, a: Tensor, dim: int | None, keepdim: bool) -> Tensor:
        if tracer.depth:
            return saved_arg(op, a, dim, keepdim)
        from ..ops.dispatch import normalize_dim
        return ArgReduce.apply(op, a, None if dim is None else normalize_dim(dim, a.ndim), keepdim)

    def detach(self: Tensor) -> Tensor:
        # a detached value is the same value: it keeps its place in the graph
        out = saved["detach"](self)
        if not tracer.depth and (id(self) in tracer.values or id(self) not in tracer.fresh):
            tracer._bind(out, tracer.ref(self))  # (a captured tensor: read live, like itself)
        return out

    function_module.observer = tracer.observe
    for name in ("item", "numpy", "tolist"):
        setattr(Tensor, name, breaks(name))
    Tensor.__bool__ = guarded_bool
    Tensor._check_writable = guarded_inplace
    Tensor.detach = detach
    Tensor._make = staticmethod(make)
    for name in writes.OUT_OF_PLACE:
        setattr(Tensor, name, writes.recording(tracer, name, saved[name]))
    functional._compare, functional._arg = compare, arg_reduce
    indexing.index_values = index_values
    try:
        yield
    finally:
        function_module.observer = outer
        for name, method in saved.items():
            setattr(Tensor, name, method)
        functional._compare, functional._arg = saved_compare, saved_arg
        indexing.index_values = saved_index_values


def _prepared(a: Any, b: Any, op: str) -> tuple[Any, Any]:
    from ..ops.dispatch import prepare_binary
    return prepare_binary(a, b, op)


def check_signature(fn: Callable, n_inputs: int) -> None:
    """Keyword-only tensor parameters cannot be traced: example inputs are positional."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins and the like: nothing to check
        return
    for p in params:
        if p.kind is p.KEYWORD_ONLY and (p.default is p.empty or isinstance(p.default, Tensor)):
            raise TracingError(
                f"cannot trace {getattr(fn, '__name__', fn)!r}: it takes the keyword-only "
                f"argument {p.name!r}, but trace passes example_inputs by position, and a "
                "tensor default would be baked in as a constant. Fix: make it positional, or "
                "trace a wrapper: "
                f"tg.jit.trace(lambda x, {p.name}: fn(x, {p.name}={p.name}), (x, {p.name})).")


def input_names(fn: Callable, n_inputs: int) -> list[str]:
    """Names for the placeholders: the function's own parameter names where it has them."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"input{i}" for i in range(n_inputs)]


def as_inputs(example_inputs: Any) -> tuple[Tensor, ...]:
    """``example_inputs`` as a tuple of tensors (a lone tensor is a 1-tuple)."""
    inputs = (example_inputs,) if isinstance(example_inputs, Tensor) else example_inputs
    if not isinstance(inputs, (tuple, list)) or not all(isinstance(t, Tensor) for t in inputs):
        if isinstance(inputs, (tuple, list)):
            got: Any = [type(t).__name__ for t in inputs]
        else:
            got = type(inputs).__name__
        raise TypeError(f"example_inputs must be a tensor or a tuple of tensors, not {got}. "
                        "Fix: pass the tensors the function takes, e.g. (x,) or (x, y); wrap "
                        "non-tensor arguments in a lambda.")
    return tuple(inputs)


def record(fn: Callable, inputs: Sequence[Tensor], constant_names: dict[int, str],
           names: Sequence[str], side_effects: bool = True) -> Graph:
    """Run ``fn(*inputs)`` once under a tracer; the graph it built.

    ``side_effects=False`` undoes the trace's writes into tensors from outside (as
    ``tg.compile`` wants: the compiled graph then makes the call's writes, once);
    ``tg.jit.trace`` keeps them, as ``torch.jit.trace`` does: tracing is a real call.
    """
    tracer = Tracer(constant_names)
    handles = [tracer.placeholder(name, t) for name, t in zip(names, inputs)]
    try:
        with _watching(tracer):
            result = fn(*handles)
    finally:
        if not side_effects:
            tracer.undo_writes()
    outputs = result if isinstance(result, tuple) else (result,)
    for i, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            what = f"element {i} of its tuple" if isinstance(result, tuple) else "its result"
            raise TracingError(
                f"the traced function returned a {type(o).__name__} as {what}; a graph can only "
                "return tensors. Fix: return tensors (tg.tensor(value) for a number), or a tuple "
                "of tensors, and compute the rest outside the traced function.")
    refs = tuple(tracer.ref(o) for o in outputs)
    out_args = refs if isinstance(result, tuple) else refs[0]
    written = tuple((target, tracer.ref(t)) for target, t in tracer.written.items())
    tracer.graph.add(Node("output", "output", None, (out_args,),
                          {"writes": written} if written else {}))
    return tracer.graph


def differences(first: Graph, second: Graph) -> str | None:
    """Where two traces of one function differ: the first operation that is not the same."""
    a = [(n.target_name, n.args, n.kwargs) for n in first.operations()]
    b = [(n.target_name, n.args, n.kwargs) for n in second.operations()]
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return (f"operation {i} is {x[0]} with {x[1]} in the first trace but {y[0]} with "
                    f"{y[1]} in the re-trace")
    if len(a) != len(b):
        longer, name = (a, "first trace") if len(a) > len(b) else (b, "re-trace")
        extra = longer[min(len(a), len(b))][0]
        return (f"the {name} has {abs(len(a) - len(b))} more operation(s), starting with "
                f"{extra} (operation {min(len(a), len(b))})")
    return None

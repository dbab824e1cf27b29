"""``tg.compile``: trace, optimise, generate code, and cache it per input signature.

A compiled function keeps compiled graphs by the *signature* of their inputs (shapes,
dtypes, devices, requires_grad, and grad mode), each with the *guards* of its trace:
what else it assumed (:mod:`teachgrad.jit.guards`). A call reuses a graph whose
guards hold; otherwise it traces and compiles again. Each compiled graph has two
ways to run:

* when no gradient is needed, a generated Python function (``.code``) that calls the
  backend on raw arrays, one line per node: none of the per-operation bookkeeping of
  eager mode (tensor objects, contexts, graph recording) is left;
* when inputs or parameters require grad, the interpreter over the optimised graph,
  so autograd records every node, fused kernels included, and gradients are eager's.
"""
from __future__ import annotations

import builtins  # this module defines compile(): Python's own is builtins.compile
import math
import re
import sys
from typing import Any, Callable, Sequence

from ..autograd import function, grad_mode
from ..backends import get_backend
from ..cuda_devices import is_elsewhere, using
from ..device import as_device
from ..ops import elementwise as ew, linalg
from ..tensor import Tensor
from . import guards as guards_module, interpreter, pass_parts, passes as passes_module
from .codegen import fused_kernels
from .guards import Guard
from .ir import Graph, Ref
from .ops import Compare
from .traced import TracedFunction, trace_graph
from .tracer import as_inputs

UNARY = {ew.Neg: "neg", ew.Exp: "exp", ew.Log: "log", ew.Sqrt: "sqrt", ew.Abs: "abs",
         ew.Sin: "sin", ew.Cos: "cos", ew.Tanh: "tanh", ew.Sigmoid: "sigmoid", ew.Relu: "relu",
         ew.Sign: "sign"}
BINARY = {ew.Add: "add", ew.Sub: "sub", ew.Mul: "mul", ew.Div: "div", ew.Pow: "pow",
          ew.Maximum: "maximum", ew.Minimum: "minimum"}
_NUMBER_LITERALS = (int, float, bool, type(None))  # exact types: a subclass may repr as anything
DEVICE_NAMES = ("cpu", "cuda")
_GLOBAL = re.compile(r"g[0-9]+")
_CLASS = re.compile(r"[A-Z][A-Za-z0-9]*")


class _PlanWriter:
    """Writes the no-grad program of a graph: one line of Python per node.

    Every name in the source is made here: ``v0, v1, ...`` for the nodes' values,
    ``g0, g1, ...`` for the objects the program uses (strings included), and the
    class name of teachgrad's own Functions (``Softmax``) for readability. Nothing
    from the graph (node names, constant names, attributes, which may come from a
    loaded file) is ever written into the source: values reach it as data, through
    the namespace the source runs in.
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.globals: dict[str, Any] = {"Tensor": Tensor}
        self.variables: dict[str, str] = {}  # node name -> v0, v1, ...
        self.lines: list[str] = []

    def variable(self, node_name: str) -> str:
        return self.variables.setdefault(node_name, f"v{len(self.variables)}")

    def backend(self, device: str) -> str:
        """The name of the backend for ``device`` (``cpu``, ``cuda``; any other: ``gN``)."""
        name = next((d for d in DEVICE_NAMES if d == device), None)
        backend = get_backend(device)
        if name is None:
            name = self.name_for(backend)
        self.globals[name] = backend
        self.globals[f"{name}_device"] = as_device(device)  # (the device it compiles for)
        return name

    def name_for(self, obj: Any) -> str:
        """A global name for an object the source does not spell as a literal."""
        for k, v in self.globals.items():
            if v is obj:
                return k
        name = _engine_class_name(obj)
        if name is None or name in self.globals:
            name = f"g{sum(1 for k in self.globals if _GLOBAL.fullmatch(k))}"
        self.globals[name] = obj
        return name

    def expr(self, value: Any, wrap_device: str | None = None) -> str:
        """``value`` as source: refs by variable (wrapped in a tensor for fallback ops)."""
        if isinstance(value, Ref):
            text = self.variable(value.node) + ("" if value.index is None else f"[{value.index}]")
            if wrap_device is None:
                return text
            return f"Tensor._make({text}, {wrap_device}, {wrap_device}_device)"
        if isinstance(value, tuple):
            inner = ", ".join(self.expr(v, wrap_device) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, list):
            return "[" + ", ".join(self.expr(v, wrap_device) for v in value) + "]"
        if type(value) in _NUMBER_LITERALS and not (isinstance(value, float) and not math.isfinite(value)):
            return repr(value)  # a number's repr is made by Python from the value
        return self.name_for(value)

    def line(self, node: Any) -> str:
        dev = self.backend(node.meta[0].device)
        t, a = node.target, node.args
        e = self.expr
        if t in UNARY:
            return f"{dev}.unary({UNARY[t]!r}, {e(a[0])})"
        if t in BINARY:
            return f"{dev}.binary({BINARY[t]!r}, {e(a[0])}, {e(a[1])})"
        if t is Compare:
            return f"{dev}.binary({e(a[0])}, {e(a[1])}, {e(a[2])})"
        if t is linalg.MatMul:
            return f"{dev}.matmul({e(a[0])}, {e(a[1])})"
        if t is linalg.Linear:
            product = f"{dev}.matmul({self.rows(a[0], dev)}, {dev}.permute({e(a[1])}, (1, 0)))"
            if len(node.meta[0].shape) != 2:  # the rows back into the leading dimensions
                shape = tuple(int(size) for size in node.meta[0].shape)  # (numbers only)
                product = f"{dev}.reshape({product}, {shape!r})"
            bias = a[2] if len(a) > 2 else None
            return product if bias is None else f"{dev}.binary('add', {product}, {e(bias)})"
        if getattr(t, "generated", False):
            return f"{self.name_for(t)}.launch_arrays({dev}, [{', '.join(e(x) for x in a)}])"
        # any other Function: run it on tensor handles, take the arrays back out
        fn = self.name_for(t)
        args = [e(x, dev) for x in a]
        if node.kwargs:
            args.append(f"**{self.name_for(_Keywords(node.kwargs))}.values({', '.join(e(v, dev) for v in node.kwargs.values())})")
        unwrap = "tuple(o._array for o in {})" if node.multi else "{}._array"
        return unwrap.format(f"{fn}._apply({', '.join(args)})")

    def rows(self, x: Ref, dev: str) -> str:
        """A Linear's input with its leading dimensions folded into rows, as eager's Linear
        does: one large matrix product (numpy runs a stacked (B, T, C) @ (C, D) as B small
        ones, a third slower), and the same bits as eager."""
        shape = self.graph.node(x.node).meta[x.index or 0].shape
        if len(shape) == 2:
            return self.expr(x)
        return f"{dev}.reshape({self.expr(x)}, (-1, {int(shape[-1])}))"

    def write(self) -> tuple[str, Callable]:
        # the inputs, then the constants (the order CompiledGraph passes them in)
        params = [self.variable(n.name) for op in ("placeholder", "get_attr")
                  for n in self.graph.nodes if n.op == op]
        for n in self.graph.nodes:
            if n.op == "call_function":
                generated = getattr(n.target, "generated", False)
                what = "a fused kernel" if generated else _engine_class_name(n.target) or "an operation"
                self.lines.append(f"    {self.variable(n.name)} = {self.line(n)}  # {what}")
            elif n.op == "output":
                result = self.expr(n.args[0])
                if self.graph.writes:  # the new values of the tensors the function wrote
                    result += ", " + self.expr(tuple(ref for _, ref in self.graph.writes))
                self.lines.append(f"    return {result}")
        n_inputs = len(self.graph.placeholders)
        inputs = "v0: the input" if n_inputs == 1 else f"v0..v{n_inputs - 1}: the inputs"
        source = "\n".join([f"def compiled_forward({', '.join(params)}):",
                            '    """The whole graph on backend arrays (used when no gradient is needed).',
                            "",
                            f"    {inputs}; then the constants, in the order of the",
                            '    get_attr nodes of .graph (where their names are)."""',
                            *self.lines]) + "\n"
        namespace = dict(self.globals)
        exec(builtins.compile(source, "<teachgrad-compiled-forward>", "exec"), namespace)
        return source, namespace["compiled_forward"]


class _Keywords:
    """A call's keyword names, kept as data: ``.values(a, b)`` is ``{name_a: a, name_b: b}``."""

    def __init__(self, kwargs: dict) -> None:
        self.names = tuple(kwargs)

    def values(self, *values: Any) -> dict:
        return dict(zip(self.names, values))


def _engine_class_name(obj: Any) -> str | None:
    """The class name of one of teachgrad's own Functions (``Softmax``), which the source may
    use for readability: a name from teachgrad's code, never from a graph or a user."""
    if not isinstance(obj, type) or getattr(obj, "generated", False):
        return None
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    name = getattr(obj, "__name__", "")
    if module is None or not module.__name__.startswith("teachgrad.") or not _CLASS.fullmatch(name):
        return None
    return name if getattr(module, name, None) is obj else None


class CompiledGraph:
    """One compiled program: the graph before and after the passes, the fused kernels,
    the generated no-grad function, and the guards it was compiled under."""

    def __init__(self, traced: Graph, passes: Sequence[Callable], guards: Sequence[Guard] = ()) -> None:
        self.traced = traced
        self.guards = guards_module.GuardSet(list(guards))
        self.key: tuple | None = None  # the input signature it was compiled for
        self.graph, self.reports = passes_module.optimise(traced, passes)
        self.code, self._forward = _PlanWriter(self.graph).write()
        self.constants = [self.graph.constants[n.target] for n in self.graph.nodes if n.op == "get_attr"]
        out = self.graph.output.args[0]
        metas = [self.graph.node(r.node).meta[r.index or 0] for r in
                 (out if isinstance(out, tuple) else (out,))]
        # what each output array needs to become a tensor, looked up once
        # ('cuda' is the current device: CompiledFunction runs on its inputs' device)
        self.out_places = [(get_backend(m.device), as_device(m.device)) for m in metas]
        self.tuple_output = isinstance(out, tuple)
        self.owned = interpreter.owned_outputs(self.graph)

    @property
    def kernels(self) -> list[type]:
        return fused_kernels(self.graph)

    def __call__(self, inputs: Sequence[Tensor]) -> Any:
        needs_grad = grad_mode._enabled and (any(t.requires_grad for t in inputs)
                                             or any(c.requires_grad for c in self.constants))
        if needs_grad:
            return interpreter.run(self.graph, inputs, self.owned)
        arrays = self._forward(*[t._array for t in inputs], *[c._array for c in self.constants])
        if self.graph.writes:
            arrays, new_values = arrays
            interpreter.write_back(self.graph, new_values)
        if not self.tuple_output:
            backend, device = self.out_places[0]
            result: Any = Tensor._make(arrays, backend, device)
        else:
            result = tuple(Tensor._make(a, b, d) for a, (b, d) in zip(arrays, self.out_places))
        return interpreter.fresh(result, self.owned)

    def explain(self) -> str:
        """What each pass did, as node counts."""
        return "\n".join(str(r) for r in self.reports)


class CompiledFunction:
    """What ``tg.compile`` returns: call it like the original function.

    It keeps compiled graphs by the signature of their inputs (shapes, dtypes, devices,
    requires_grad, and grad mode), each with the guards of its trace
    (:mod:`teachgrad.jit.guards`). A call reuses a graph whose guards all hold; when
    none does, it traces and compiles again and remembers why (``explain()``,
    ``cache_info()``), keeping at most ``cache_limit`` graphs per signature.
    """

    cache_limit = 8

    def __init__(self, fn: Any, passes: Sequence[Callable]) -> None:
        self.fn = fn
        self.passes = tuple(passes)
        self.cache: dict[tuple, list[CompiledGraph]] = {}
        self.compiles = 0  # every trace and compile, the first included
        self.recompiles: list[str] = []  # why each later compile happened
        self.hits = 0
        self.last: CompiledGraph | None = None

    def __call__(self, *inputs: Tensor) -> Any:
        inputs = as_inputs(inputs)
        if function.cast_policy is not None:
            # autocast casts each operation as it is dispatched: a compiled graph would skip
            # that, so inside an autocast region the function runs eagerly, as written
            return self.fn(*inputs)
        for t in inputs:
            if is_elsewhere(t):  # inputs on another cuda device: compile and run there
                with using(t.device.index):
                    return self(*inputs)
        key = guards_module.signature(inputs)
        entries = self.cache.setdefault(key, [])
        for entry in entries:
            if entry.guards.holds():
                self.hits += 1
                break
        else:
            entry = self._compile(inputs, key, entries)
        self.last = entry
        return entry(inputs)

    def _compile(self, inputs: tuple[Tensor, ...], key: tuple, entries: list) -> CompiledGraph:
        """Trace and compile for this call; note why, when something was compiled before."""
        why = None
        if entries:
            failed = guards_module.first_failure(entries[-1].guards.guards)
            why = f"guard failed: {failed.why()}" if failed else "guard failed"
        elif self.compiles:
            why = "new input signature: " + "; ".join(
                guards_module.describe_signature(key, [f"input{i}" for i in range(len(inputs))]))
        plugged = pass_parts.plugged_guard()  # (the passes a learner plugged in, if any)
        entry = CompiledGraph(trace_graph(self.fn, inputs, side_effects=False), self.passes)
        entry.guards = guards_module.GuardSet(
            [plugged, *guards_module.collect(self.fn, entry.traced, entry.graph.baked)])
        entry.key = key
        entries.append(entry)  # (only now: a trace or a pass that raised changes nothing)
        del entries[:-self.cache_limit]  # the oldest go first
        self.compiles += 1
        if why is not None:
            self.recompiles.append(why)
        return entry

    def _latest(self) -> CompiledGraph:
        if self.last is None:
            raise RuntimeError("nothing is compiled yet: a compiled function compiles on its "
                               "first call. Fix: call it once with example inputs first.")
        return self.last

    @property
    def graph(self) -> Graph:
        return self._latest().graph

    @property
    def code(self) -> str:
        return self._latest().code

    @property
    def kernels(self) -> list[type]:
        return self._latest().kernels

    @property
    def guards(self) -> list[Guard]:
        """The guards of the graph the last call ran (the input signature aside)."""
        return self._latest().guards.guards

    def cache_info(self) -> dict[str, int]:
        """How many graphs were compiled, how many of those were recompiles (a guard failed
        or a new signature came), how many calls reused one, how many are kept."""
        return {"compiles": self.compiles, "recompiles": len(self.recompiles), "hits": self.hits,
                "size": sum(len(v) for v in self.cache.values())}

    def explain(self) -> str:
        """What each pass did to the last graph, what that graph is guarded on, and why
        every recompile happened."""
        latest = self._latest()
        names = [p.name for p in latest.traced.placeholders]
        lines = [latest.explain(), "", "guards (checked before each call):"]
        lines += ["  " + line for line in guards_module.describe_signature(latest.key, names)]
        lines += [f"  {g.description} == {g.shown()}" for g in latest.guards]
        info = self.cache_info()
        lines += ["", f"compiled {info['compiles']} time(s), {info['hits']} call(s) reused a graph, "
                      f"{info['recompiles']} recompile(s):"]
        lines += [f"  {i + 1}. {why}" for i, why in enumerate(self.recompiles)] or ["  (none)"]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<CompiledFunction of {getattr(self.fn, '__name__', type(self.fn).__name__)}: " \
               f"{self.compiles} graph(s) compiled>"


def compile(fn: Any, passes: Sequence[Callable] | None = None) -> CompiledFunction:  # noqa: A001
    """Compile ``fn`` (a function of tensors, an nn.Module, or a TracedFunction).

    Nothing happens until the first call: each new input signature (shapes, dtypes,
    devices) traces ``fn`` on those inputs, runs ``passes`` (default: dead code,
    common subexpressions, constant folding, elementwise fusion), and generates code.
    """
    if not callable(fn):
        raise TypeError(f"tg.compile needs a function, an nn.Module or a traced function, "
                        f"not {type(fn).__name__}")
    chosen = passes_module.DEFAULT_PASSES if passes is None else tuple(passes)
    for p in chosen:
        if not callable(p):
            raise TypeError(f"each pass must be a function from Graph to Graph, not "
                            f"{type(p).__name__}. Fix: pick from tg.jit.passes, e.g. "
                            "passes=[tg.jit.passes.fuse_elementwise].")
    return CompiledFunction(fn, chosen)


__all__ = ["CompiledFunction", "CompiledGraph", "TracedFunction", "compile"]

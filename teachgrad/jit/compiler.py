"""``tg.compile``: trace, optimise, generate code, and cache it per input signature.

A compiled function keeps one compiled graph per *signature* of its inputs (their
shapes, dtypes and devices): a new signature traces and compiles again, a seen one
reuses what was built. Each compiled graph has two ways to run:

* when no gradient is needed, a generated Python function (``.code``) that calls the
  backend on raw arrays, one line per node: none of the per-operation bookkeeping of
  eager mode (tensor objects, contexts, graph recording) is left;
* when inputs or parameters require grad, the interpreter over the optimised graph,
  so autograd records every node, fused kernels included, and gradients are eager's.
"""
from __future__ import annotations

import builtins  # this module defines compile(): Python's own is builtins.compile
import math
from typing import Any, Callable, Sequence

from ..autograd import grad_mode
from ..backends import get_backend
from ..device import Device
from ..ops import elementwise as ew, linalg
from ..tensor import Tensor
from . import interpreter, passes as passes_module
from .codegen import fused_kernels
from .ir import Graph, Ref, identifier
from .ops import Compare
from .traced import TracedFunction, trace_graph
from .tracer import as_inputs

UNARY = {ew.Neg: "neg", ew.Exp: "exp", ew.Log: "log", ew.Sqrt: "sqrt", ew.Abs: "abs",
         ew.Sin: "sin", ew.Cos: "cos", ew.Tanh: "tanh", ew.Sigmoid: "sigmoid", ew.Relu: "relu",
         ew.Sign: "sign"}
BINARY = {ew.Add: "add", ew.Sub: "sub", ew.Mul: "mul", ew.Div: "div", ew.Pow: "pow",
          ew.Maximum: "maximum", ew.Minimum: "minimum"}
_SAFE_LITERALS = (int, float, str, bool, type(None))


class _PlanWriter:
    """Writes the no-grad program of a graph: one line of Python per node."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.globals: dict[str, Any] = {"Tensor": Tensor, "no_grad": grad_mode.no_grad}
        self.lines: list[str] = []

    def backend(self, device: str) -> str:
        self.globals[device] = get_backend(device)
        self.globals[f"{device}_device"] = Device(device)
        return device

    def name_for(self, obj: Any, hint: str) -> str:
        """A global name for an object the source cannot spell as a literal."""
        for k, v in self.globals.items():
            if v is obj:
                return k
        name = identifier(hint)
        taken = {identifier(n.name) for n in self.graph.nodes}
        while name in self.globals or name in taken:
            name += "_"
        self.globals[name] = obj
        return name

    def expr(self, value: Any, wrap_device: str | None = None) -> str:
        """``value`` as source: refs by variable (wrapped in a tensor for fallback ops)."""
        if isinstance(value, Ref):
            text = identifier(value.node) + ("" if value.index is None else f"[{value.index}]")
            if wrap_device is None:
                return text
            return f"Tensor._make({text}, {wrap_device}, {wrap_device}_device)"
        if isinstance(value, tuple):
            inner = ", ".join(self.expr(v, wrap_device) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, list):
            return "[" + ", ".join(self.expr(v, wrap_device) for v in value) + "]"
        if isinstance(value, _SAFE_LITERALS) and not (isinstance(value, float) and not math.isfinite(value)):
            return repr(value)
        return self.name_for(value, f"arg_{type(value).__name__}")

    def line(self, node: Any) -> str:
        dev = self.backend(node.meta[0].device)
        t, a = node.target, node.args
        e = self.expr
        if t in UNARY:
            return f"{dev}.unary({UNARY[t]!r}, {e(a[0])})"
        if t in BINARY:
            return f"{dev}.binary({BINARY[t]!r}, {e(a[0])}, {e(a[1])})"
        if t is Compare:
            return f"{dev}.binary({a[0]!r}, {e(a[1])}, {e(a[2])})"
        if t is linalg.MatMul:
            return f"{dev}.matmul({e(a[0])}, {e(a[1])})"
        if t is linalg.Linear:
            product = f"{dev}.matmul({e(a[0])}, {dev}.permute({e(a[1])}, (1, 0)))"
            bias = a[2] if len(a) > 2 else None
            return product if bias is None else f"{dev}.binary('add', {product}, {e(bias)})"
        if getattr(t, "generated", False):
            kernel = self.name_for(t, t.__name__ + "_kernel")
            return f"{kernel}.launch_arrays({dev}, [{', '.join(e(x) for x in a)}])"
        # any other Function: run it on tensor handles, take the arrays back out
        fn = self.name_for(t, t.__name__)
        args = ", ".join([e(x, dev) for x in a] + [f"{k}={e(v, dev)}" for k, v in node.kwargs.items()])
        unwrap = "tuple(o._array for o in {})" if node.multi else "{}._array"
        return unwrap.format(f"{fn}._apply({args})")

    def write(self) -> tuple[str, Callable]:
        params = []
        for n in self.graph.nodes:
            if n.op in ("placeholder", "get_attr"):
                params.append(identifier(n.name))
            elif n.op == "call_function":
                self.lines.append(f"    {identifier(n.name)} = {self.line(n)}")
            else:
                self.lines.append(f"    return {self.expr(n.args[0])}")
        source = "\n".join([f"def compiled_forward({', '.join(params)}):",
                            '    """The whole graph on backend arrays (used when no gradient is needed)."""',
                            *self.lines]) + "\n"
        namespace = dict(self.globals)
        exec(builtins.compile(source, "<teachgrad-compiled-forward>", "exec"), namespace)
        return source, namespace["compiled_forward"]


class CompiledGraph:
    """One signature's compiled program: the graph before and after the passes, the
    fused kernels, and the generated no-grad function."""

    def __init__(self, traced: Graph, passes: Sequence[Callable]) -> None:
        self.traced = traced
        self.graph, self.reports = passes_module.optimise(traced, passes)
        self.code, self._forward = _PlanWriter(self.graph).write()
        holders = [n for n in self.graph.nodes if n.op == "get_attr"]
        self.constants = [self.graph.constants[n.target] for n in holders]
        out = self.graph.output.args[0]
        metas = [self.graph.node(r.node).meta[r.index or 0] for r in
                 (out if isinstance(out, tuple) else (out,))]
        # what each output array needs to become a tensor, looked up once
        self.out_places = [(get_backend(m.device), Device(m.device)) for m in metas]

    @property
    def kernels(self) -> list[type]:
        return fused_kernels(self.graph)

    def __call__(self, inputs: Sequence[Tensor]) -> Any:
        needs_grad = grad_mode._enabled and (any(t.requires_grad for t in inputs)
                                             or any(c.requires_grad for c in self.constants))
        if needs_grad:
            return interpreter.run(self.graph, inputs)
        arrays = self._forward(*[t._array for t in inputs], *[c._array for c in self.constants])
        if not isinstance(arrays, tuple):
            backend, device = self.out_places[0]
            return Tensor._make(arrays, backend, device)
        return tuple(Tensor._make(a, b, d) for a, (b, d) in zip(arrays, self.out_places))

    def explain(self) -> str:
        """What each pass did, as node counts."""
        return "\n".join(str(r) for r in self.reports)


def _signature(inputs: Sequence[Tensor]) -> tuple:
    """What a compiled graph is specialised for: each input's shape, dtype and device."""
    return tuple([(t._array.shape, t.dtype.name, t.device.type) for t in inputs])


class CompiledFunction:
    """What ``tg.compile`` returns: call it like the original function."""

    def __init__(self, fn: Any, passes: Sequence[Callable]) -> None:
        self.fn = fn
        self.passes = tuple(passes)
        self.cache: dict[tuple, CompiledGraph] = {}
        self.compiles = 0
        self.last: CompiledGraph | None = None

    def __call__(self, *inputs: Tensor) -> Any:
        inputs = as_inputs(inputs)
        key = _signature(inputs)
        entry = self.cache.get(key)
        if entry is None:  # a new shape, dtype or device: trace and compile again
            entry = CompiledGraph(trace_graph(self.fn, inputs), self.passes)
            self.cache[key] = entry
            self.compiles += 1
        self.last = entry
        return entry(inputs)

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

    def explain(self) -> str:
        return self._latest().explain()

    def __repr__(self) -> str:
        return f"<CompiledFunction of {getattr(self.fn, '__name__', type(self.fn).__name__)}: " \
               f"{self.compiles} signature(s) compiled>"


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

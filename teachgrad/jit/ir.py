"""The graph IR: a list of nodes in the order they ran, like ``torch.fx``'s Graph.

Every node has an *opcode* that says what kind of step it is:

* ``placeholder``    an input of the function (``x``);
* ``get_attr``       a tensor the function read but did not compute: a parameter
                     (``fc1.weight``) or a constant, kept in ``graph.constants``;
* ``call_function``  one operation: ``target`` is the Function class that ran
                     (``Mul``, ``Linear``, or a fused kernel after ``tg.compile``);
                     ``args``/``kwargs`` hold :class:`Ref` s to earlier nodes and
                     the operation's non-tensor attributes (``dim=1``, ``2.0``);
* ``output``         what the function returns; its ``writes`` keyword lists the
                     tensors from outside the function that the function changed in
                     place (a BatchNorm's running statistics), as ``(target, Ref)``
                     pairs: each call writes those values back, as the eager code did.

A graph is plain data: it runs without the Python code that built it
(:mod:`teachgrad.jit.interpreter`), prints as a table (:meth:`Graph.tabular`),
and converts to :class:`teachgrad.graph.Graph` so the graph view draws it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from ..graph import Graph as Snapshot
from ..graph import GraphEdge, GraphNode

OPCODES = ("placeholder", "get_attr", "call_function", "output")


@dataclass(frozen=True)
class Ref:
    """A reference to the value of an earlier node (``index``: which output of a tuple)."""

    node: str
    index: int | None = None

    def __repr__(self) -> str:
        return self.node if self.index is None else f"{self.node}[{self.index}]"


@dataclass(frozen=True)
class TensorMeta:
    """What a value looked like when it was traced."""

    shape: tuple[int, ...]
    dtype: str  # "float32", ...
    device: str  # "cpu", "cuda"


@dataclass
class Node:
    name: str
    op: str  # one of OPCODES
    target: Any  # Function class; input or constant name; None for output
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    meta: tuple[TensorMeta, ...] = ()  # one per output
    multi: bool = False  # True when the operation returned a tuple (then refs carry an index)

    @property
    def target_name(self) -> str:
        if self.op == "call_function":
            return getattr(self.target, "__name__", str(self.target))
        return "" if self.target is None else str(self.target)


def map_refs(value: Any, fn: Callable[[Ref], Any]) -> Any:
    """``value`` with every :class:`Ref` inside it (tuples, lists, dicts) replaced by ``fn(ref)``."""
    if isinstance(value, Ref):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(map_refs(v, fn) for v in value)
    if isinstance(value, list):
        return [map_refs(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_refs(v, fn) for k, v in value.items()}
    return value


def refs_in(value: Any) -> list[Ref]:
    """Every :class:`Ref` inside ``value``, in order."""
    found: list[Ref] = []
    map_refs(value, lambda r: found.append(r) or r)
    return found


def identifier(name: str) -> str:
    """``name`` as a Python identifier (``0.weight`` -> ``_0_weight``), for node names."""
    name = re.sub(r"\W", "_", name)
    return "_" + name if not name or name[0].isdigit() else name


@dataclass
class Graph:
    """The traced program: nodes in execution order, plus the constants they read."""

    nodes: list[Node] = field(default_factory=list)
    constants: dict[str, Any] = field(default_factory=dict)  # get_attr target -> Tensor
    # constants that are live tensors from outside the function (parameters, buffers,
    # captured tensors): read at call time, never copied. The others belong to the graph.
    captured: set[str] = field(default_factory=set)
    # captured constants whose value the graph depends on as it was when compiled (a pass
    # folded it, or the trace read it into Python): a compiled function guards their version
    baked: set[str] = field(default_factory=set)

    # -- building -------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        """A node name not used yet: ``mul``, then ``mul_1``, ``mul_2``, ..."""
        taken = {n.name for n in self.nodes}
        base = identifier(base)
        if base not in taken:
            return base
        i = 1
        while f"{base}_{i}" in taken:
            i += 1
        return f"{base}_{i}"

    def add(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    # -- reading ----------------------------------------------------------------
    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node called {name!r} in this graph")

    @property
    def placeholders(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "placeholder"]

    @property
    def output(self) -> Node:
        return next(n for n in self.nodes if n.op == "output")

    def operations(self) -> Iterator[Node]:
        return (n for n in self.nodes if n.op == "call_function")

    def users(self) -> dict[str, list[str]]:
        """For each node name, the names of the nodes that read its value."""
        users: dict[str, list[str]] = {n.name: [] for n in self.nodes}
        for n in self.nodes:
            for r in refs_in((n.args, n.kwargs)):
                users[r.node].append(n.name)
        return users

    def counts(self) -> dict[str, int]:
        """How many nodes of each opcode (what each compiler pass changes)."""
        out = {op: 0 for op in OPCODES}
        for n in self.nodes:
            out[n.op] += 1
        return out

    def copy(self) -> "Graph":
        """A new graph with copies of the nodes (constants are shared, not copied)."""
        nodes = [Node(n.name, n.op, n.target, n.args, dict(n.kwargs), n.meta, n.multi)
                 for n in self.nodes]
        return Graph(nodes, dict(self.constants), set(self.captured), set(self.baked))

    def constant_name(self, base: str) -> str:
        """A constant name not used yet (``constant0``; ``constant0_1`` if a parameter is
        called that): one name never means two tensors."""
        name, i = base, 1
        while name in self.constants:
            name, i = f"{base}_{i}", i + 1
        return name

    @property
    def writes(self) -> tuple[tuple[str, Ref], ...]:
        """The in-place writes to outside tensors, as ``(constant target, new value)`` pairs."""
        return tuple(self.output.kwargs.get("writes", ()))

    # -- printing ---------------------------------------------------------------
    def tabular(self) -> str:
        """The graph as a table, one node per row (like ``torch.fx``'s ``print_tabular``)."""
        rows = [("opcode", "name", "target", "args", "kwargs", "shape")]
        for n in self.nodes:
            shape = " ".join(_shape(m) for m in n.meta)
            kwargs = "{" + ", ".join(f"{k}={_short(v)}" for k, v in n.kwargs.items()) + "}"
            rows.append((n.op, n.name, n.target_name, _short(n.args), kwargs, shape))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def print_tabular(self) -> None:
        print(self.tabular())

    def __str__(self) -> str:
        return self.tabular()

    # -- drawing ----------------------------------------------------------------
    def to_snapshot(self) -> Snapshot:
        """This graph as a :class:`teachgrad.graph.Graph`, the plain data GraphView draws:
        inputs and parameters are leaves, operations are op nodes, the result is the output."""
        snap = Snapshot()
        kinds = {"placeholder": "leaf", "get_attr": "leaf", "call_function": "op"}
        for seq, n in enumerate(self.nodes):
            if n.op == "output":
                for i, r in enumerate(refs_in(n.args)):
                    meta = self.node(r.node).meta[r.index or 0]
                    out_id = f"output{i}"
                    snap.nodes.append(GraphNode(out_id, "output", "output" if i == 0 else f"output{i}",
                                                meta.shape, meta.dtype))
                    snap.edges.append(GraphEdge(r.node, out_id, 0))
                continue
            meta = n.meta[0] if n.meta else TensorMeta((), "", "")
            label = n.target_name if n.op == "call_function" else n.name
            value = None
            if n.op == "get_attr" and int(np.prod(meta.shape, dtype=np.int64)) <= 16:
                value = self.constants[n.target].detach().cpu().numpy().tolist()
            snap.nodes.append(GraphNode(n.name, kinds[n.op], label, meta.shape, meta.dtype,
                                        value=value, rule=getattr(n.target, "rule", "") or "",
                                        sequence=seq if n.op == "call_function" else None))
            for pos, r in enumerate(refs_in((n.args, n.kwargs))):
                snap.edges.append(GraphEdge(r.node, n.name, pos))
        return snap


def _shape(m: TensorMeta) -> str:
    return "[" + ", ".join(str(s) for s in m.shape) + "]"


def _short(value: Any) -> str:
    """An argument as the table shows it: refs by name, floats short."""
    if isinstance(value, tuple):
        inner = ", ".join(_short(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return repr(value) if not isinstance(value, Ref) else str(value)

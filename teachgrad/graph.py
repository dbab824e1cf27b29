"""A plain-data snapshot of the autograd graph behind a tensor, and its DOT text.

Viewers (the graph widget, a notebook, a test) read this instead of walking
``grad_fn`` themselves, so everyone sees the same graph::

    g = tg.graph.snapshot(loss, names={"x": x, "w": w})
    g.nodes, g.edges        # plain dataclasses
    print(g.to_dot())       # Graphviz DOT text, left to right

Node kinds: ``"op"`` for a recorded operation (its ``grad_fn``), ``"leaf"`` for a
tensor that requires grad (an input or parameter), ``"output"`` for the tensor
the snapshot was taken of. Edges go from producer to consumer in argument
order; an input used twice (``x * x``) gives two edges.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from .autograd.function import AccumulateGrad, Node
from .tensor import Tensor

SMALL = 16  # tensors with at most this many elements show their values


@dataclass
class GraphNode:
    id: str
    kind: str  # "op", "leaf" or "output"
    label: str  # op name ("Mul") or tensor name ("w")
    shape: tuple = ()
    dtype: str = ""
    value: list | float | None = None  # small values only
    grad: list | float | None = None  # a leaf's .grad (small) once backward has run
    rule: str = ""  # an op's derivative rule
    sequence: int | None = None  # creation order of an op


@dataclass
class GraphEdge:
    source: str
    target: str
    position: int  # argument position at the target (0 = first input)


@dataclass
class Graph:
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    truncated: bool = False  # True when the node budget cut the walk short

    def node(self, node_id: str) -> GraphNode:
        return next(n for n in self.nodes if n.id == node_id)

    def to_dot(self, rankdir: str = "LR", highlight: Iterable[str] = ()) -> str:
        return to_dot(self, rankdir=rankdir, highlight=highlight)


def node_id(obj: Any) -> str:
    """The id of the graph node for ``obj``: a ``grad_fn`` node, or a leaf tensor.

    Stable for the lifetime of the object, so a viewer can map a
    :class:`~teachgrad.autograd.BackwardStep` to the node it should highlight:
    ``node_id(step.node)`` for an operation, ``node_id(step.leaf)`` for a leaf.
    """
    return f"n{id(obj):x}"


def _small(array: Any, backend: Any) -> list | float | None:
    if array is None:
        return None
    a = np.asarray(backend.to_numpy(array)) if not isinstance(array, np.ndarray) else array
    if a.size > SMALL:
        return None
    return a.tolist()


def _tensor_node(t: Tensor, kind: str, label: str) -> GraphNode:
    return GraphNode(
        id=node_id(t) if kind == "leaf" else "out_" + node_id(t), kind=kind, label=label,
        shape=tuple(t.shape), dtype=t.dtype.name,
        value=_small(t._array, t._backend) if t.numel() <= SMALL else None,
        grad=(_small(t.grad._array, t.grad._backend)
              if t.grad is not None and t.grad.numel() <= SMALL else None),
    )


def snapshot(root: Tensor, names: dict[str, Tensor] | None = None, max_nodes: int = 200) -> Graph:
    """Walk the graph behind ``root`` (breadth first) into a :class:`Graph`."""
    by_id = {id(t): n for n, t in (names or {}).items() if isinstance(t, Tensor)}
    graph = Graph()
    seen: dict[int, str] = {}

    def leaf_id(acc: AccumulateGrad) -> str:
        t = acc.variable
        if id(acc) not in seen:
            node = _tensor_node(t, "leaf", by_id.get(id(t), _shape_label(t)))
            seen[id(acc)] = node.id
            graph.nodes.append(node)
        return seen[id(acc)]

    if root.grad_fn is None:
        # nothing recorded: a bare leaf (with the id its backward step will name) or a constant
        kind, label = ("leaf", _shape_label(root)) if root.requires_grad else ("output", "output")
        graph.nodes.append(_tensor_node(root, kind, by_id.get(id(root), label)))
        return graph
    out = _tensor_node(root, "output", by_id.get(id(root), "output"))
    graph.nodes.append(out)

    queue: list[Node] = [root.grad_fn]
    seen[id(root.grad_fn)] = node_id(root.grad_fn)
    graph.edges.append(GraphEdge(node_id(root.grad_fn), out.id, 0))
    while queue:
        fn = queue.pop(0)
        if len(graph.nodes) >= max_nodes:
            graph.truncated = True
            break
        graph.nodes.append(_op_node(fn))
        for pos, (nxt, _) in enumerate(fn.next_functions):
            if nxt is None:
                continue
            if isinstance(nxt, AccumulateGrad):
                src = leaf_id(nxt)
            else:
                if id(nxt) not in seen:
                    seen[id(nxt)] = node_id(nxt)
                    queue.append(nxt)
                src = seen[id(nxt)]
            graph.edges.append(GraphEdge(src, node_id(fn), pos))
    if graph.truncated:
        kept = {n.id for n in graph.nodes}
        graph.edges = [e for e in graph.edges if e.source in kept and e.target in kept]
    return graph


def _shape_label(t: Tensor) -> str:
    return "×".join(str(n) for n in t.shape) if t.ndim else "scalar"


def _op_node(fn: Node) -> GraphNode:
    shape, dtype, _ = fn.output_meta[0]
    backend = fn.ctx.backend
    value = fn.output_values[0] if fn.output_values else None
    return GraphNode(
        id=node_id(fn), kind="op", label=fn.function.__name__, shape=tuple(shape),
        dtype=dtype.name, value=_small(value, backend) if backend is not None else None,
        rule=fn.rule, sequence=fn.sequence,
    )


def _fmt(v: Any) -> str:
    a = np.asarray(v, dtype=float)
    if a.ndim == 0:
        return f"{float(a):.4g}"
    return np.array2string(a, precision=3, separator=", ", suppress_small=True).replace("\n", "")


def to_dot(graph: Graph, rankdir: str = "LR", highlight: Iterable[str] = ()) -> str:
    """Graphviz DOT text: tensors as boxes, operations as ellipses."""
    highlight = set(highlight)
    lines = [
        "digraph autograd {",
        f'  graph [rankdir={rankdir}, fontname="Helvetica", nodesep=0.3, ranksep=0.4];',
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=9, color="#555555"];',
    ]
    for n in graph.nodes:
        rows = [f"<b>{html.escape(n.label)}</b>"]
        if n.kind != "op" or n.value is not None:
            if n.value is not None:
                rows.append(f"data {html.escape(_fmt(n.value))}")
            elif n.shape:
                rows.append(html.escape("×".join(map(str, n.shape))))
        if n.grad is not None:
            rows.append(f"grad {html.escape(_fmt(n.grad))}")
        label = "<" + "<br/>".join(rows) + ">"
        if n.kind == "op":
            style = 'shape=ellipse, style=filled, fillcolor="#dbe9f6", color="#4a7ab0"'
        elif n.kind == "leaf":
            style = 'shape=box, style="rounded,filled", fillcolor="#e8f5e1", color="#4f8a3c"'
        else:
            style = 'shape=box, style="rounded,filled", fillcolor="#fdf1d8", color="#b07d1a"'
        if n.id in highlight:
            style += ', penwidth=3, color="#d62728"'
        lines.append(f"  {n.id} [label={label}, {style}];")
    counts: dict[tuple[str, str], int] = {}
    for e in graph.edges:
        counts[(e.source, e.target)] = counts.get((e.source, e.target), 0) + 1
    for e in graph.edges:
        repeated = counts[(e.source, e.target)] > 1
        attrs = f' [label="{e.position}"]' if repeated else ""
        lines.append(f"  {e.source} -> {e.target}{attrs};")
    if graph.truncated:
        lines.append('  truncated [shape=note, label="graph cut at the node budget: '
                     'pass max_nodes= for more"];')
    lines.append("}")
    return "\n".join(lines)

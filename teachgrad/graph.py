"""A plain-data snapshot of the autograd graph behind a tensor, and its DOT text.

Viewers (the graph widget, a notebook, a test) read this instead of walking
``grad_fn`` themselves, so everyone sees the same graph::

    g = tg.graph.snapshot(loss, names={"x": x, "w": w})
    g.nodes, g.edges        # plain dataclasses
    print(g.to_dot())       # Graphviz DOT text, left to right

Node kinds: ``"op"`` for a recorded operation (its ``grad_fn``), ``"leaf"`` for a
tensor that requires grad (an input or parameter), ``"const"`` for an input that
needs no gradient (a number in the formula, or a small tensor of data: ``x * 3``
shows its 3), ``"output"`` for the tensor the snapshot was taken of, and
``"block"`` for a whole module drawn as one node (:func:`collapse_blocks`). Edges go from producer to consumer in argument
order; an input used twice (``x * x``) gives two edges.

Given ``group_by=model``, every node also says which child module of ``model``
made it (its *block*: ``"0"``, ``"encoder"``), read from the modules that were
running when the operation was recorded; :func:`collapse_blocks` then draws
each block as a single node, so a deep network fits on a screen.
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
    kind: str  # "op", "leaf", "const", "output" or "block"
    label: str  # op name ("Mul") or tensor name ("w")
    shape: tuple = ()
    dtype: str = ""
    value: list | float | None = None  # small values only
    grad: list | float | None = None  # a leaf's .grad (small) once backward has run
    rule: str = ""  # an op's derivative rule
    sequence: int | None = None  # creation order of an op
    block: str = ""  # with ``snapshot(group_by=module)``: the child module it belongs to


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
    blocks: dict[str, str] = field(default_factory=dict)  # block name -> label ("0: Linear")

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


def snapshot(root: Tensor, names: dict[str, Tensor] | None = None, max_nodes: int = 200,
             group_by: Any = None) -> Graph:
    """Walk the graph behind ``root`` (breadth first) into a :class:`Graph`.

    ``group_by``: a Module; each node then records which of its children made it.
    """
    by_id = {id(t): n for n, t in (names or {}).items() if isinstance(t, Tensor)}
    graph = Graph()
    if group_by is not None and not hasattr(group_by, "named_children"):
        raise TypeError(f"group_by must be an nn.Module, not {type(group_by).__name__}")
    ops = _walk(root, by_id, max_nodes, graph)
    if group_by is not None:
        _assign_blocks(graph, ops, group_by)
    return graph


def _walk(root: Tensor, by_id: dict[int, str], max_nodes: int, graph: Graph) -> dict[str, Node]:
    """Fill ``graph``; returns the recorded operations it drew, by node id."""
    seen: dict[int, str] = {}
    ops: dict[str, Node] = {}

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
        return ops
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
        ops[node_id(fn)] = fn
        for pos, value in fn.constants:
            if len(graph.nodes) >= max_nodes:
                graph.truncated = True
                break
            const = _constant_node(fn, pos, value)
            graph.nodes.append(const)
            graph.edges.append(GraphEdge(const.id, node_id(fn), pos))
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
    return ops


def _constant_node(fn: Node, pos: int, value: Any) -> GraphNode:
    """An input of ``fn`` that needs no gradient: a float in the formula or small data."""
    if isinstance(value, float):
        return GraphNode(id=f"{node_id(fn)}_c{pos}", kind="const", label="const", value=value)
    meta = fn.input_meta[pos]
    return GraphNode(id=f"{node_id(fn)}_c{pos}", kind="const", label="const",
                     shape=tuple(meta[0]), dtype=meta[1].name,
                     value=_small(value, fn.ctx.backend))


def _assign_blocks(graph: Graph, ops: dict[str, Node], module: Any) -> None:
    """Label each node with the child of ``module`` that made it (ops) or owns it (parameters)."""
    block_of_module: dict[int, str] = {}
    block_of_leaf: dict[str, str] = {}
    for name, child in module.named_children():
        graph.blocks[name] = f"{name}: {type(child).__name__}"
        block_of_module[id(child)] = name
        for p in child.parameters():
            block_of_leaf.setdefault(node_id(p), name)
    op_block = ""
    for n in graph.nodes:
        if n.kind == "op":
            path = ops[n.id].module_path
            n.block = op_block = next(
                (block_of_module[id(m)] for m in path if id(m) in block_of_module), "")
        elif n.kind == "const":
            n.block = op_block  # a constant follows the operation it feeds (see _walk)
        elif n.kind == "leaf":
            n.block = block_of_leaf.get(n.id, "")


def collapse_blocks(graph: Graph) -> Graph:
    """A copy of ``graph`` with each block (see ``snapshot(group_by=)``) drawn as one node.

    The block's node shows the shape of its last operation's output; edges inside
    a block disappear, and edges into or out of it are kept once each.
    """
    members: dict[str, list[GraphNode]] = {}
    for n in graph.nodes:
        if n.block:
            members.setdefault(n.block, []).append(n)
    new_id = {n.id: _block_id(n.block) for ns in members.values() for n in ns}
    nodes = [n for n in graph.nodes if not n.block]
    for block, ns in members.items():
        ops = [n for n in ns if n.kind == "op"]
        last = max(ops, key=lambda n: n.sequence or 0) if ops else ns[0]
        count = f"{len(ops)} operation{'s' if len(ops) != 1 else ''}"
        nodes.append(GraphNode(id=_block_id(block), kind="block",
                               label=graph.blocks.get(block, block), shape=last.shape,
                               dtype=last.dtype, rule=count, block=block,
                               sequence=last.sequence))
    edges, kept = [], set()
    for e in graph.edges:
        source, target = new_id.get(e.source, e.source), new_id.get(e.target, e.target)
        if source == target or (source, target) in kept:
            continue
        kept.add((source, target))
        position = e.position if target == e.target else 0
        edges.append(GraphEdge(source, target, position))
    return Graph(nodes, edges, graph.truncated, dict(graph.blocks))


def _block_id(block: str) -> str:
    return "block_" + "".join(c if c.isalnum() else "_" for c in block)


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
    """Graphviz DOT text: tensors as boxes, operations as ellipses, blocks boxed around."""
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
        if n.kind == "block":
            rows.append(html.escape(n.rule))  # how many operations it stands for
        label = "<" + "<br/>".join(rows) + ">"
        if n.kind == "block":
            style = 'shape=box3d, style=filled, fillcolor="#ece4f7", color="#6a4c93"'
        elif n.kind == "op":
            style = 'shape=ellipse, style=filled, fillcolor="#dbe9f6", color="#4a7ab0"'
        elif n.kind == "leaf":
            style = 'shape=box, style="rounded,filled", fillcolor="#e8f5e1", color="#4f8a3c"'
        elif n.kind == "const":
            style = 'shape=box, style="rounded,filled,dashed", fillcolor="#f2f2f2", color="#888888"'
        else:
            style = 'shape=box, style="rounded,filled", fillcolor="#fdf1d8", color="#b07d1a"'
        if n.id in highlight:
            style += ', penwidth=3, color="#d62728"'
        lines.append(f"  {n.id} [label={label}, {style}];")
    lines += _clusters(graph)
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


def _clusters(graph: Graph) -> list[str]:
    """A dashed frame per block around the nodes it made (not for collapsed blocks)."""
    members: dict[str, list[str]] = {}
    for n in graph.nodes:
        if n.block and n.kind != "block":
            members.setdefault(n.block, []).append(n.id)
    lines = []
    for i, (block, ids) in enumerate(members.items()):
        label = html.escape(graph.blocks.get(block, block))
        lines.append(f'  subgraph cluster_{i} {{ label=<{label}>; style="rounded,dashed"; '
                     f'color="#6a4c93"; fontcolor="#6a4c93"; {"; ".join(ids)}; }}')
    return lines

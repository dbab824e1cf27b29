"""teachgrad.graph: the plain-data snapshot of an autograd graph and its DOT text."""
from __future__ import annotations

import pygraphviz
import pytest

import teachgrad as tg
from teachgrad import graph
from teachgrad.autograd import backward_steps
from teachgrad.graph import Graph, GraphEdge, GraphNode, node_id


def edges_into(g: Graph, target: str) -> list[tuple[str, int]]:
    return [(e.source, e.position) for e in g.edges if e.target == target]


def test_snapshot_nodes_and_edges_in_argument_order():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([3.0, 4.0], requires_grad=True)
    prod = x * w
    loss = (prod - x).sum()
    g = graph.snapshot(loss, names={"x": x, "w": w, "loss": loss})
    assert all(isinstance(n, GraphNode) for n in g.nodes) and all(isinstance(e, GraphEdge) for e in g.edges)
    assert not g.truncated

    out = g.nodes[0]
    assert (out.kind, out.label, out.shape, out.dtype, out.value) == ("output", "loss", (), "float32", 8.0)
    ops = {n.label: n for n in g.nodes if n.kind == "op"}
    assert set(ops) == {"Sum", "Sub", "Mul"}
    leaves = {n.label: n for n in g.nodes if n.kind == "leaf"}
    assert leaves["x"].id == node_id(x) and leaves["w"].id == node_id(w)
    assert leaves["x"].value == [1.0, 2.0] and leaves["x"].grad is None

    assert edges_into(g, out.id) == [(ops["Sum"].id, 0)]
    assert edges_into(g, ops["Sum"].id) == [(ops["Sub"].id, 0)]
    assert edges_into(g, ops["Sub"].id) == [(ops["Mul"].id, 0), (node_id(x), 1)]  # prod - x
    assert edges_into(g, ops["Mul"].id) == [(node_id(x), 0), (node_id(w), 1)]  # x * w
    assert ops["Mul"].id == node_id(prod.grad_fn)
    assert ops["Mul"].value == [3.0, 8.0] and ops["Mul"].rule == prod.grad_fn.rule
    assert ops["Mul"].sequence < ops["Sub"].sequence < ops["Sum"].sequence  # creation order


def test_x_times_x_is_two_edges():
    x = tg.tensor([3.0], requires_grad=True)
    y = x * x
    g = graph.snapshot(y, names={"x": x})
    mul = next(n for n in g.nodes if n.kind == "op")
    assert edges_into(g, mul.id) == [(node_id(x), 0), (node_id(x), 1)]
    assert sum(n.kind == "leaf" for n in g.nodes) == 1  # one leaf, two edges


def test_constants_are_shown_and_unnamed_leaves_show_their_shape():
    w = tg.ones(2, 3, requires_grad=True)
    c = tg.full((2, 3), 3.0)  # needs no gradient: drawn as a constant, with its values
    g = graph.snapshot((w * c).sum())
    leaves = [n for n in g.nodes if n.kind == "leaf"]
    assert [n.label for n in leaves] == ["2×3"]
    mul = next(n for n in g.nodes if n.label == "Mul")
    const = next(n for n in g.nodes if n.kind == "const")
    assert sorted(edges_into(g, mul.id), key=lambda e: e[1]) == [(node_id(w), 0), (const.id, 1)]
    assert const.value == [[3.0] * 3] * 2 and const.shape == (2, 3)


def test_numbers_in_a_formula_are_constants_and_large_data_is_not():
    x = tg.tensor(3.0)
    w = tg.tensor(2.0, requires_grad=True)
    g = graph.snapshot((w * x) ** 2 + 1.5)
    values = {n.value for n in g.nodes if n.kind == "const"}
    assert values == {3.0, 2.0, 1.5}  # the data x, the exponent, the added number
    mul = next(n for n in g.nodes if n.label == "Mul")
    assert mul.value == 6.0  # checkable by hand now: 2 * 3
    big = graph.snapshot((w * tg.ones(100)).sum())
    assert not [n for n in big.nodes if n.kind == "const"]
    assert "const" in graph.snapshot((w * x) ** 2).to_dot()


def test_grads_appear_after_backward():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    loss = (x * x).sum()
    loss.backward(retain_graph=True)
    g = graph.snapshot(loss, names={"x": x})
    assert g.node(node_id(x)).grad == [2.0, 4.0]


def test_big_tensors_show_no_values():
    x = tg.ones(5, 5, requires_grad=True)
    g = graph.snapshot((x * 2).sum(), names={"x": x})
    assert g.node(node_id(x)).value is None and g.node(node_id(x)).shape == (5, 5)


def test_a_bare_leaf_and_a_constant():
    x = tg.tensor([1.0], requires_grad=True)
    g = graph.snapshot(x, names={"x": x})
    assert [(n.id, n.kind, n.label) for n in g.nodes] == [(node_id(x), "leaf", "x")] and g.edges == []
    [step] = list(backward_steps(x, tg.ones(1)))  # its backward step names the same node
    assert node_id(step.leaf) == g.nodes[0].id
    c = graph.snapshot(tg.ones(2))
    assert [n.kind for n in c.nodes] == ["output"]


def test_ids_match_backward_steps():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    loss = (x.exp() * x).sum()
    g = graph.snapshot(loss, names={"x": x})
    ids = {n.id for n in g.nodes}
    for step in backward_steps(loss):
        assert node_id(step.leaf if step.leaf is not None else step.node) in ids


def test_max_nodes_truncates_and_keeps_only_edges_between_kept_nodes():
    x = tg.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(30):
        y = y * 1.5
    g = graph.snapshot(y, max_nodes=10)
    assert g.truncated and len(g.nodes) == 10
    kept = {n.id for n in g.nodes}
    assert all(e.source in kept and e.target in kept for e in g.edges)
    full = graph.snapshot(y)
    assert not full.truncated and len(full.nodes) == 62  # output + 30 Mul, 30 constants + leaf
    assert "graph cut at the node budget" in g.to_dot()


@pytest.mark.parametrize("rankdir", ["LR", "TB"])
def test_dot_text_parses_and_renders(rankdir):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([0.5, -1.0], requires_grad=True)
    loss = ((x * x + w).tanh() * w).sum()
    loss.backward(retain_graph=True)
    g = graph.snapshot(loss, names={"x": x, "w": w})
    highlighted = node_id(w)
    dot = g.to_dot(rankdir=rankdir, highlight=[highlighted])
    assert dot == graph.to_dot(g, rankdir=rankdir, highlight=[highlighted])
    parsed = pygraphviz.AGraph(string=dot)
    assert parsed.is_directed()
    assert sorted(parsed.nodes()) == sorted(n.id for n in g.nodes)
    assert parsed.number_of_edges() == len(g.edges)
    assert parsed.graph_attr["rankdir"] == rankdir
    assert parsed.get_node(highlighted).attr["penwidth"] == "3"
    assert "grad [" in parsed.get_node(node_id(x)).attr["label"]
    x_edges = [e for e in parsed.edges() if e[0] == node_id(x)]
    assert len(x_edges) == 2  # x * x: two edges, labelled with their argument positions
    assert sorted(e.attr["label"] for e in parsed.edges() if e[0] == node_id(x)) == ["0", "1"]
    parsed.layout(prog="dot")
    assert b"<svg" in parsed.draw(format="svg")


def test_dot_escapes_labels():
    x = tg.tensor([1.0], requires_grad=True)
    dot = graph.snapshot((x * 2).sum(), names={"<x & y>": x}).to_dot()
    assert "&lt;x &amp; y&gt;" in dot
    pygraphviz.AGraph(string=dot)

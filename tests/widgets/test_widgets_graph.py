"""GraphView and the Graphviz renderer: the picture shows the engine's graph, with or
without the `dot` program, and never crashes when Graphviz is missing."""
import re

import pytest

import teachgrad as tg
from teachgrad.graph import node_id
from teachgrad.widgets import GraphView, GraphvizUnavailable, render_svg
from teachgrad.widgets.render import available_backend, render_svg_with_backend, svg_size


def node_titles(svg: str) -> set[str]:
    """Graphviz writes each node's id as the <title> of its group."""
    return set(re.findall(r'<g id="node\d+" class="node">\s*<title>([^<]*)</title>', svg))


def edge_titles(svg: str) -> list[str]:
    return re.findall(r'<g id="edge\d+" class="edge">\s*<title>([^<]*)</title>', svg)


def square_sum():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([3.0, 4.0], requires_grad=True)
    loss = (x * x * w).sum()
    return x, w, loss


@pytest.fixture
def no_dot_on_path(monkeypatch, tmp_path):
    """A PATH with no `dot` program on it."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("TEACHGRAD_GRAPHVIZ", raising=False)


def test_graph_view_draws_labels_values_and_both_edges_of_x_times_x():
    x, w, loss = square_sum()
    view = GraphView(loss, names={"x": x, "w": w, "loss": loss})
    svg = view.to_svg()
    assert svg.startswith("<svg")
    for text in (">x<", ">w<", ">Mul<", ">Sum<", ">loss<", "data [1., 2.]", "data 19"):
        assert text in svg, text
    # x feeds the first Mul twice: two edges to the same node
    x_edges = [e for e in edge_titles(svg) if e.startswith(node_id(x) + "&#45;&gt;")]
    assert len(x_edges) == 2 and len(set(x_edges)) == 1
    assert ">grad " not in svg  # nothing has run backward yet


def test_graph_view_with_dot_absent_from_path_uses_pygraphviz(no_dot_on_path):
    assert available_backend() == "pygraphviz"
    x, w, loss = square_sum()
    view = GraphView(loss, names={"x": x, "w": w, "loss": loss})
    assert view.picture.drawn_by == "pygraphviz"
    assert "<svg" in view.canvas.value and 'data-drawn-by="pygraphviz"' in view.canvas.value
    for label in (">x<", ">w<", ">Mul<", ">loss<"):
        assert label in view.to_svg()


def test_dot_and_pygraphviz_draw_the_same_nodes_and_edges():
    x, w, loss = square_sum()
    dot_text = tg.graph.snapshot(loss, names={"x": x}).to_dot()
    by_program, used = render_svg_with_backend(dot_text, "dot")
    by_wheel, used_wheel = render_svg_with_backend(dot_text, "pygraphviz")
    assert (used, used_wheel) == ("dot", "pygraphviz")
    assert node_titles(by_program) == node_titles(by_wheel) != set()
    assert sorted(edge_titles(by_program)) == sorted(edge_titles(by_wheel))


def test_layout_toggle_turns_a_chain_from_wide_to_tall():
    x = tg.tensor(2.0, requires_grad=True)
    y = x.exp().sin().cos().tanh()
    view = GraphView(y)
    width, height = svg_size(view.to_svg())
    assert width > height
    view.layout_toggle.value = "TB"
    assert view.rankdir == "TB"
    width, height = svg_size(view.to_svg())
    assert height > width


def test_refresh_shows_the_grads_after_backward():
    x, w, loss = square_sum()
    view = GraphView(loss, names={"x": x, "w": w})
    loss.backward()
    assert ">grad " not in view.to_svg()  # the snapshot is from before backward
    view.refresh_button.click()
    assert "grad [ 6., 16.]" in view.to_svg()
    assert "grad [1., 4.]" in view.to_svg()


def test_node_budget_cuts_big_graphs_with_a_message():
    x = tg.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(30):
        y = y * 1.01
    view = GraphView(y, max_nodes=10)
    assert view.graph.truncated and len(view.graph.nodes) == 10
    assert "more than 10 nodes" in view.message.value
    assert "graph cut at the node budget" in view.to_svg()


def test_without_any_graphviz_the_view_lists_the_graph_as_text(monkeypatch):
    monkeypatch.setenv("TEACHGRAD_GRAPHVIZ", "none")
    x, w, loss = square_sum()
    view = GraphView(loss, names={"x": x, "w": w, "loss": loss})
    assert view.picture.drawn_by is None
    assert "Graphviz is missing" in view.canvas.value
    assert "pip install pygraphviz" in view.canvas.value
    assert "Mul·1 ← x, x" in view.canvas.value  # both arguments, in order
    assert view.to_svg().startswith("<svg") and "Mul·2 ← Mul·1, w" in view.to_svg()


def test_render_svg_errors_name_the_problem_and_the_fix():
    with pytest.raises(GraphvizUnavailable, match="apt-get install graphviz"):
        render_svg("digraph { a -> b }", backend="none")
    with pytest.raises(ValueError, match="unknown Graphviz backend 'svgz'"):
        render_svg("digraph { a -> b }", backend="svgz")


def test_render_svg_falls_back_when_dot_is_missing(no_dot_on_path):
    svg = render_svg('digraph { a [label="hello"]; a -> b }')
    assert svg.startswith("<svg") and "hello" in svg
    with pytest.raises(GraphvizUnavailable, match="`dot` program is not on PATH"):
        render_svg("digraph { a }", backend="dot")


def test_bad_arguments_are_refused_before_drawing():
    x, w, loss = square_sum()
    with pytest.raises(ValueError, match="rankdir must be 'LR'"):
        GraphView(loss, rankdir="RL")
    with pytest.raises(ValueError, match="max_nodes must be at least 2"):
        GraphView(loss, max_nodes=1)


def test_mimebundle_has_the_live_widget_and_a_static_svg():
    x, w, loss = square_sum()
    bundle = GraphView(loss)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["image/svg+xml"].startswith("<svg")


def test_a_module_names_its_parameters_and_big_tensors_show_their_shape():
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.ReLU(), tg.nn.Linear(4, 1))
    loss = model(tg.randn(5, 3)).sum()
    loss.backward()
    view = GraphView(loss, names=model)
    svg = view.to_svg()
    for label in (">0.weight<", ">0.bias<", ">2.weight<", ">2.bias<"):
        assert label in svg
    assert ">4×3<" in svg  # 12 values: too many to print, the shape instead
    bias_grad = model[2].bias.grad.numpy()[0]
    assert f">grad [{bias_grad:.0f}.]<" in svg  # a one-element grad is printed


class Block(tg.nn.Module):
    """A repeated block: its own Linear and Tanh, called as one module."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = tg.nn.Linear(width, width)

    def forward(self, x):
        return self.linear(x).tanh() + x


def deep_model(depth: int = 12, width: int = 3):
    return tg.nn.Sequential(*[Block(width) for _ in range(depth)], tg.nn.Linear(width, 1))


def test_snapshot_groups_nodes_by_the_child_module_that_made_them():
    model = deep_model(depth=2)
    loss = model(tg.randn(4, 3)).pow(2).mean()
    graph = tg.graph.snapshot(loss, names=dict(model.named_parameters()), group_by=model)
    blocks = {n.label: n.block for n in graph.nodes if n.kind == "leaf"}
    assert blocks == {"0.linear.weight": "0", "0.linear.bias": "0", "1.linear.weight": "1",
                      "1.linear.bias": "1", "2.weight": "2", "2.bias": "2"}
    ops = [(n.label, n.block) for n in sorted(graph.nodes, key=lambda n: n.sequence or -1)
           if n.kind == "op"]
    assert ops == [("Linear", "0"), ("Tanh", "0"), ("Add", "0"),
                   ("Linear", "1"), ("Tanh", "1"), ("Add", "1"),
                   ("Linear", "2"), ("Pow", ""), ("Mean", "")]  # the loss is outside the model
    assert graph.blocks == {"0": "0: Block", "1": "1: Block", "2": "2: Linear"}
    assert graph.to_dot().count("subgraph cluster_") == 3


def test_collapse_blocks_keeps_the_connections_between_blocks():
    model = deep_model(depth=2)
    x = tg.randn(4, 3, requires_grad=True)
    graph = tg.graph.snapshot(model(x).sum(), group_by=model)
    collapsed = tg.graph.collapse_blocks(graph)
    kinds = sorted(n.kind for n in collapsed.nodes)
    assert kinds == ["block", "block", "block", "leaf", "op", "output"]  # x, Sum, the output
    block_nodes = {n.id: n for n in collapsed.nodes if n.kind == "block"}
    assert [block_nodes[i].label for i in sorted(block_nodes)] == ["0: Block", "1: Block",
                                                                   "2: Linear"]
    assert block_nodes["block_0"].rule == "3 operations" and block_nodes["block_2"].shape == (4, 1)
    pairs = {(e.source, e.target) for e in collapsed.edges}
    x_id = node_id(x)
    # x feeds block 0 (the Linear and the residual Add: drawn once); the residual
    # connection of block 1 also reads block 0's output
    assert {(x_id, "block_0"), ("block_0", "block_1"), ("block_1", "block_2")} <= pairs
    assert len(collapsed.edges) == len(pairs)
    assert not any(e.source == e.target for e in collapsed.edges)


def test_graph_view_collapses_a_deep_model_that_is_over_the_node_budget():
    model = deep_model(depth=12)
    loss = model(tg.randn(4, 3)).pow(2).mean()
    view = GraphView(loss, names=model, group_by=model, max_nodes=40)
    assert view.collapse_toggle.layout.display is None  # the switch is shown
    assert view.graph.truncated and "Switch on collapse blocks" in view.message.value
    view.collapse_toggle.value = True  # what a click does
    assert not view.graph.truncated and view.message.value == ""
    titles = node_titles(view.to_svg())
    assert {f"block_{i}" for i in range(13)} <= titles
    assert len(titles) == 13 + 4  # the blocks, Pow and its exponent, Mean and the output
    assert "11: Block" in view.to_svg() and "12: Linear" in view.to_svg()
    view.collapse_toggle.value = False
    assert view.graph.truncated and not any(t.startswith("block_") for t in
                                            node_titles(view.to_svg()))


def test_collapse_needs_a_module_to_group_by():
    loss = deep_model(depth=1)(tg.randn(2, 3)).sum()
    with pytest.raises(ValueError, match="collapse=True needs group_by=model"):
        GraphView(loss, collapse=True)
    with pytest.raises(TypeError, match="group_by must be an nn.Module, not dict"):
        GraphView(loss, group_by={})
    assert GraphView(loss).collapse_toggle.layout.display == "none"

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

"""Render the pictures the README shows, from the real engine and widgets.

    python scripts/render_readme_figures.py      # writes docs/img/graph_view.svg

The graph is one neuron with a squared error, after ``loss.backward()``, so the
leaves show their gradients. Node ids are renamed n0, n1, ... (they are
memory addresses otherwise) so that re-running gives the same file.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import teachgrad as tg
from teachgrad.graph import Graph
from teachgrad.widgets import GraphView, render_svg

ROOT = Path(__file__).resolve().parents[1]


def neuron_graph() -> GraphView:
    """``loss = (tanh(w · x + b) - target)²`` for a two-input neuron, after backward."""
    x = tg.tensor([0.5, -1.0])
    w = tg.tensor([0.8, 0.3], requires_grad=True)
    b = tg.tensor(0.1, requires_grad=True)
    target = tg.tensor(1.0)
    prediction = ((w * x).sum() + b).tanh()
    loss = (prediction - target) ** 2
    loss.backward()
    return GraphView(loss, names={"w": w, "b": b, "loss": loss}, rankdir="LR")


def with_stable_ids(graph: Graph) -> Graph:
    """The same graph with ids n0, n1, ... in snapshot order."""
    new = {node.id: f"n{i}" for i, node in enumerate(graph.nodes)}
    return dataclasses.replace(
        graph, nodes=[dataclasses.replace(n, id=new[n.id]) for n in graph.nodes],
        edges=[dataclasses.replace(e, source=new[e.source], target=new[e.target])
               for e in graph.edges])


def main() -> None:
    out = ROOT / "docs" / "img" / "graph_view.svg"
    out.parent.mkdir(parents=True, exist_ok=True)
    view = neuron_graph()
    if view.picture.drawn_by is None:
        raise SystemExit(f"Graphviz is not available, so the figure would be text only: "
                         f"{view.picture.problem}")
    out.write_text(render_svg(with_stable_ids(view.graph).to_dot(rankdir=view.rankdir)))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

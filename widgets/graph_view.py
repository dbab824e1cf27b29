"""GraphView: the autograd graph behind a tensor, drawn from the engine's own snapshot.

::

    x = tg.tensor([1.0, 2.0], requires_grad=True)
    loss = (x * x).sum()
    GraphView(loss, names={"x": x, "loss": loss})

Tensors are boxes (green: leaves that want a gradient, yellow: the output),
operations are ellipses, edges run from each input to the operation that used
it, in argument order. ``x * x`` draws two edges from ``x``. Small tensors show
their values, and a leaf shows its ``.grad`` once backward has run (press
*refresh* to take a new snapshot).

The picture comes from :func:`teachgrad.graph.snapshot` and
:func:`teachgrad.graph.to_dot`; this module only lays it out (Graphviz) and
puts it in a widget. Big graphs are cut at ``max_nodes`` with a note saying so.

For a network, pass the model as ``group_by``: the nodes each child module
made are framed together, and the *collapse blocks* switch draws each child as
one node, so a deep model stays readable::

    GraphView(loss, names=model, group_by=model, collapse=True)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from html import escape
from typing import Any, Iterable

import ipywidgets as widgets
import numpy as np

from teachgrad.graph import Graph, collapse_blocks, snapshot

from ._display import StaticSVG
from ._format import format_array
from .render import GraphvizUnavailable, render_svg_with_backend, text_svg

#: Node budget of a GraphView: enough for a small MLP, still readable on screen.
DEFAULT_MAX_NODES = 80
#: With blocks collapsed, how many nodes the snapshot may hold before collapsing.
COLLAPSED_WALK_BUDGET = 20_000
#: Tensors with more elements than this show their shape instead of their values.
SHOW_VALUES_UP_TO = 6


@dataclass
class Picture:
    """A laid-out graph: SVG from Graphviz, or a text listing when Graphviz is missing."""

    svg: str  #: always an ``<svg>``: Graphviz's drawing, or the listing as text
    drawn_by: str | None  #: "dot", "pygraphviz", or None for the text listing
    listing: list[str]  #: the graph as lines of text (what the fallback shows)
    problem: str = ""  #: why Graphviz could not draw it (empty when it did)


def resolve_names(names: Any) -> dict[str, Any] | None:
    """``names`` as ``{label: tensor}``; a Module gives its parameters' names ("0.weight")."""
    if names is not None and hasattr(names, "named_parameters"):
        return dict(names.named_parameters())
    return names


def compact(graph: Graph, show_values_up_to: int = SHOW_VALUES_UP_TO) -> Graph:
    """A copy of ``graph`` in which only small tensors keep their values and grads, so
    that a node stays narrow (the others show their shape)."""
    def small(values: Any) -> bool:
        return values is None or np.size(values) <= show_values_up_to

    nodes = [dataclasses.replace(n, value=n.value if small(n.value) else None,
                                 grad=n.grad if small(n.grad) else None) for n in graph.nodes]
    return dataclasses.replace(graph, nodes=nodes)


def describe_nodes(graph: Graph) -> dict[str, str]:
    """A short name per node id: tensors by label, ops numbered in creation order (Mul·2)."""
    names = {node.id: node.label for node in graph.nodes if node.kind != "op"}
    ops = sorted((n for n in graph.nodes if n.kind == "op"), key=lambda n: n.sequence or 0)
    op_counts: dict[str, int] = {}
    for node in ops:
        op_counts[node.label] = op_counts.get(node.label, 0) + 1
        names[node.id] = f"{node.label}·{op_counts[node.label]}"
    return names


def listing(graph: Graph, highlight: Iterable[str] = ()) -> list[str]:
    """The graph as text, one node per line with its inputs in argument order."""
    marked = set(highlight)
    names = describe_nodes(graph)
    lines = []
    for node in graph.nodes:
        inputs = sorted((e for e in graph.edges if e.target == node.id), key=lambda e: e.position)
        line = names[node.id]
        if inputs:
            line += " ← " + ", ".join(names.get(e.source, "?") for e in inputs)
        details = [node.kind, "shape " + str(list(node.shape))]
        if node.value is not None:
            details.append("data " + format_array(node.value))
        if node.grad is not None:
            details.append("grad " + format_array(node.grad))
        line += "   (" + "; ".join(details) + ")"
        lines.append(("▶ " if node.id in marked else "  ") + line)
    if graph.truncated:
        lines.append("  … graph cut at the node budget: pass max_nodes= for more")
    return lines


def draw(graph: Graph, rankdir: str = "LR", highlight: Iterable[str] = (),
         backend: str | None = None) -> Picture:
    """Lay out ``graph`` with Graphviz; never raises because Graphviz is missing."""
    highlight = list(highlight)
    graph = compact(graph)
    text = listing(graph, highlight)
    try:
        svg, drawn_by = render_svg_with_backend(graph.to_dot(rankdir=rankdir, highlight=highlight),
                                                backend)
    except GraphvizUnavailable as error:
        return Picture(text_svg(text, title="Graphviz is not available: the graph as text"),
                       None, text, str(error))
    return Picture(svg, drawn_by, text)


def picture_html(picture: Picture, highlighted: str | None = None, step: int | None = None,
                 max_height: str = "560px") -> str:
    """HTML for a widget: the SVG (or the text listing and install help), with data
    attributes that say what is shown (read by browser tests and curious learners)."""
    attrs = f'class="teachgrad-graph" data-drawn-by="{picture.drawn_by or "text"}"'
    if highlighted is not None:
        attrs += f' data-highlighted="{escape(highlighted)}"'
    if step is not None:
        attrs += f' data-step="{step}"'
    if picture.drawn_by is None:
        body = (f'<div style="color:#a33"><b>Graphviz is missing.</b> '
                f'{escape(picture.problem)}</div>'
                f'<pre>{escape(chr(10).join(picture.listing))}</pre>')
    else:
        body = picture.svg
    return f'<div {attrs} style="overflow:auto; max-height:{max_height}">{body}</div>'


class GraphView(StaticSVG, widgets.VBox):
    """The autograd graph behind ``tensor``, with a layout switch and a refresh button.

    Args:
        tensor: the tensor whose graph to draw (usually a loss).
        names: ``{"x": x, ...}``: labels for tensors (otherwise leaves show their
            shape), or a Module, whose parameters are then labelled by name.
        rankdir: ``"LR"`` (left to right) or ``"TB"`` (top to bottom).
        max_nodes: node budget; larger graphs are cut, with a note.
        backend: Graphviz backend for :func:`~teachgrad.widgets.render.render_svg`.
        group_by: a Module: frame the nodes made by each of its children together
            and offer a switch that draws each child as a single node.
        collapse: start with the children collapsed (needs ``group_by``).

    Attributes:
        graph: the latest :class:`teachgrad.graph.Graph` snapshot (never collapsed).
        picture: the latest :class:`Picture`.
    """

    def __init__(self, tensor: Any, names: dict[str, Any] | None = None, rankdir: str = "LR",
                 max_nodes: int = DEFAULT_MAX_NODES, backend: str | None = None,
                 group_by: Any = None, collapse: bool = False) -> None:
        if rankdir not in ("LR", "TB"):
            raise ValueError(f"rankdir must be 'LR' (left to right) or 'TB' (top to bottom), "
                             f"not {rankdir!r}")
        if max_nodes < 2:
            raise ValueError(f"max_nodes must be at least 2 (the output and one node), "
                             f"not {max_nodes}")
        if collapse and group_by is None:
            raise ValueError("collapse=True needs group_by=model: the module whose children "
                             "are the blocks to collapse")
        self.tensor, self.names = tensor, resolve_names(names)
        self.max_nodes, self.backend, self.group_by = max_nodes, backend, group_by
        self.collapse_toggle = widgets.ToggleButton(
            value=collapse, description="collapse blocks", icon="compress",
            tooltip="draw each child module as one node",
            layout=widgets.Layout(display=None if group_by is not None else "none"))
        self.layout_toggle = widgets.ToggleButtons(
            options=[("left → right", "LR"), ("top → bottom", "TB")], value=rankdir,
            description="layout", style={"button_width": "110px"})
        self.refresh_button = widgets.Button(
            description="refresh", icon="refresh",
            tooltip="take a new snapshot of the graph (e.g. to show grads after backward())")
        self.message = widgets.HTML()
        self.canvas = widgets.HTML()
        super().__init__([widgets.HBox([self.layout_toggle, self.collapse_toggle,
                                        self.refresh_button]),
                          self.message, self.canvas])
        self.layout_toggle.observe(lambda change: self._draw(), names="value")
        self.collapse_toggle.observe(lambda change: self.refresh(), names="value")
        self.refresh_button.on_click(lambda button: self.refresh())
        self.refresh()

    @property
    def rankdir(self) -> str:
        return self.layout_toggle.value

    def refresh(self) -> None:
        """Take a new snapshot of the graph (values and grads as they are now) and redraw."""
        # collapsed, the budget applies to what is drawn: walk the whole graph first
        walk_budget = COLLAPSED_WALK_BUDGET if self.collapse_toggle.value else self.max_nodes
        self.graph = snapshot(self.tensor, names=self.names, max_nodes=walk_budget,
                              group_by=self.group_by)
        self._draw()

    @property
    def shown(self) -> Graph:
        """The graph as drawn: :attr:`graph`, or its collapsed form."""
        return collapse_blocks(self.graph) if self.collapse_toggle.value else self.graph

    def _draw(self) -> None:
        shown = self.shown
        self.picture = draw(shown, self.rankdir, backend=self.backend)
        self.canvas.value = picture_html(self.picture)
        notes = []
        collapsed = self.collapse_toggle.value
        if collapsed and self.graph.truncated:
            notes.append(f"This graph has more than {COLLAPSED_WALK_BUDGET} nodes: the blocks "
                         "show only the part closest to the output.")
        elif collapsed and len(shown.nodes) > self.max_nodes:
            notes.append(f"Even with blocks collapsed this graph has {len(shown.nodes)} "
                         f"nodes, more than the budget of {self.max_nodes}: it may be hard "
                         "to read.")
        elif self.graph.truncated:
            notes.append(f"This graph has more than {self.max_nodes} nodes: showing the "
                         f"{self.max_nodes} closest to the output. "
                         + ("Switch on collapse blocks to see all of it, or pass"
                            if self.group_by is not None else
                            "Pass group_by=model to collapse its layers, or")
                         + " a larger max_nodes= to see more (the picture gets harder to read).")
        if self.picture.drawn_by is None:
            notes.append("Graphviz is missing, so the graph is listed as text below.")
        self.message.value = "".join(f'<div style="color:#8a5a00">{escape(n)}</div>' for n in notes)

    def to_svg(self) -> str:
        """The current picture as SVG text (for the book, a file, or a test)."""
        return self.picture.svg

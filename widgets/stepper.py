"""BackpropStepper: watch the real backward engine run, one node at a time.

::

    stepper = BackpropStepper(loss, names={"x": x, "w": w})
    stepper            # in a notebook: buttons, slider, graph and an explanation panel

The stepper does not compute gradients itself. It pulls steps from
:func:`teachgrad.autograd.backward_steps` — the generator that
``loss.backward()`` exhausts — so the order and the values of every step are
exactly what ``backward()`` produces. Each step is recorded when it is
produced (the :class:`~teachgrad.autograd.BackwardStep`, a graph snapshot and
copies of the gradients), so going *back* shows what happened then instead of
recomputing it.

The stepper's run starts from zero and keeps its gradients to itself
(:attr:`BackpropStepper.grads`): while a step runs, each leaf's ``.grad`` holds
the stepper's own value, and afterwards it gets back whatever it held before.
So a ``backward()`` in a later cell neither shows up in the stepper nor is
changed by it, and the stepper's last step shows the gradients one
``loss.backward()`` gives from zero.

Numbering: ``current_step == k`` means ``k`` steps have run and step ``k`` (the
one with ``index == k - 1``) is the one shown; ``0`` is the graph before
backprop starts.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from html import escape
from typing import Any

import ipywidgets as widgets

from teachgrad.autograd import AccumulateGrad, BackwardStep, backward_steps
from teachgrad.graph import Graph, node_id, snapshot

from ._display import StaticSVG
from ._format import code, format_array, to_host
from .graph_view import DEFAULT_MAX_NODES, draw, picture_html, resolve_names


@dataclass
class StepRecord:
    """What the stepper keeps for one step: enough to show it again later."""

    step: BackwardStep
    graph: Graph  #: snapshot taken right after the step (leaf grads as they were then)
    highlighted: str  #: id of the graph node that ran
    panel: str  #: the explanation, as HTML, built from values copied at the time


def reachable_nodes(tensor: Any) -> list[Any]:
    """Every backward node behind ``tensor``: its operations and its leaves' AccumulateGrads.

    Each can run at most once, so their number bounds the steps of backprop.
    """
    if tensor.grad_fn is None:
        return [tensor._accumulator()] if tensor.requires_grad else []
    nodes, seen, stack = [], set(), [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
    return nodes


def panel_names(graph: Graph) -> dict[str, str]:
    """How the panel names each graph node so it can be found in the picture:
    tensors by label, operations by label and the value (or shape) drawn on them."""
    names = {}
    for node in graph.nodes:
        if node.kind != "op":
            names[node.id] = node.label
        elif node.value is not None:
            names[node.id] = f"{node.label} (data {format_array(node.value)})"
        else:
            names[node.id] = f"{node.label} ({'×'.join(map(str, node.shape)) or 'scalar'})"
    return names


class BackpropStepper(StaticSVG, widgets.VBox):
    """Step through ``loss``'s backward pass: buttons, a slider, the graph and a panel.

    Args:
        loss: a scalar tensor with a graph behind it (any tensor ``backward()`` accepts).
        names: ``{"x": x, ...}`` (or a Module): labels for tensors in the graph and the panel.
        rankdir: graph layout, ``"LR"`` or ``"TB"``.
        max_nodes: node budget of the graph picture.
        backend: Graphviz backend (see :mod:`teachgrad.widgets.render`).

    State (also what the tests read): ``current_step``, ``steps`` (the
    BackwardSteps so far), ``highlighted`` (graph node id or None), ``done``.
    """

    def __init__(self, loss: Any, names: dict[str, Any] | None = None, rankdir: str = "LR",
                 max_nodes: int = DEFAULT_MAX_NODES, backend: str | None = None) -> None:
        self.loss, self.names, self.rankdir = loss, resolve_names(names), rankdir
        self.max_nodes, self.backend = max_nodes, backend
        # backward_steps checks everything up front (scalar loss, graph not freed, ...),
        # so a bad loss fails here with the engine's own message, before any step runs.
        self._steps_source = backward_steps(loss, retain_graph=True)
        nodes = reachable_nodes(loss)
        self._most_steps = len(nodes)  # the slider's range until the engine says it is done
        self._leaves = [n.variable for n in nodes if isinstance(n, AccumulateGrad)]
        self._own: list[Any] = [None] * len(self._leaves)  # this run's grads, from zero
        with self._own_grads():
            self._start_graph = snapshot(loss, names=self.names, max_nodes=max_nodes)
        self.records: list[StepRecord] = []
        self.current_step = 0
        self.done = False
        self._moving = False  # guards against the slider's observer re-entering _go_to
        self._svg_cache: dict[int, Any] = {}

        self.back_button = widgets.Button(description="back", icon="step-backward",
                                          tooltip="show the previous (recorded) step")
        self.step_button = widgets.Button(description="step", icon="step-forward",
                                          tooltip="run the next node's backward")
        self.reset_button = widgets.Button(description="reset", icon="undo",
                                           tooltip="start backprop again from zero")
        self.slider = widgets.IntSlider(value=0, min=0, max=1, description="step",
                                        continuous_update=False)
        self.play = widgets.Play(value=0, min=0, max=1, interval=900, description="play")
        widgets.link((self.play, "value"), (self.slider, "value"))
        widgets.link((self.play, "max"), (self.slider, "max"))
        self.canvas = widgets.HTML()
        self.panel = widgets.HTML()
        controls = widgets.HBox([self.back_button, self.step_button, self.play, self.slider,
                                 self.reset_button])
        super().__init__([controls, self.canvas, self.panel])

        self.step_button.on_click(lambda button: self.step())
        self.back_button.on_click(lambda button: self.back())
        self.reset_button.on_click(lambda button: self.reset())
        self.slider.observe(lambda change: self._go_to(change["new"]), names="value")
        self._show()

    # -- state -------------------------------------------------------------------------
    @property
    def steps(self) -> list[BackwardStep]:
        """The engine's steps produced so far, in the order it ran them."""
        return [r.step for r in self.records]

    @property
    def grads(self) -> dict[str, Any]:
        """This run's gradient of each leaf so far (None: not reached yet), by name."""
        names = {id(t): name for name, t in self.names.items()} if self.names else {}
        return {names.get(id(t), f"leaf {i}"): g
                for i, (t, g) in enumerate(zip(self._leaves, self._own))}

    @contextlib.contextmanager
    def _own_grads(self):
        """Swap this run's gradients into the leaves for a moment; put the learner's back."""
        outside = [t.grad for t in self._leaves]
        for leaf, own in zip(self._leaves, self._own):
            leaf.grad = own
        try:
            yield
        finally:
            self._own = [t.grad for t in self._leaves]
            for leaf, theirs in zip(self._leaves, outside):
                leaf.grad = theirs

    @property
    def highlighted(self) -> str | None:
        """Graph node id of the step shown (None before the first step)."""
        return self.records[self.current_step - 1].highlighted if self.current_step else None

    # -- moving --------------------------------------------------------------------------
    def step(self) -> None:
        """Show the next step, running the engine for it if it has not run yet."""
        self._go_to(self.current_step + 1)

    def back(self) -> None:
        """Show the previous step as it was recorded (the engine does not run backwards)."""
        self._go_to(self.current_step - 1)

    def run_to_end(self) -> None:
        """Run every remaining step; afterwards :attr:`grads` holds what backward() gives."""
        while not self.done:
            self._produce()
        self._go_to(len(self.records))

    def reset(self) -> None:
        """Start backprop again, from zero."""
        self._own = [None] * len(self._leaves)
        self._steps_source = backward_steps(self.loss, retain_graph=True)
        self.records, self.done, self.current_step = [], False, 0
        self._svg_cache.clear()
        self.play.playing = False
        self._show()

    def _produce(self) -> None:
        """Run one more step of the engine and record it."""
        with self._own_grads():
            try:
                step = next(self._steps_source)
            except StopIteration:  # only when the graph had nothing to run
                self.done = True
                return
            graph = snapshot(self.loss, names=self.names, max_nodes=self.max_nodes)
            target = step.leaf if step.leaf is not None else step.node
            record = StepRecord(step, graph, node_id(target), "")
            record.panel = self._explain(record)
        self.records.append(record)
        self.done = step.pending == 0  # the engine says nothing else is ready to run

    def _go_to(self, k: int) -> None:
        if self._moving:
            return
        while k > len(self.records) and not self.done:
            self._produce()
        self.current_step = max(0, min(k, len(self.records)))
        self._show()

    # -- showing -------------------------------------------------------------------------
    def _show(self) -> None:
        """Bring buttons, slider, graph and panel in line with ``current_step``."""
        k = self.current_step
        self._moving = True
        try:
            # moving the slider past the recorded steps runs the engine up to there
            self.slider.max = max(len(self.records) if self.done else self._most_steps, 1)
            self.slider.value = k
        finally:
            self._moving = False
        if self.done and k == len(self.records):
            self.play.playing = False
        self.back_button.disabled = k == 0
        self.step_button.disabled = self.done and k == len(self.records)
        picture = self.picture(k)
        self.canvas.value = picture_html(picture, highlighted=self.highlighted, step=k)
        self.panel.value = self._panel_html(k)

    def picture(self, k: int | None = None) -> Any:
        """The graph :class:`~teachgrad.widgets.graph_view.Picture` after ``k`` steps."""
        k = self.current_step if k is None else k
        if k not in self._svg_cache:
            if k == 0:
                graph, highlight = self._start_graph, []
            else:
                graph, highlight = self.records[k - 1].graph, [self.records[k - 1].highlighted]
            self._svg_cache[k] = draw(graph, self.rankdir, highlight, self.backend)
        return self._svg_cache[k]

    def to_svg(self) -> str:
        """The graph at the current step as SVG (the highlighted node drawn in red)."""
        return self.picture().svg

    def _panel_html(self, k: int) -> str:
        if k == 0:
            return ('<div class="teachgrad-step" data-step="0" style="line-height:1.5">'
                    '<b>Before backprop.</b> '
                    'Press <i>step</i>: the engine starts at the output with gradient 1 '
                    '(d loss / d loss) and runs each node once all its gradients have '
                    'arrived.</div>')
        html = self.records[k - 1].panel
        if self.done and k == len(self.records):
            html += ("<p><b>Backprop finished:</b> the stepper's gradients are the ones "
                     "<code>loss.backward()</code> gives, starting from zero (the stepper keeps "
                     "them to itself: your tensors' <code>.grad</code> is unchanged).</p>")
        return html

    def _explain(self, record: StepRecord) -> str:
        """The panel for one step, from values copied now (they may change later)."""
        step = record.step
        names = panel_names(record.graph)
        incoming = format_array(to_host(step.grad_outputs[0]))
        head = (f'<div class="teachgrad-step" data-step="{step.index + 1}" '
                f'data-node="{escape(record.highlighted)}" style="line-height:1.5">'
                f"<b>Step {step.index + 1}: {escape(step.node.name())}</b>"
                f"<br>rule: {code(step.rule)}"
                f"<br>gradient arriving: {code(incoming)}")
        if step.leaf is not None:
            name = names.get(record.highlighted, "leaf")
            body = (f"<br>added into {code(name + '.grad')}, which is now "
                    f"{code(format_array(to_host(step.leaf.grad)))}")
        else:
            body = self._sent_table(step, names)
        waiting = (f"<br><small>{step.pending} node(s) ready to run next</small>"
                   if step.pending else "")
        return head + body + waiting + "</div>"

    @staticmethod
    def _sent_table(step: BackwardStep, names: dict[str, str]) -> str:
        rows = []
        for i, ((receiver, _), grad, added) in enumerate(
                zip(step.node.next_functions, step.grad_inputs, step.accumulated)):
            if receiver is None:
                continue  # an input that needs no gradient (a constant, or not a tensor)
            target = receiver.variable if isinstance(receiver, AccumulateGrad) else receiver
            name = names.get(node_id(target), receiver.name())
            note = ("<b>added</b> to the gradient already waiting there from another edge"
                    if added else "")
            cells = [f"input {i}", f"→ {escape(name)}", code(format_array(to_host(grad))), note]
            rows.append("<tr>" + "".join(f'<td style="padding:1px 10px 1px 0">{c}</td>'
                                         for c in cells) + "</tr>")
        if not rows:
            return "<br>sends no gradient (no input needs one)"
        return ('<br>sends to its inputs:<table class="teachgrad-sent">'
                + "".join(rows) + "</table>")

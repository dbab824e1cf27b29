"""``tg.jit.trace`` and what it returns: a :class:`TracedFunction`.

A TracedFunction holds the graph of one traced call. Calling it runs the graph
(:mod:`~teachgrad.jit.interpreter`), not the original Python, which is the
point: it can be saved, loaded in another process, compiled, or exported.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

from ..tensor import Tensor
from . import interpreter, tracer
from .ir import Graph


class TracedFunction:
    """A traced function: ``.graph`` (print it, draw it), callable like the original."""

    def __init__(self, graph: Graph, name: str = "traced") -> None:
        self.graph = graph
        self.name = name

    def __call__(self, *inputs: Tensor) -> Any:
        interpreter.check_inputs_match(self.graph, inputs, "traced function")
        return interpreter.run(self.graph, inputs)

    def named_parameters(self) -> list[tuple[str, Tensor]]:
        """The graph's parameters and constants by name (so compiling it keeps the names)."""
        return list(self.graph.constants.items())

    def print_tabular(self) -> None:
        self.graph.print_tabular()

    def __repr__(self) -> str:
        ops = self.graph.counts()["call_function"]
        return f"<TracedFunction {self.name}: {ops} operations>\n{self.graph.tabular()}"


def _constant_names(fn: Any) -> dict[int, str]:
    """For a Module: its parameters and buffers by name, so the graph says ``fc1.weight``."""
    names: dict[int, str] = {}
    for getter in ("named_parameters", "named_buffers"):
        if hasattr(fn, getter):
            names.update({id(t): n for n, t in getattr(fn, getter)()})
    return names


def _callable(fn: Any) -> tuple[Callable, Callable]:
    """(what to call, whose signature to read): a Module's ``forward`` is what it runs."""
    if not callable(fn):
        raise TypeError(f"trace needs a function or an nn.Module, not {type(fn).__name__}")
    return fn, getattr(fn, "forward", fn)


def _warn_random_layers(fn: Any) -> None:
    """Dropout in training mode draws a new mask per call; a trace would freeze one."""
    if not getattr(fn, "training", False) or not hasattr(fn, "modules"):
        return
    if any(m.p > 0 for m in fn.modules()
           if any(c.__name__ == "Dropout" for c in type(m).__mro__)):  # (Dropout2d too)
        warnings.warn("the model is in training mode and has Dropout: the random mask drawn "
                      "while tracing is baked into the graph as a constant. Fix: call "
                      "model.eval() before tracing (or compiling) for inference.",
                      tracer.TracerWarning, stacklevel=3)


def trace_graph(fn: Any, example_inputs: Any, side_effects: bool = True) -> Graph:
    """The graph of one call of ``fn(*example_inputs)`` (the checks first, then the trace;
    ``side_effects=False``: the call's writes into tensors from outside are undone)."""
    call, signature_of = _callable(fn)
    inputs = tracer.as_inputs(example_inputs)
    tracer.check_signature(signature_of, len(inputs))
    _warn_random_layers(fn)
    names = tracer.input_names(signature_of, len(inputs))
    return tracer.record(call, inputs, _constant_names(fn), names, side_effects)


def trace(fn: Any, example_inputs: Any, check_inputs: Sequence[Any] | None = None) -> TracedFunction:
    """Run ``fn`` once on ``example_inputs`` and record its operations into a graph.

    Args:
        fn: a function of tensors, or an ``nn.Module`` (its parameters appear by name).
        example_inputs: a tensor or a tuple of tensors, passed positionally.
        check_inputs: other inputs (each a tensor or a tuple) to trace again; when a
            re-trace records different operations, a :class:`TracerWarning` names the
            first one that differs (data-dependent control flow was baked in).
    """
    graph = trace_graph(fn, example_inputs)
    for other in check_inputs or ():
        with warnings.catch_warnings():  # the first trace already warned about each branch
            warnings.simplefilter("ignore", tracer.TracerWarning)
            again = trace_graph(fn, other)
        diff = tracer.differences(graph, again)
        if diff is not None:
            warnings.warn(
                f"the trace depends on the input values: {diff}. The traced graph follows the "
                "path the example inputs took, for every input. Fix: replace the Python if/loop "
                "on tensor values by tensor operations (tg.where), or keep this part eager.",
                tracer.TracerWarning, stacklevel=2)
            break
    name = getattr(fn, "__name__", type(fn).__name__)
    return TracedFunction(graph, name)

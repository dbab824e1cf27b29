"""Run a graph with no access to the Python code that was traced.

The interpreter walks the nodes in order and keeps each node's value in a dict:
inputs come from the call, ``get_attr`` values from ``graph.constants``, and
every ``call_function`` node calls its Function's ``apply``. Because it goes
through ``apply``, autograd records the run as usual: gradients flow through an
interpreted graph exactly as through the eager code it came from.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..tensor import Tensor
from .ir import Graph, Ref, map_refs


def check_inputs_match(graph: Graph, inputs: Sequence[Any], what: str = "graph") -> None:
    """The call has as many tensors as the graph has inputs, with the traced dtypes and ranks."""
    holders = graph.placeholders
    if len(inputs) != len(holders):
        names = ", ".join(p.name for p in holders)
        raise TypeError(f"this {what} takes {len(holders)} input(s) ({names}), but "
                        f"{len(inputs)} were given. Fix: call it with the same tensors it was traced with.")
    for p, t in zip(holders, inputs):
        meta = p.meta[0]
        if not isinstance(t, Tensor):
            raise TypeError(f"input {p.name!r} must be a tensor, not {type(t).__name__}")
        if t.dtype.name != meta.dtype or t.ndim != len(meta.shape) or t.device.type != meta.device:
            raise TypeError(
                f"input {p.name!r} was traced as a {meta.device} {meta.dtype} tensor with "
                f"{len(meta.shape)} dimensions, but got a {t.device.type} {t.dtype.name} tensor "
                f"with {t.ndim}. Fix: convert it (.to(...)), or trace again with inputs like these.")


def run(graph: Graph, inputs: Sequence[Tensor]) -> Any:
    """The graph's output(s) for ``inputs`` (a tensor, or a tuple for a tuple output)."""
    env: dict[str, Any] = {}

    def value(ref: Ref) -> Any:
        v = env[ref.node]
        return v if ref.index is None else v[ref.index]

    feed = iter(inputs)
    for node in graph.nodes:
        if node.op == "placeholder":
            env[node.name] = next(feed)
        elif node.op == "get_attr":
            env[node.name] = graph.constants[node.target]
        elif node.op == "call_function":
            args = map_refs(node.args, value)
            kwargs = map_refs(node.kwargs, value)
            env[node.name] = node.target.apply(*args, **kwargs)
        else:
            return map_refs(node.args[0], value)
    raise ValueError("this graph has no output node")

"""Run a graph with no access to the Python code that was traced.

The interpreter walks the nodes in order and keeps each node's value in a dict:
inputs come from the call, ``get_attr`` values from ``graph.constants``, and
every ``call_function`` node calls its Function's ``apply``. Because it goes
through ``apply``, autograd records the run as usual: gradients flow through an
interpreted graph exactly as through the eager code it came from.

Two things happen at the output, as they did in the eager code: the tensors the
function wrote in place (``graph.writes``: a BatchNorm's running statistics) get
their new values, and a result that is one of the graph's own constants is handed
out as a copy, so that changing it cannot change what later calls return.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..autograd import grad_mode
from ..tensor import Tensor
from .ir import Graph, Ref, map_refs


def check_inputs_match(graph: Graph, inputs: Sequence[Any], what: str = "graph") -> None:
    """The call has as many tensors as the graph has inputs, with the traced shapes, dtypes
    and devices (a graph records sizes as numbers: another shape could silently give a
    wrong answer, e.g. a mean divided by the traced batch size)."""
    holders = graph.placeholders
    if len(inputs) != len(holders):
        names = ", ".join(p.name for p in holders)
        raise TypeError(f"this {what} takes {len(holders)} input(s) ({names}), but "
                        f"{len(inputs)} were given. Fix: call it with the same tensors it was traced with.")
    for p, t in zip(holders, inputs):
        meta = p.meta[0]
        if not isinstance(t, Tensor):
            raise TypeError(f"input {p.name!r} must be a tensor, not {type(t).__name__}")
        got = (tuple(t._array.shape), t.dtype.name, t.device.type)
        if got != (tuple(meta.shape), meta.dtype, meta.device):
            raise TypeError(
                f"input {p.name!r} was traced as a {meta.device} {meta.dtype} tensor of shape "
                f"{list(meta.shape)}, but got a {got[2]} {got[1]} tensor of shape {list(got[0])}. "
                "The graph is specialised to the traced shapes (sizes such as x.shape[0] were "
                "recorded as numbers). Fix: trace again with inputs like these, use "
                "tg.compile (it compiles once per input signature), or convert the input.")


def write_back(graph: Graph, new_values: Sequence[Any]) -> None:
    """Give each tensor the function wrote in place (``graph.writes``) its new value."""
    for (target, _), value in zip(graph.writes, new_values):
        live = graph.constants[target]
        if not isinstance(value, Tensor):  # an array from the generated program
            value = Tensor._make(value, live._backend, live.device)
        with grad_mode.no_grad():  # (copy_: so a trace of this graph records the write too)
            live.copy_(value)


def owned_outputs(graph: Graph) -> list[bool]:
    """For each output: is it one of the graph's own constants (then it is handed out copied)?"""
    out = graph.output.args[0]
    refs = out if isinstance(out, tuple) else (out,)
    owned = []
    for r in refs:
        node = graph.node(r.node)
        owned.append(node.op == "get_attr" and node.target not in graph.captured)
    return owned


def fresh(result: Any, owned: list[bool]) -> Any:
    """``result`` with each owned output replaced by a copy."""
    if not any(owned):
        return result
    outputs = result if isinstance(result, tuple) else (result,)
    with grad_mode.no_grad():
        copied = tuple(o.clone() if own else o for o, own in zip(outputs, owned))
    return copied if isinstance(result, tuple) else copied[0]


def run(graph: Graph, inputs: Sequence[Tensor], owned: list[bool] | None = None) -> Any:
    """The graph's output(s) for ``inputs`` (a tensor, or a tuple for a tuple output);
    ``owned``: :func:`owned_outputs`, when the caller has it already."""
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
            result = fresh(map_refs(node.args[0], value),
                           owned_outputs(graph) if owned is None else owned)
            write_back(graph, [value(ref) for _, ref in graph.writes])
            return result
    raise ValueError("this graph has no output node")

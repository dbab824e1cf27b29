"""Compiler passes as replaceable parts of the engine: a learner's pass inside ``tg.compile``.

Each pass of :mod:`teachgrad.jit.passes` is declared as a part
(``compile.eliminate_dead_code``, ``compile.eliminate_common_subexpressions``,
``compile.fold_constants``, ``compile.fuse_elementwise``). While a learner's function
is plugged into one (``tg.exercises.plug``), every call of that pass runs it instead:
``tg.compile``, :func:`~teachgrad.jit.passes.optimise`, a pass that calls another one
(constant folding ends with dead-code elimination), a pass list the user chose.

What the learner's pass returns is checked before the compiler uses it
(:func:`graph_problem`): a :class:`~teachgrad.jit.ir.Graph`, the graph it was given
left as it was (the compiler keeps it: ``explain()`` reports each pass's before and
after), the same inputs in the same order, every reference naming a node before it,
one output node, last, with the outputs and in-place writes it had. It cannot check
that the values are the same: the exercise's checker runs the graph for that.

A compiled function remembers which passes were plugged when it compiled
(:func:`plugged_guard`): after a plug or an unplug it compiles again, and ``explain()``
says why. When nothing is plugged a pass pays one attribute read (``part.fn is None``).
"""
from __future__ import annotations

import functools
import itertools
import weakref
from typing import Any, Callable

from ..autograd import parts
from ..autograd.parts import Part
from .guards import Guard
from .ir import OPCODES, Graph, Ref, TensorMeta, refs_in

Pass = Callable[[Graph], Graph]

RECEIVES = "graph: a teachgrad.jit.Graph (read it; do not change it)"
RETURNS = ("a new Graph computing the same values: the same placeholders in the same order, "
           "each reference naming a node before it, one output node, last")

# What the guard of a compiled function reads: one string saying which learner's
# functions the compile parts run now ("" while every pass is the engine's own).
PLUGGED: dict[str, str] = {"passes": ""}
_PASS_PARTS: list[Part] = []
_SERIAL: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
_NEXT_SERIAL = itertools.count(1)


def replaceable(name: str) -> Callable[[Pass], Pass]:
    """Declare the decorated engine pass as the part ``name``; the function it returns runs
    the learner's pass while one is plugged, the engine's otherwise."""
    def declare(engine: Pass) -> Pass:
        part = parts.declare(name, receives=RECEIVES, returns=RETURNS, engine=engine,
                             install=lambda fn: _note_plugged(part, fn))

        @functools.wraps(engine)
        def run_pass(graph: Graph) -> Graph:
            if part.fn is None:
                return engine(graph)
            return _learners_pass(part, graph)
        run_pass.part = part  # type: ignore[attr-defined]
        _PASS_PARTS.append(part)
        return run_pass
    return declare


def _learners_pass(part: Part, graph: Graph) -> Graph:
    """Run the plugged pass; refuse a result the compiler cannot use."""
    before = fingerprint(graph)
    got = part.call(graph)
    problem = graph_problem(got, graph, before)
    if problem is not None:
        raise part.reject(*problem)
    return got


def _note_plugged(changed: Part, fn: Callable | None) -> None:
    """Called on every plug (``fn``) and unplug (None) of a compile part, just before the
    part's ``fn`` changes: write down which learner's functions the passes run from now on."""
    now = [(p.name, fn if p is changed else p.fn) for p in _PASS_PARTS]
    PLUGGED["passes"] = "; ".join(f"{name} = {getattr(f, '__name__', 'a function')} (#{_serial(f)})"
                                  for name, f in now if f is not None)


def plugged_now() -> str:
    """Which learner's functions run as compile parts now ("" when none), e.g.
    ``compile.eliminate_dead_code = dead_code_elimination (#1)``. The number tells two
    functions of one name apart (a pass fixed and plugged again compiles again)."""
    return PLUGGED["passes"]


def _serial(fn: Any) -> int:
    """A number for ``fn``, never given to another function (even after ``fn`` is gone)."""
    try:
        if fn not in _SERIAL:
            _SERIAL[fn] = next(_NEXT_SERIAL)
        return _SERIAL[fn]
    except TypeError:  # (an object that takes no weak reference: its id, while it lives)
        return id(fn)


class PluggedPassesGuard(Guard):
    """The guard that a compiled graph was made by the passes that run now."""

    def __init__(self) -> None:
        super().__init__("compiler passes plugged with tg.exercises.plug", plugged_now,
                         plugged_now(), lambda a, b: a == b, ("entry", PLUGGED, "passes"))

    def shown(self) -> str:
        return _show_plugged(self.expected)

    def why(self) -> str:
        return (f"{self.description}: was {_show_plugged(self.expected)}, "
                f"now {_show_plugged(plugged_now())}")


def _show_plugged(value: str) -> str:
    return value or "none (the engine's own passes)"


def plugged_guard() -> Guard:
    """A guard that holds while the same passes are plugged as now."""
    return PluggedPassesGuard()


# -- what a pass must return ---------------------------------------------------------------

def fingerprint(graph: Graph) -> tuple:
    """Everything of ``graph`` a pass could change in place, to compare before and after."""
    return (tuple((id(n), n.name, n.op, id(n.target), repr(n.args), repr(n.kwargs), n.meta,
                   n.multi) for n in graph.nodes),
            tuple((k, id(v)) for k, v in graph.constants.items()))


def graph_problem(got: Any, given: Graph, before: tuple) -> tuple[str, str] | None:
    """``(what came back, what was expected)`` when ``got`` is no graph the compiler can
    use after a pass was given ``given`` (whose :func:`fingerprint` was ``before``)."""
    if not isinstance(got, Graph):
        return (f"a {type(got).__name__}",
                "a teachgrad.jit.Graph (g = graph.copy(), change g, return g)")
    if fingerprint(given) != before:
        return ("a graph, after changing the graph it was given",
                "the given graph left as it was: the compiler keeps the graph before each "
                "pass. Work on a copy: g = graph.copy()")
    return _inputs_problem(got, given) or _structure_problem(got) or _outputs_problem(got, given)


def _inputs_problem(got: Graph, given: Graph) -> tuple[str, str] | None:
    want = [(n.name, n.target) for n in given.placeholders]
    have = [(n.name, n.target) for n in got.placeholders]
    if have != want:
        return (f"a graph whose inputs are {[n for n, _ in have]}",
                f"the inputs {[n for n, _ in want]} in that order: placeholders are the "
                "function's arguments, kept even when nothing reads them")
    return None


def _structure_problem(got: Graph) -> tuple[str, str] | None:
    """Opcodes, unique names, references to earlier nodes, one output node last."""
    outputs_of: dict[str, int | None] = {}  # node name -> its outputs (None: one, no index)
    for i, n in enumerate(got.nodes):
        where = f"a graph whose node {i} ({getattr(n, 'name', n)!r})"
        if not isinstance(getattr(n, "op", None), str) or n.op not in OPCODES:
            return f"{where} is not a Node with an opcode", f"Nodes with an opcode of {OPCODES}"
        if n.name in outputs_of:
            return f"{where} has the name of an earlier node", "unique node names"
        if n.op == "output" and i != len(got.nodes) - 1:
            return f"{where} is an output node before the end", "one output node, last"
        for r in refs_in((n.args, n.kwargs)):
            if r.node not in outputs_of:
                return (f"{where} reads {r.node!r}, which is not a node before it",
                        "every reference to name a node that is still in the graph, earlier "
                        "(when you remove a node, point its readers at the node that replaces it)")
            if (r.index is None) != (outputs_of[r.node] is None):
                return (f"{where} reads {r!r}", f"an index exactly where {r.node!r} returns "
                        "several values (keep each Ref's index)")
        if n.op == "output":
            continue
        if n.op == "get_attr" and n.target not in got.constants:
            return (f"{where} reads the constant {n.target!r}, not in graph.constants",
                    "each get_attr node's target to be a key of graph.constants")
        if not n.meta or not all(isinstance(m, TensorMeta) for m in n.meta):
            return f"{where} has no TensorMeta", "each value node to keep its meta"
        outputs_of[n.name] = len(n.meta) if n.multi else None
    if not got.nodes or got.nodes[-1].op != "output":
        return "a graph without an output node at the end", "one output node, last"
    return None


def _outputs_problem(got: Graph, given: Graph) -> tuple[str, str] | None:
    """The same number of outputs, each shaped as before, and the same in-place writes."""
    def described(g: Graph) -> list:
        out = g.output.args[0] if g.output.args else ()
        refs = out if isinstance(out, tuple) else (out,)
        return [g.node(r.node).meta[r.index or 0] if isinstance(r, Ref) else r for r in refs]
    if described(got) != described(given):
        return (f"a graph whose outputs are {_metas(described(got))}",
                f"the outputs {_metas(described(given))}, as the graph it was given returns")
    if [t for t, _ in got.writes] != [t for t, _ in given.writes]:
        return ("a graph that writes other tensors in place",
                f"the writes of the graph it was given ({[t for t, _ in given.writes]})")
    return None


def _metas(values: list) -> str:
    return ", ".join(f"{m.dtype} {list(m.shape)}" if isinstance(m, TensorMeta) else repr(m)
                     for m in values) or "none"


__all__ = ["PLUGGED", "PluggedPassesGuard", "fingerprint", "graph_problem", "plugged_guard",
           "plugged_now", "replaceable"]

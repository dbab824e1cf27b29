"""Compiler passes: each takes a graph and returns a new, smaller or faster one.

* :func:`eliminate_dead_code`   drop operations whose results nobody reads;
* :func:`eliminate_common_subexpressions`   compute ``x * 2`` once even if the code
  wrote it twice;
* :func:`fold_constants`   run, at compile time, operations that read only constants
  (never parameters that want a gradient: they change between calls);
* :func:`fuse_elementwise`   merge chains of elementwise operations into one
  generated kernel (:mod:`teachgrad.jit.codegen`), which reads each input once and
  writes each output once instead of a whole array per operation.

Every pass leaves the input graph untouched, so a learner can print the graph
before and after each one and compare node counts (:func:`optimise` does that).

Each pass is also a replaceable part of the engine (:mod:`teachgrad.jit.pass_parts`):
``compile.eliminate_dead_code``, ``compile.eliminate_common_subexpressions``,
``compile.fold_constants``, ``compile.fuse_elementwise``. While a learner's pass is
plugged into one (``tg.exercises.plug``), calling the pass here runs the learner's, so
``tg.compile`` compiles with it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..autograd import grad_mode
from ..tensor import Tensor
from .codegen import fusible, make_fused_function
from .ir import Graph, Node, Ref, map_refs, refs_in
from .pass_parts import replaceable


def _replace_uses(graph: Graph, renames: dict[str, str]) -> None:
    """Point every reference to a node in ``renames`` at its replacement instead."""
    def swap(r: Ref) -> Ref:
        return Ref(renames[r.node], r.index) if r.node in renames else r
    for n in graph.nodes:
        n.args = map_refs(n.args, swap)
        n.kwargs = map_refs(n.kwargs, swap)


@replaceable("compile.eliminate_dead_code")
def eliminate_dead_code(graph: Graph) -> Graph:
    """Operations and constants whose values no node reads are removed."""
    g = graph.copy()
    changed = True
    while changed:
        users = g.users()
        dead = [n for n in g.nodes if n.op in ("call_function", "get_attr") and not users[n.name]]
        changed = bool(dead)
        g.nodes = [n for n in g.nodes if n not in dead]
    used = {n.target for n in g.nodes if n.op == "get_attr"} | {t for t, _ in g.writes}
    g.constants = {k: v for k, v in g.constants.items() if k in used}
    return g


@replaceable("compile.eliminate_common_subexpressions")
def eliminate_common_subexpressions(graph: Graph) -> Graph:
    """Two nodes doing the same operation on the same values become one."""
    g = graph.copy()
    seen: dict[str, str] = {}
    renames: dict[str, str] = {}
    kept = []
    for n in g.nodes:
        n.args = map_refs(n.args, lambda r: Ref(renames.get(r.node, r.node), r.index))
        n.kwargs = map_refs(n.kwargs, lambda r: Ref(renames.get(r.node, r.node), r.index))
        if n.op == "get_attr":
            key = f"get_attr {n.target}"
        elif n.op == "call_function":
            key = f"{n.target.__module__}.{n.target.__qualname__} {n.args!r} {n.kwargs!r}"
        else:
            kept.append(n)
            continue
        if key in seen:
            renames[n.name] = seen[key]
        else:
            seen[key] = n.name
            kept.append(n)
    g.nodes = kept
    return g


@replaceable("compile.fold_constants")
def fold_constants(graph: Graph) -> Graph:
    """Operations on constants only are run now; their result becomes a new constant.

    A parameter that requires grad is not a constant here: the optimizer changes it
    between calls, and its gradient must flow through the operations that read it.
    Nor is a tensor the function itself writes in place (a BatchNorm's running mean in
    training). A captured tensor that is folded is marked ``baked``: a compiled function
    guards its version, and compiles again when it is changed in place.
    """
    g = graph.copy()
    written = {t for t, _ in g.writes}
    known: dict[str, Tensor] = {}  # node name -> value, for nodes whose value is fixed
    source: dict[str, set[str]] = {}  # node name -> the captured constants it was computed from
    for n in g.nodes:
        value = g.constants.get(n.target) if n.op == "get_attr" else None
        if value is not None and not value.requires_grad and n.target not in written:
            known[n.name] = value
            source[n.name] = {n.target} & g.captured
    nodes = []
    for n in g.nodes:
        refs = refs_in((n.args, n.kwargs))
        if n.op == "call_function" and not n.multi and refs and all(r.node in known for r in refs):
            with grad_mode.no_grad():
                value = n.target._apply(*map_refs(n.args, lambda r: known[r.node]),
                                        **map_refs(n.kwargs, lambda r: known[r.node]))
            target = g.constant_name(f"folded_{n.name}")
            g.constants[target] = value
            read = set().union(*(source[r.node] for r in refs))
            g.baked |= read
            n = Node(n.name, "get_attr", target, meta=n.meta)
            known[n.name], source[n.name] = value, read
        nodes.append(n)
    g.nodes = nodes
    return eliminate_dead_code(g)  # the constants the folded nodes read may now be unused


@replaceable("compile.fuse_elementwise")
def fuse_elementwise(graph: Graph) -> Graph:
    """Groups of elementwise operations on same-shaped values become one fused node each.

    A node joins the group of one of its inputs when it is fusible with it (same
    shape, dtype and device; see :func:`teachgrad.jit.codegen.fusible`) and none of
    its other inputs is computed from that group (that would need the group's
    result before the group has finished: a cycle).
    """
    g = graph.copy()
    group_of: dict[str, int] = {}  # node name -> group number
    upstream: dict[str, set[int]] = {}  # node name -> groups its value depends on
    groups: list[list[Node]] = []
    for n in g.nodes:
        refs = refs_in((n.args, n.kwargs))
        deps = set()
        for r in refs:
            deps |= upstream.get(r.node, set())
            if r.node in group_of:
                deps.add(group_of[r.node])
        upstream[n.name] = deps
        if n.op != "call_function" or not fusible(n, g):
            continue
        choice = None
        for r in refs:
            gid = group_of.get(r.node)
            if gid is None or groups[gid][0].meta != n.meta:
                continue
            others = [o for o in refs if group_of.get(o.node) != gid]
            if all(gid not in upstream.get(o.node, set()) for o in others):
                choice = gid
                break
        if choice is None:
            choice = len(groups)
            groups.append([])
        groups[choice].append(n)
        group_of[n.name] = choice
    for members in groups:
        if len(members) >= 2:
            _replace_group(g, members)
    return g


def _replace_group(g: Graph, members: list[Node]) -> None:
    """Swap ``members`` for one node calling a generated fused Function."""
    names = {m.name for m in members}
    users = g.users()
    outputs = [m.name for m in members if any(u not in names for u in users[m.name])]
    if not outputs:  # nothing outside the group reads it (dead code left in): drop it
        g.nodes = [n for n in g.nodes if n.name not in names]
        return
    inputs: list[Ref] = []
    for m in members:
        for r in refs_in(m.args):
            if r.node not in names and r not in inputs:
                inputs.append(r)
    fused = make_fused_function(*_with_generated_names(members, inputs, outputs))
    name = g.unique_name("fused_" + "_".join(m.name for m in members[:3]))
    meta = tuple(members[0].meta for _ in outputs)
    node = Node(name, "call_function", fused, tuple(inputs), {}, tuple(m[0] for m in meta),
                multi=len(outputs) > 1)
    last = max(g.nodes.index(m) for m in members)
    g.nodes.insert(last + 1, node)
    g.nodes = [n for n in g.nodes if n.name not in names]
    _rewire(g, outputs, name)
    g.nodes = _in_dependency_order(g.nodes)


def _with_generated_names(members: list[Node], inputs: list[Ref],
                          outputs: list[str]) -> tuple[list[Node], list[Ref], list[str]]:
    """Copies of a group's nodes named after their operation (``mul, add, mul_1, ...``), and
    its inputs ``in0, in1, ...``: the kernel's source is written from these names, never
    from the graph's own (which may come from a file, or be any string a user chose)."""
    names: dict[str, str] = {}
    for m in members:
        base = m.target.__name__.lower()  # an engine operation's name (fusible ones only)
        taken = sum(1 for n in names.values() if n == base or n.startswith(base + "_"))
        names[m.name] = base if not taken else f"{base}_{taken}"
    renamed_inputs = {r: Ref(f"in{i}") for i, r in enumerate(inputs)}

    def rename(r: Ref) -> Ref:
        return renamed_inputs[r] if r in renamed_inputs else Ref(names[r.node], r.index)
    copies = [Node(names[m.name], m.op, m.target, map_refs(m.args, rename), dict(m.kwargs),
                   m.meta, m.multi) for m in members]
    return copies, list(renamed_inputs.values()), [names[o] for o in outputs]


def _in_dependency_order(nodes: list[Node]) -> list[Node]:
    """``nodes`` reordered as little as possible so that every node comes after the nodes
    it reads (a node that read a group member now reads the fused node, placed later)."""
    by_name = {n.name: n for n in nodes}
    done: set[str] = set()
    order: list[Node] = []

    def emit(n: Node) -> None:
        if n.name in done:
            return
        done.add(n.name)
        for r in refs_in((n.args, n.kwargs)):
            emit(by_name[r.node])
        order.append(n)
    for n in nodes:
        emit(n)
    return order


def _rewire(g: Graph, outputs: list[str], fused: str) -> None:
    """References to a group's outputs now read the fused node's outputs."""
    where = {name: i for i, name in enumerate(outputs)}
    single = len(outputs) == 1

    def swap(r: Ref) -> Ref:
        if r.node not in where:
            return r
        return Ref(fused, None if single else where[r.node])
    for n in g.nodes:
        if n.name != fused:
            n.args = map_refs(n.args, swap)
            n.kwargs = map_refs(n.kwargs, swap)


@dataclass
class PassReport:
    name: str
    before: dict[str, int]
    after: dict[str, int]
    graph: Graph
    yours: str = ""  # the learner's function that ran as this pass (plugged), if any

    def __str__(self) -> str:
        b, a = self.before["call_function"], self.after["call_function"]
        c, d = self.before["get_attr"], self.after["get_attr"]
        by = f"   yours: {self.yours}" if self.yours else ""
        return f"{self.name:<34} operations {b:>3} -> {a:<3}  constants {c:>3} -> {d}{by}"


DEFAULT_PASSES: tuple[Callable[[Graph], Graph], ...] = (
    eliminate_dead_code, eliminate_common_subexpressions, fold_constants, fuse_elementwise,
)


def optimise(graph: Graph, passes: Any = DEFAULT_PASSES) -> tuple[Graph, list[PassReport]]:
    """Run ``passes`` in order; the final graph and what each pass changed."""
    reports = []
    for p in passes:
        new = p(graph)
        reports.append(PassReport(getattr(p, "__name__", type(p).__name__), graph.counts(),
                                  new.counts(), new, _plugged_name(p)))
        graph = new
    return graph, reports


def _plugged_name(p: Callable) -> str:
    """The name of the learner's function that runs as pass ``p`` now ("" if none)."""
    part = getattr(p, "part", None)
    if part is None or part.fn is None:
        return ""
    return getattr(part.fn, "__name__", "a plugged function")

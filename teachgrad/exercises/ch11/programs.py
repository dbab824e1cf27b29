"""Random programs for the compiler-pass exercises of chapter 11, drawn by hypothesis.

A *recipe* is plain data that :func:`program` turns into a function of tensors: a few
inputs (some never read), steps that each apply one operation to earlier values (unary,
binary, a number, a reduction over dim 0 with or without keepdim, a two-output
``max``/``min``, a captured constant, a parameter that requires grad), blocks of steps
computed again (common subexpressions: the same operations on the same values), and the
values it returns (the rest is dead code). :func:`code` writes the recipe as the Python
a learner would read, for the checker's messages.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad.jit import Graph, Node, Ref
from teachgrad.jit.ir import map_refs

SHAPE = (2, 3)
#: numbers a step multiplies by: 0.0 and -0.0 are equal in Python, not in their results
SCALES = (2.0, 0.5, 0.0, -0.0, -1.0)

#: operation -> (how it reads as code, what it computes from a, b, a number, the captured tensors)
OPS: dict[str, tuple[str, Callable]] = {
    "exp": ("{a}.exp()", lambda a, b, s, c: a.exp()),
    "tanh": ("{a}.tanh()", lambda a, b, s, c: a.tanh()),
    "sigmoid": ("{a}.sigmoid()", lambda a, b, s, c: a.sigmoid()),
    "relu": ("{a}.relu()", lambda a, b, s, c: a.relu()),
    "neg": ("-{a}", lambda a, b, s, c: -a),
    "add": ("{a} + {b}", lambda a, b, s, c: a + b),
    "sub": ("{a} - {b}", lambda a, b, s, c: a - b),
    "mul": ("{a} * {b}", lambda a, b, s, c: a * b),
    "scale": ("{a} * {s}", lambda a, b, s, c: a * s),
    "sum": ("{a}.sum(dim=0)", lambda a, b, s, c: a.sum(dim=0)),
    "sum keepdim": ("{a}.sum(dim=0, keepdim=True)", lambda a, b, s, c: a.sum(dim=0, keepdim=True)),
    "max": ("{a}.max(dim=0).values", lambda a, b, s, c: a.max(dim=0).values),
    "min": ("{a}.min(dim=0).values", lambda a, b, s, c: a.min(dim=0).values),
    "times constant": ("{a} * constant", lambda a, b, s, c: a * c[0]),
    "plus weight": ("{a} + weight", lambda a, b, s, c: a + c[1]),
}
REDUCTIONS = ("sum", "sum keepdim", "max", "min")
KEEPS_NDIM = ("sum keepdim",)


def recipes(st: Any, repeats: bool) -> Any:
    """The hypothesis strategy of recipes (``repeats``: at least one block computed again)."""
    step = st.tuples(st.sampled_from(sorted(OPS)), st.integers(0, 99), st.integers(0, 99),
                     st.sampled_from(SCALES))
    block = st.tuples(st.integers(0, 99), st.integers(1, 3))
    return st.tuples(st.integers(1, 3), st.lists(step, min_size=1, max_size=10),
                     st.lists(block, min_size=int(repeats), max_size=3),
                     st.lists(st.integers(0, 99), min_size=1, max_size=2), st.booleans())


def resolve(recipe: tuple) -> tuple[int, list[tuple], list[int]]:
    """The recipe with absolute value numbers: ``(inputs, steps (op, i, j, number), outputs)``;
    a reduction of a 0-d value becomes ``tanh``, a repeated block reads what the original did
    (and its own earlier steps where the original read its earlier steps)."""
    n_inputs, drawn, blocks, outputs, _ = recipe
    ndims = [len(SHAPE)] * n_inputs
    steps: list[tuple] = []

    def add(op: str, i: int, j: int, s: float) -> None:
        if op in REDUCTIONS and ndims[i] == 0:
            op = "tanh"
        steps.append((op, i, j, s))
        reduced = ndims[i] - (op in REDUCTIONS and op not in KEEPS_NDIM)
        ndims.append(max(reduced, ndims[j]) if op in ("add", "sub", "mul") else reduced)

    for op, i, j, s in drawn:
        add(op, i % len(ndims), j % len(ndims), s)
    for start, length in blocks:
        first = start % len(steps)
        copies: dict[int, int] = {}
        for op, i, j, s in steps[first:first + length]:
            copies[n_inputs + len(copies) + first] = len(ndims)
            add(op, copies.get(i, i), copies.get(j, j), s)
    return n_inputs, steps, [k % len(ndims) for k in outputs]


def program(recipe: tuple) -> Callable:
    """The function a recipe describes (a captured constant and weight, fixed per recipe)."""
    n_inputs, steps, outputs = resolve(recipe)
    rng = np.random.default_rng(len(steps))
    captured = (tg.tensor(rng.normal(size=SHAPE[-1]).astype(np.float32)),
                tg.tensor(rng.normal(size=SHAPE[-1]).astype(np.float32), requires_grad=True))

    def recipe_program(*inputs: tg.Tensor) -> Any:
        values = list(inputs)
        for op, i, j, s in steps:
            values.append(OPS[op][1](values[i], values[j], s, captured))
        result = tuple(values[k] for k in outputs)
        return result[0] if len(result) == 1 else result
    recipe_program.n_inputs = n_inputs  # type: ignore[attr-defined]
    return recipe_program


def inputs(recipe: tuple, seed: int = 0) -> tuple[tg.Tensor, ...]:
    rng = np.random.default_rng(seed)
    return tuple(tg.tensor(rng.normal(size=SHAPE).astype(np.float32)) for _ in range(recipe[0]))


def code(recipe: tuple) -> str:
    """The recipe as one line of code: ``v0, v1 = inputs; v2 = v0 * v1; ...; return v2``."""
    n_inputs, steps, outputs = resolve(recipe)
    lines = [", ".join(f"v{i}" for i in range(n_inputs)) + " = inputs"]
    for k, (op, i, j, s) in enumerate(steps):
        lines.append(f"v{n_inputs + k} = " + OPS[op][0].format(a=f"v{i}", b=f"v{j}", s=s))
    lines.append("return " + ", ".join(f"v{k}" for k in outputs))
    return "; ".join(lines)


def split_constant_reads(graph: Graph) -> Graph:
    """``graph`` with a second ``get_attr`` node for each constant read by several nodes
    (the later readers read it there): two nodes that read one value, as a loaded or
    hand-made graph may have them."""
    g = graph.copy()
    users = g.users()
    for n in [n for n in g.nodes if n.op == "get_attr" and len(users[n.name]) > 1]:
        again = Node(g.unique_name(n.name + "_again"), "get_attr", n.target, meta=n.meta)
        later = g.node(users[n.name][-1])
        g.nodes.insert(g.nodes.index(later), again)

        def swap(r: Ref, old: str = n.name, new: str = again.name) -> Ref:
            return Ref(new, r.index) if r.node == old else r
        later.args, later.kwargs = map_refs(later.args, swap), map_refs(later.kwargs, swap)
    return g

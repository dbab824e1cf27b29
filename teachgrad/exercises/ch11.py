"""Checkers for chapter 11, *Static graphs and compilers*: a compiler pass, a traceable
rewrite of a data-dependent ``if``, and the pros and cons of static and dynamic graphs."""
from __future__ import annotations

import random
import warnings
from typing import Callable

import numpy as np

import teachgrad as tg
from teachgrad.jit import Graph, TracerWarning, TracingError
from teachgrad.jit.interpreter import run
from teachgrad.jit.traced import trace_graph

from .core import Feedback, Mismatch, Test, check, expect_close, expect_true, to_numpy

# -- 11.1 dead-code elimination ------------------------------------------------------------

UNARY = ("exp", "tanh", "sigmoid", "relu", "neg")


def random_program(seed: int, use_y: bool = True) -> tuple[Callable, int, int]:
    """A function of two tensors with a random live chain and random dead chains
    (``use_y=False``: the second input is never read, but stays an input).

    Returns the function, its number of live operations and its number of dead ones.
    """
    rng = random.Random(seed)
    steps = []  # (kind, arguments) in order; the last live value is returned
    live_ops = dead_ops = 0
    for _ in range(rng.randint(2, 4)):
        steps.append(("live", rng.choice(UNARY)))
        live_ops += 1
        if rng.random() < 0.8:  # a dead chain hanging off the live value
            length = rng.randint(1, 3)
            steps.append(("dead", [rng.choice(UNARY) for _ in range(length)]))
            dead_ops += length
    steps.append(("mix", None))
    live_ops += 1

    def program(x, y):
        value = x
        for kind, what in steps:
            if kind == "live":
                value = getattr(value, what)()
            elif kind == "dead":
                unused = value
                for op in what:
                    unused = getattr(unused, op)()  # computed, never used again
            elif use_y:
                value = value * y
            else:
                value = value * 2.0
        return value
    return program, live_ops, dead_ops


def _reference_dce(graph: Graph) -> Graph:
    g = graph.copy()
    while True:
        users = g.users()
        dead = [n for n in g.nodes if n.op == "call_function" and not users[n.name]]
        if not dead:
            return g
        g.nodes = [n for n in g.nodes if n not in dead]


def check_dead_code_elimination(dead_code_elimination: Callable) -> Feedback:
    """Exercise 11.1: remove every operation whose value nobody reads, repeatedly."""

    def make(seed: int, shape: tuple, use_y: bool) -> Test:
        def run_test() -> None:
            program, live_ops, dead_ops = random_program(seed, use_y)
            x, y = tg.randn(*shape), tg.randn(*shape)
            graph = trace_graph(program, (x, y))
            before = [n.name for n in graph.nodes]
            result = dead_code_elimination(graph)
            expect_true(isinstance(result, Graph), f"returned a {type(result).__name__}, not a Graph",
                        hint="return the new graph (e.g. g = graph.copy(), change g, return g)")
            expect_true([n.name for n in graph.nodes] == before,
                        "the graph passed in was changed",
                        hint="a pass leaves its input alone: work on graph.copy()")
            holders = [n.name for n in result.nodes if n.op == "placeholder"]
            expect_true(holders == ["x", "y"], f"the inputs are now {holders}, expected ['x', 'y']",
                        hint="never remove placeholders: they are the function's arguments, even "
                             "when unused")
            got_ops = [n.name for n in result.nodes if n.op == "call_function"]
            want_ops = [n.name for n in _reference_dce(graph).nodes if n.op == "call_function"]
            if got_ops != want_ops:
                hint = "remove call_function nodes with no users (graph.users())"
                if len(got_ops) > len(want_ops):
                    hint = ("removing a dead node can make the node it read dead too: repeat "
                            "until a round removes nothing")
                elif len(got_ops) < len(want_ops):
                    hint = ("a node read by the output node, or by a live node, is live: "
                            "keep everything somebody reads")
                raise Mismatch(f"the operations left ({live_ops} live, {dead_ops} dead in this "
                               "program)", want_ops, got_ops, hint)
            a, b = tg.randn(*shape), tg.randn(*shape)
            expect_close(run(result, (a, b)), program(a, b), what="the pruned graph's output",
                         hint="the graph must still compute the same function")
        reads = "x and y" if use_y else "x only"
        return Test(f"a random program (seed {seed}, reads {reads}) on {list(shape)} tensors", run_test)

    seeds = [1, 2] + [random.randrange(1000, 10**6) for _ in range(3)]
    return check("11.1", [make(s, (3,) if i % 2 else (2, 3), use_y=i != 1) for i, s in enumerate(seeds)],
                 candidate=dead_code_elimination,
                 solved="your pass removes dead chains completely, keeps the inputs, and the "
                        "graph still computes the same values.")


# -- 11.2 a data-dependent choice the trace can keep ----------------------------------------

def eager_choice(x: tg.Tensor) -> tg.Tensor:
    """The eager version: an ``if`` on a value (a trace bakes one branch in)."""
    if x.sum() > 0:
        return x.tanh()
    return x * 0.5


def check_traceable_choice(traceable_choice: Callable) -> Feedback:
    """Exercise 11.2: the same function as ``eager_choice``, correct under tracing."""

    def make(example_sign: float, seed: int) -> Test:
        def run_test() -> None:
            rng = np.random.default_rng(seed)
            example = tg.tensor(np.abs(rng.normal(size=4)).astype(np.float32) * example_sign)
            with warnings.catch_warnings():
                warnings.simplefilter("error", TracerWarning)
                try:
                    graph = trace_graph(traceable_choice, (example,))
                except TracerWarning:
                    raise Mismatch("tracing warned that a branch was baked in", "no warning",
                                   "a TracerWarning", "no Python if on a tensor: compute both "
                                   "branches and pick with tg.where(x.sum() > 0, ...)") from None
                except TracingError as e:
                    raise Mismatch("tracing stopped at a graph break", "a graph",
                                   str(e).split(".")[0], "no .item(): keep the test as a tensor "
                                   "(x.sum() > 0) and pass it to tg.where") from None
            results = []
            for sign in (1.0, -1.0):
                values = np.abs(rng.normal(size=4).astype(np.float32)) * sign
                x = tg.tensor(values)
                swapped = np.tanh(values) if sign < 0 else values * np.float32(0.5)
                got = run(graph, (x,))
                results.append((sign, x, got, np.allclose(to_numpy(got), swapped, rtol=1e-5)))
            both_swapped = all(r[3] for r in results)
            for sign, x, got, _ in results:
                hint = ("the branches are swapped: tg.where(cond, when_true, when_false)"
                        if both_swapped else "tanh(x) when x.sum() > 0, else x * 0.5")
                expect_close(got, eager_choice(x), what=f"the traced graph's output on an input "
                             f"with sum {'>' if sign > 0 else '<'} 0", rtol=1e-5, hint=hint)
        return Test(f"traced on an input whose sum is {'positive' if example_sign > 0 else 'negative'}, "
                    "then run on both kinds", run_test)

    return check("11.2", [make(1.0, 0), make(-1.0, 1), make(1.0, random.randrange(10**6))],
                 candidate=traceable_choice,
                 solved="one graph, right for every input: the choice is now data in the graph, "
                        "not Python control flow.")


# -- 11.3 static or dynamic ------------------------------------------------------------------

#: The course notes' pros and cons: which kind of graph each statement is true of.
CLAIMS = {
    "less framework overhead per operation, since the graph is built once": "static",
    "the whole graph can be optimised before it runs (fusion, constant folding)": "static",
    "the graph can be saved and run without the Python code that built it": "static",
    "the code you write is the code that runs: easy to debug, print and profile": "dynamic",
    "each iteration may compute something different, chosen by ordinary Python": "dynamic",
    "building and running the graph are intertwined, so the Python code must stay around": "dynamic",
    "much indirection between the code you write and the code that runs": "static",
    "a Python if on a tensor's value is baked in when the graph is captured": "static",
}


def check_graph_kind(graph_kind: Callable[[str], str]) -> Feedback:
    """Exercise 11.3: for each statement, ``"static"`` or ``"dynamic"``."""
    claims = list(CLAIMS.items())
    random.shuffle(claims)  # asked in an order the learner has not seen

    def make(claim: str, kind: str) -> Test:
        def run_test() -> None:
            got = graph_kind(claim)
            expect_true(got in ("static", "dynamic"), f"answered {got!r}",
                        hint="answer with the string 'static' or 'dynamic'")
            if got != kind:
                why = ("static graphs are captured once and then optimised, saved or run "
                       "without Python" if kind == "static" else
                       "dynamic graphs are rebuilt by running the Python code every time")
                raise Mismatch("which kind of graph this is true of", kind, got, why)
        return Test(repr(claim), run_test)

    return check("11.3", [make(c, k) for c, k in claims], candidate=graph_kind,
                 solved="you can place each pro and con: static graphs trade flexibility for "
                        "whole-program optimisation and deployment.")

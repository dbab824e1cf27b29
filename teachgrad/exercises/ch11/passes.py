"""Checkers for chapter 11's compiler passes, which then run inside ``tg.compile``:
dead-code elimination (11.3) and common-subexpression elimination (11.4).

Each checker runs the learner's pass on fixed programs that show one trap each, on
random programs drawn by hypothesis (:mod:`.programs`), and compares the graph it
returns with the engine's own pass, node by node, then runs both graphs. Last, the pass
is plugged into its part (``compile.eliminate_dead_code``,
``compile.eliminate_common_subexpressions``) and a small model is compiled with it:
outputs and gradients must equal eager's, and be bit for bit those of the engine's compile.
"""
from __future__ import annotations

import random
from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad import nn
from teachgrad.jit import Graph, passes
from teachgrad.jit.ir import refs_in
from teachgrad.jit.interpreter import run
from teachgrad.jit.pass_parts import fingerprint, graph_problem
from teachgrad.jit.traced import trace_graph

from . import programs
from ..building import plugged_workload, property_test, written_by_the_learner
from ..core import Feedback, Mismatch, Test, check, expect_close, expect_true, to_numpy
from ..withheld import withheld

DCE, CSE = "compile.eliminate_dead_code", "compile.eliminate_common_subexpressions"
KEPT = ("call_function", "get_attr")  # the nodes a pass may remove
#: how the chapter names the learner's function for each part
LEARNERS = {DCE: "dead_code_elimination", CSE: "common_subexpression_elimination"}


def _engine(part: str) -> Callable[[Graph], Graph]:
    """The engine's own pass (not the seam: a plugged pass must not answer for itself)."""
    return {DCE: passes.eliminate_dead_code, CSE: passes.eliminate_common_subexpressions}[part].part.engine


def _values(result: Any) -> list[np.ndarray]:
    return [np.asarray(to_numpy(t)) for t in (result if isinstance(result, tuple) else (result,))]


def run_learners_pass(learners_pass: Callable, graph: Graph, part: str) -> Graph:
    """The learner's pass on ``graph``: a new graph with the same inputs, or a Mismatch."""
    before = fingerprint(graph)
    attribute = part.split(".")[1]  # the pass's public name, refused while the learner's runs
    with withheld((passes, attribute, f"passes.{attribute}")), written_by_the_learner(part, LEARNERS[part]):
        got = learners_pass(graph)
    expect_true(isinstance(got, Graph), f"returned a {type(got).__name__}, not a Graph",
                hint="return the new graph (e.g. g = graph.copy(), change g, return g)")
    expect_true(fingerprint(graph) == before, "the graph passed in was changed",
                hint="a pass leaves its input alone: work on graph.copy()")
    holders = [n.name for n in got.placeholders]
    want = [n.name for n in graph.placeholders]
    expect_true(holders == want, f"the inputs are now {holders}, expected {want}",
                hint="never remove placeholders: they are the function's arguments, even when "
                     "unused")
    return got


def compare_graphs(got: Graph, graph: Graph, part: str, what: str, hint: Callable) -> None:
    """The nodes left (operations and constants) are the engine's pass's, the graph is one the
    compiler can use, and it still computes what ``graph`` computes (run on fresh inputs)."""
    want = _engine(part)(graph)
    got_nodes = [n.name for n in got.nodes if n.op in KEPT]
    want_nodes = [n.name for n in want.nodes if n.op in KEPT]
    if got_nodes != want_nodes:
        raise Mismatch(f"the operations and constants left ({what})", ", ".join(want_nodes),
                       ", ".join(got_nodes), hint(got_nodes, want_nodes, graph))
    problem = graph_problem(got, graph, fingerprint(graph))  # (references, outputs, writes)
    if problem is not None:
        raise Mismatch(f"your pass returned {problem[0]}", hint=f"expected {problem[1]}",
                       show_values=False)
    feed = tuple(tg.tensor(np.random.default_rng(7).normal(size=n.meta[0].shape).astype(np.float32))
                 for n in graph.placeholders)
    with np.errstate(all="ignore"):
        got_out, want_out = _values(run(got, feed)), _values(run(graph, feed))
    for g, w in zip(got_out, want_out):
        if g.shape != w.shape or not np.array_equal(g, w, equal_nan=True):
            raise Mismatch(f"the graph your pass returned computes other values ({what})",
                           w, g, "a pass must never change what the graph computes")


def _random_and_compiled(learners_pass: Callable, part: str, hint: Callable, drawn: str,
                         model_text: str, model: Callable[[], nn.Module]) -> list[Test]:
    """The tests both passes share: random programs (for CSE: with blocks computed again and
    constants read twice), then a model compiled with the pass plugged in."""
    repeats = part == CSE

    def compiled() -> None:
        tg.manual_seed(3)
        compiled_workload(learners_pass, part, model(), tg.randn(5, 4))
    return [property_test(f"random programs: {drawn}", lambda st: programs.recipes(st, repeats),
                          _on_recipes(learners_pass, part, hint, repeats), examples=30),
            Test(f"tg.compile with your pass plugged in: {model_text}", compiled)]


def _on_recipes(learners_pass: Callable, part: str, hint: Callable, split_reads: bool) -> Callable:
    def each(recipe: tuple) -> None:
        graph = trace_graph(programs.program(recipe), programs.inputs(recipe))
        if split_reads and recipe[4]:
            graph = programs.split_constant_reads(graph)
        try:
            got = run_learners_pass(learners_pass, graph, part)
            compare_graphs(got, graph, part, "a random program", hint)
        except Mismatch as mismatch:
            mismatch.problem += f", on the program {programs.code(recipe)}"
            raise
    return each


def _same_bits(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    for g, w in zip(got, want):
        if g.tobytes() != w.tobytes():
            raise Mismatch(f"{what} with your pass plugged in differ from the engine's compile",
                           w, g, "your pass left a graph other than the engine's pass leaves")


def compiled_workload(learners_pass: Callable, part: str, model: nn.Module, x: tg.Tensor) -> None:
    """``tg.compile(model)`` with the learner's pass plugged in: outputs (with and without
    gradients) and the parameters' gradients equal eager, bit-equal the engine's compile."""
    def outputs_and_grads(compiled: Callable) -> list[np.ndarray]:
        with tg.no_grad():
            plain = compiled(x)
        model.zero_grad()
        out = compiled(x)
        out.sum().backward()
        return _values(plain) + _values(out) + [p.grad.numpy().copy() for p in model.parameters()
                                                if p.grad is not None]
    eager = outputs_and_grads(model)
    engines = outputs_and_grads(tg.compile(model))
    with plugged_workload(part, learners_pass, "tg.compile compiled the model"):
        compiled = tg.compile(model)
        yours = outputs_and_grads(compiled)
    expect_true(len(yours) == len(eager), "the compiled model left a parameter without a gradient",
                hint="keep every operation the output depends on")
    for g, e in zip(yours, eager):
        expect_close(g, e, what="compiled model's outputs and gradients, against eager",
                     hint="the compiled graph must compute what the model computes")
    _same_bits(yours, engines, "the compiled model's outputs and gradients")
    expect_true("yours: " in compiled.explain(), "compiled.explain() does not show your pass",
                hint="plug your own function")


# -- 11.3 dead-code elimination ------------------------------------------------------------

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


def two_outputs(x: tg.Tensor, y: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor]:
    """Two outputs, a value read twice, and dead chains hanging off both."""
    a = x.exp()
    unused = (a * a).tanh().relu()  # dead, though it reads a live value twice
    b = a * a
    (y - b).sigmoid()  # dead: its result is dropped
    return b, (x - y).relu()


def _dce_hint(got: list[str], want: list[str], graph: Graph) -> str:
    left = [n for n in got if n not in want]
    if left and all(graph.node(n).op == "get_attr" for n in left):
        return ("a get_attr node (a constant or a parameter) that nobody reads is dead too: "
                "remove it like an operation")
    if left:
        return ("removing a dead node can make the node it read dead too: repeat until a "
                "round removes nothing")
    if [n for n in want if n not in got]:
        return ("a node read by the output node, or by a live node, is live: keep everything "
                "somebody reads")
    return "keep the nodes in their order"


class WithDeadCode(nn.Module):
    """The workload of 11.3: a probe layer whose result is dropped, and a dead chain."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.probe = nn.Linear(4, 8), nn.Linear(8, 3), nn.Linear(8, 2)

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        h = self.fc1(x).tanh()
        self.probe(h).relu()  # dead: the probe's result is dropped (its weights with it)
        unused = (h * 2.0).exp().sum(dim=1)  # dead
        return self.fc2(h) * 0.5


def check_dead_code_elimination(dead_code_elimination: Callable) -> Feedback:
    """Exercise 11.3: remove every operation and constant whose value nobody reads,
    repeatedly; then ``tg.compile`` runs the pass."""

    def make(seed: int, shape: tuple, use_y: bool) -> Test:
        @np.errstate(over="ignore", invalid="ignore")  # exp(exp(...)) may overflow: inf is fine
        def run_test() -> None:
            program, live_ops, dead_ops = random_program(seed, use_y)
            graph = trace_graph(program, (tg.randn(*shape), tg.randn(*shape)))
            result = run_learners_pass(dead_code_elimination, graph, DCE)
            compare_graphs(result, graph, DCE, f"{live_ops} live, {dead_ops} dead in this "
                           "program", _dce_hint)
        reads = "x and y" if use_y else "x only"
        return Test(f"a random program (seed {seed}, reads {reads}) on {list(shape)} tensors", run_test)

    def two_outputs_test() -> None:
        graph = trace_graph(two_outputs, (tg.randn(3), tg.randn(3)))
        result = run_learners_pass(dead_code_elimination, graph, DCE)
        compare_graphs(result, graph, DCE, "a tuple output", lambda *_: (
            "the output node reads a tuple of values: each one is live, and so is everything "
            "it reads"))

    seeds = [1, 2] + [random.randrange(1000, 10**6) for _ in range(3)]
    tests = [make(s, (3,) if i % 2 else (2, 3), use_y=i != 1) for i, s in enumerate(seeds)]
    tests += [Test("a program with two outputs, a value read twice and two dead chains",
                   two_outputs_test),
              *_random_and_compiled(dead_code_elimination, DCE, _dce_hint, "constants, parameters, "
                                    "two-output operations, unused inputs, dead chains",
                                    "a model with a probe layer whose result is dropped",
                                    WithDeadCode)]
    return check("11.3", tests, candidate=dead_code_elimination,
                 solved="your pass removes dead chains and constants completely, keeps the "
                        "inputs, and tg.compile compiled a model with it: same outputs and "
                        "gradients as eager.")


# -- 11.4 common-subexpression elimination ----------------------------------------------------

def repeated(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    """The chapter's repeat: ``x * 2.0 + y`` twice (merging the ``+`` needs the ``*`` merged)."""
    a = x * 2.0 + y
    b = (x * 2.0 + y).tanh()
    return b * a


def look_alike(x: tg.Tensor, y: tg.Tensor) -> tuple:
    """Pairs that look alike and are not the same call: the engine merges none of them."""
    return (x + y, y + x, x - y, y - x, 1.0 / (x * 0.0), 1.0 / (x * -0.0), x.sum(dim=0),
            x.sum(dim=0, keepdim=True), x.max(dim=0).values, x.min(dim=0).values,
            tg.cat([x, y], dim=0), tg.cat([x, y], dim=1))


def two_output_repeat(x: tg.Tensor, y: tg.Tensor) -> tuple:
    """A two-output operation computed twice, both of its outputs read."""
    first, again = x.max(dim=0), x.max(dim=0)
    return first.values + again.values * y.sum(dim=0), again.indices


_written = tg.zeros(2, 3)


def writes_a_repeat(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    """An in-place write (the output node's ``writes``) of a value computed twice."""
    doubled = (x + y) * 2.0
    _written.copy_((x + y) * 2.0)
    return doubled.tanh()


def constant_read_twice(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    return (x * _written + y * _written).exp()


SAME_CALL = ("merge two nodes only when the operation (node.target) and all its arguments "
             "(node.args, node.kwargs) are the same")


def _merged_alike(n: Any, graph: Graph) -> str:
    """Why the learner may have merged ``n`` with an earlier node the engine keeps apart."""
    earlier = graph.nodes[:graph.nodes.index(n)]
    same_op = [m for m in earlier if m.op == n.op and m.target is n.target]
    if n.op == "get_attr":
        return "two get_attr nodes hold one value only when they read the same constant (node.target)"
    if any(len(n.args) == 2 and m.args == n.args[::-1] for m in same_op):
        return ("a + b and b + a are two calls with their arguments in another order: the "
                "engine merges only the same operation on the same arguments in the same order "
                "(and b - a is not a - b)")
    if any(m.args == n.args and repr(m.args) != repr(n.args) for m in same_op):
        return ("0.0 == -0.0 in Python, but x * 0.0 and x * -0.0 differ in the sign of their "
                "zeros (1 / them: -inf against inf): compare attributes by their repr, as the engine does")
    if any(repr(m.args) == repr(n.args) and m.kwargs != n.kwargs for m in same_op):
        return ("tg.cat([x, y], dim=0) and dim=1 differ only in their keyword arguments: "
                "include node.kwargs in what you compare")
    return SAME_CALL


def _cse_hint(got: list[str], want: list[str], graph: Graph) -> str:
    merged_too_much = [graph.node(n) for n in want if n not in got]
    # the merges that caused the others (a node reading a wrongly merged one merges too)
    causes = [n for n in merged_too_much
              if not any(r.node in {m.name for m in merged_too_much} for r in refs_in(n.args))]
    hints = {_merged_alike(n, graph) for n in causes or merged_too_much}
    if len(hints) == 1:
        return hints.pop()
    if merged_too_much:
        return SAME_CALL
    missed = [n for n in got if n not in want]
    if missed and graph.node(missed[0]).op == "get_attr":
        return ("two get_attr nodes that read one constant (the same node.target) are one "
                "value: keep the first")
    if missed:
        return ("after a merge, the readers of the node you dropped read the node you kept: "
                "rename the references in each node's args and kwargs before you compare it "
                "with the earlier ones, so x * 2.0 + y computed twice merges at both steps")
    return "keep the nodes in their order"


class WithRepeats(nn.Module):
    """The workload of 11.4: a layer applied twice to the same input, a reduction repeated."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        h = self.fc(x).tanh()
        again = self.fc(x).tanh()  # the same again
        total = x.sum(dim=1, keepdim=True)
        return h * again - (self.fc(x) * 0.5 + x.sum(dim=1, keepdim=True)).sigmoid() * total


def check_common_subexpression_elimination(common_subexpression_elimination: Callable) -> Feedback:
    """Exercise 11.4: one node for each value computed more than once, exactly where the
    engine merges; then ``tg.compile`` runs the pass."""
    def on(description: str, fn: Callable, what: str, split_reads: bool = False) -> Test:
        def run_test() -> None:
            with np.errstate(divide="ignore"):  # (1 / (x * 0.0) is meant)
                graph = trace_graph(fn, (tg.randn(2, 3), tg.randn(2, 3)), side_effects=False)
            if split_reads:
                graph = programs.split_constant_reads(graph)
            got = run_learners_pass(common_subexpression_elimination, graph, CSE)
            compare_graphs(got, graph, CSE, what, _cse_hint)
        return Test(description, run_test)

    tests = [on("x * 2.0 + y computed twice, then read by two operations", repeated, "a chain repeated"),
             on("pairs that look alike: x + y and y + x, x - y and y - x, x * 0.0 and x * -0.0, "
                "sum with and without keepdim, max and min, cat on dim 0 and dim 1", look_alike,
                "nothing here is computed twice"),
             on("a two-output operation (max over a dim) computed twice, both outputs read",
                two_output_repeat, "refs with an index"),
             on("a value written in place (the output's writes) that is also computed before",
                writes_a_repeat, "the output node's writes"),
             on("one constant read by two get_attr nodes", constant_read_twice,
                "two reads of one constant", split_reads=True),
             *_random_and_compiled(common_subexpression_elimination, CSE, _cse_hint,
                                   "blocks computed again, constants read twice",
                                   "a model applying one layer twice to the same input", WithRepeats)]
    return check("11.4", tests, candidate=common_subexpression_elimination,
                 solved="your pass computes each repeated value once, keeps apart what only "
                        "looks alike, and tg.compile compiled a model with it: same outputs and "
                        "gradients as eager.")

"""Chapter 11's checkers: the notebook's own solutions pass, the learner stubs are "not solved
yet", and realistic wrong answers are rejected with feedback that says what to fix."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import teachgrad as tg
from teachgrad import nn
from teachgrad.exercises import Feedback, ch11
from teachgrad.exercises.edition import learner_stub

from notebook_solutions import define, solution_source

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "11_static_graphs_and_compilers.ipynb"


def _solution_source(name: str) -> str:
    return solution_source(NOTEBOOK.name, name)


def _define(source: str, name: str):
    return define(source, name, {"tg": tg, "np": np, "nn": nn})


EXERCISES = [("traceable_choice", ch11.check_traceable_choice, "11.1"),
             ("first_divergence", ch11.check_first_divergence, "11.2"),
             ("dead_code_elimination", ch11.check_dead_code_elimination, "11.3"),
             ("common_subexpression_elimination", ch11.check_common_subexpression_elimination,
              "11.4")]
IDS = [e[2] for e in EXERCISES]


@pytest.mark.parametrize("name, checker, number", EXERCISES, ids=IDS)
def test_reference_solution_passes(name, checker, number, capsys):
    feedback = checker(_define(_solution_source(name), name))
    assert feedback.passed, feedback.message
    assert capsys.readouterr().out.startswith(f"✅ Exercise {number} solved: ")


@pytest.mark.parametrize("name, checker, number", EXERCISES, ids=IDS)
def test_learner_stub_is_not_solved_yet(name, checker, number, capsys):
    feedback = checker(_define(learner_stub(_solution_source(name)), name))
    assert feedback.status == "not solved yet"
    assert capsys.readouterr().out == f"⏳ Exercise {number} not solved yet: fill in the cell above\n"


def wrong(feedback: Feedback, *words: str) -> None:
    assert not feedback.passed and feedback.status in ("wrong", "error"), feedback.message
    for word in words:
        assert word in feedback.message, feedback.message


# -- 11.3 ---------------------------------------------------------------------------------

def one_round(graph):
    g = graph.copy()
    users = g.users()
    g.nodes = [n for n in g.nodes if n.op != "call_function" or users[n.name]]
    return g


def in_place(graph):
    while True:
        users = graph.users()
        dead = [n for n in graph.nodes if n.op == "call_function" and not users[n.name]]
        if not dead:
            return graph
        graph.nodes = [n for n in graph.nodes if n not in dead]


def drops_unused_inputs(graph):
    g = graph.copy()
    while True:
        users = g.users()
        dead = [n for n in g.nodes if n.op != "output" and not users[n.name]]
        if not dead:
            return g
        g.nodes = [n for n in g.nodes if n not in dead]


def only_what_output_reads(graph):
    g = graph.copy()
    users = g.users()
    g.nodes = [n for n in g.nodes if n.op != "call_function" or "output" in users[n.name]]
    return g


def test_dce_one_round_only():
    wrong(ch11.check_dead_code_elimination(one_round), "repeat until a round removes nothing")


def test_dce_changing_the_input_graph():
    wrong(ch11.check_dead_code_elimination(in_place), "the graph passed in was changed",
          "work on graph.copy()")


def test_dce_removing_unused_placeholders():
    wrong(ch11.check_dead_code_elimination(drops_unused_inputs), "never remove placeholders")


def test_dce_keeping_only_what_the_output_reads():
    wrong(ch11.check_dead_code_elimination(only_what_output_reads),
          "keep everything somebody reads")


def test_dce_returning_nothing():
    wrong(ch11.check_dead_code_elimination(lambda graph: None), "returned a NoneType, not a Graph")


def test_random_programs_differ_by_seed_and_have_dead_code():
    shapes = set()
    for seed in range(6):
        program, live, dead = ch11.random_program(seed)
        shapes.add((live, dead))
        graph = tg.jit.traced.trace_graph(program, (tg.randn(3), tg.randn(3)))
        assert graph.counts()["call_function"] == live + dead
    assert len(shapes) > 2


# -- 11.1 ---------------------------------------------------------------------------------

def test_choice_with_a_python_if_is_baked_in():
    wrong(ch11.check_traceable_choice(ch11.eager_choice), "a branch was baked in", "tg.where")


def test_choice_with_item_is_a_graph_break():
    def with_item(x):
        return x.tanh() if x.sum().item() > 0 else x * 0.5
    wrong(ch11.check_traceable_choice(with_item), "tracing stopped", "no .item()")


def test_choice_with_swapped_branches():
    wrong(ch11.check_traceable_choice(lambda x: tg.where(x.sum() > 0, x * 0.5, x.tanh())),
          "the branches are swapped")


def test_choice_always_tanh():
    wrong(ch11.check_traceable_choice(lambda x: x.tanh()), "tanh(x) when x.sum() > 0, else x * 0.5")


def test_dce_keeping_dead_constants():
    def operations_only(graph):  # removes dead operations, never a get_attr node
        return in_place(graph.copy())
    wrong(ch11.check_dead_code_elimination(operations_only), "a get_attr node",
          "that nobody reads is dead too")


# -- 11.4 ---------------------------------------------------------------------------------

def cse(key=None, rename=True, keep_index=True, merge_constants=True, copy=True):
    """A common-subexpression pass with one decision changed."""
    from teachgrad.jit.ir import Ref, map_refs

    def common_subexpression_elimination(graph):
        g = graph.copy() if copy else graph
        first, replaced, kept = {}, {}, []

        def renamed(ref):
            node = replaced.get(ref.node, ref.node) if rename else ref.node
            return Ref(node, ref.index if keep_index else None)
        for n in g.nodes:
            n.args, n.kwargs = map_refs(n.args, renamed), map_refs(n.kwargs, renamed)
            if n.op == "get_attr" and merge_constants:
                k = n.target
            elif n.op == "call_function":
                k = key(n) if key else (n.target, repr(n.args), repr(n.kwargs))
            else:
                kept.append(n)
                continue
            if k in first:
                replaced[n.name] = first[k]
            else:
                first[k] = n.name
                kept.append(n)
        g.nodes = kept
        return g
    return common_subexpression_elimination


def _sorted_if_commutative(n):
    args = tuple(sorted(n.args, key=repr)) if n.target.__name__ in ("Add", "Mul") else n.args
    return n.target, repr(args), repr(n.kwargs)


@pytest.mark.parametrize("answer, says", [
    (cse(key=lambda n: (n.target, n.args, tuple(n.kwargs.items()))), "0.0 == -0.0 in Python"),
    (cse(key=_sorted_if_commutative), "a + b and b + a are two calls"),
    (cse(key=lambda n: (n.target, repr(n.args))), "include node.kwargs"),
    (cse(key=lambda n: (n.target, repr(n.args[:1]))), "merge two nodes only when"),
    (cse(rename=False), "rename the references"),
    (cse(keep_index=False), "an index exactly where"),
    (cse(merge_constants=False), "two get_attr nodes that read one constant"),
    (cse(copy=False), "work on graph.copy()"),
], ids=["tuple key", "sorted arguments", "no kwargs", "first argument only", "no renaming",
        "index dropped", "constants apart", "in place"])
def test_cse_wrong_answers_say_what_to_fix(answer, says):
    wrong(ch11.check_common_subexpression_elimination(answer), says)


def test_cse_from_the_compilers_own_pass():
    def with_the_library(graph):
        from teachgrad.jit import passes
        return passes.eliminate_common_subexpressions(graph)

    def through_the_engine(graph):
        from teachgrad.autograd import parts
        return parts.get("compile.eliminate_common_subexpressions").engine(graph)
    wrong(ch11.check_common_subexpression_elimination(with_the_library),
          "passes.eliminate_common_subexpressions")
    wrong(ch11.check_common_subexpression_elimination(through_the_engine),
          "called the engine's own eliminate_common_subexpressions")


def test_the_checkers_give_the_engine_its_passes_back():
    ch11.check_common_subexpression_elimination(cse(rename=False))
    assert tg.exercises.plugged_parts() == {}

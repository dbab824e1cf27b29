"""Compiler passes as replaceable parts: a plugged pass runs inside ``tg.compile``, what it
returns is checked, its errors name the part and the learner's line, compiled functions
compile again on plug and unplug, and the reference passes give exactly the engine's results."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest

import teachgrad as tg
from teachgrad import nn
from teachgrad.exercises import PartError, parts, plug, plugged, unplug
from teachgrad.jit import Graph, Node, passes
from teachgrad.jit.guards import GuardSet
from teachgrad.jit.ir import Ref, map_refs
from teachgrad.jit.traced import trace_graph

DCE, CSE = "compile.eliminate_dead_code", "compile.eliminate_common_subexpressions"


@pytest.fixture(autouse=True)
def _engine_parts_back():
    yield
    unplug()


# -- the chapter's reference passes, from its solution cells -------------------------------

def _solution(name: str):
    """A function defined by chapter 11's solution cell (run here, as the notebook runs it)."""
    path = Path(__file__).resolve().parents[2] / "notebooks" / "11_static_graphs_and_compilers.ipynb"
    for cell in nbformat.read(path, as_version=4).cells:
        if "solution" in cell.metadata.get("tags", []) and f"def {name}(" in cell.source:
            namespace: dict = {}
            exec(compile(cell.source, f"<{name}>", "exec"), namespace)
            return namespace[name]
    raise LookupError(name)


dead_code_elimination = _solution("dead_code_elimination")
common_subexpression_elimination = _solution("common_subexpression_elimination")


def keeps_everything(graph):
    """A 'pass' that changes nothing (a copy): dead code survives the compiler."""
    return graph.copy()


class Model(nn.Module):
    """Dead code (a probe whose result is dropped), repeats, a folded constant, a BatchNorm
    that writes its running statistics in training."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.probe, self.norm = nn.Linear(4, 6), nn.Linear(6, 2), nn.BatchNorm1d(6)
        self.register_buffer("offset", tg.tensor([0.25]))

    def forward(self, x):
        h = self.norm(self.fc(x)).tanh()
        self.probe(h).relu()  # dead
        again = self.norm.weight * 2.0 + self.offset.exp()
        return (h * (self.fc(x) * 0.5).sigmoid() + (self.fc(x) * 0.5).sigmoid()) * again


def _run(compiled, model, x):
    """Outputs without and with gradients, and the parameters' gradients."""
    with tg.no_grad():
        plain = compiled(x).numpy().copy()
    model.zero_grad()
    out = compiled(x)
    out.sum().backward()
    return [plain, out.detach().numpy().copy()] + [  # (the dead probe's: None, as in eager)
        np.array([]) if p.grad is None else p.grad.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("training", [False, True], ids=["eval", "training"])
def test_the_reference_passes_plugged_give_bit_for_bit_the_engines_compile(training):
    tg.manual_seed(0)
    model, x = Model(), tg.randn(5, 4)
    model.train(training)
    engine = tg.compile(model)
    want = _run(engine, model, x)
    state = [t.numpy().copy() for t in model.buffers()]
    with plugged(DCE, dead_code_elimination) as dce, plugged(CSE, common_subexpression_elimination) as cse:
        yours = tg.compile(model)
        got = _run(yours, model, x)
    assert dce.calls >= 2 and cse.calls >= 2  # (DCE also ends constant folding)
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()
    if training:  # the running statistics were written by both, the same way
        assert any(not np.array_equal(a, t.numpy()) for a, t in zip(state, model.buffers()))
    assert yours.graph.tabular() == engine.graph.tabular()
    lines = yours.explain().splitlines()
    assert lines[0].startswith("eliminate_dead_code ") and lines[0].endswith("   yours: dead_code_elimination")
    assert lines[1].endswith("   yours: common_subexpression_elimination")
    assert "yours" not in lines[2] + lines[3] and "yours" not in engine.explain()


def test_plugging_a_pass_changes_what_compile_runs():
    def fn(x):
        x.sum(dim=0)  # dead, and not elementwise: nothing else removes it
        return x.tanh() * 2.0

    x = tg.randn(3, 2)
    with plugged(DCE, keeps_everything):
        kept = tg.compile(fn)
        kept(x)
    dropped = tg.compile(fn)
    dropped(x)
    assert "Sum" in [n.target_name for n in kept.graph.operations()]
    assert "Sum" not in [n.target_name for n in dropped.graph.operations()]
    np.testing.assert_array_equal(kept(x).numpy(), dropped(x).numpy())
    # compiled while a pass was plugged: unplugged, it compiles again with the engine's
    assert "Sum" not in [n.target_name for n in kept.graph.operations()]
    assert kept.recompiles == [
        "guard failed: compiler passes plugged with tg.exercises.plug: was "
        f"{DCE} = keeps_everything (#{re.search('#([0-9]+)', kept.recompiles[0])[1]}), "
        "now none (the engine's own passes)"]


def test_optimise_and_a_users_pass_list_run_the_plugged_pass_too():
    graph = trace_graph(lambda x: (x * 2.0).exp() + (x * 2.0).exp(), (tg.randn(3),))
    calls = []

    def watching(g):
        calls.append(len(g.nodes))
        return common_subexpression_elimination(g)
    with plugged(CSE, watching):
        out, reports = passes.optimise(graph)
        tg.compile(lambda x: x * 2.0 + x * 2.0, passes=[passes.eliminate_common_subexpressions])(tg.randn(2))
    assert len(calls) == 2 and (reports[1].name, reports[1].yours) == ("eliminate_common_subexpressions", "watching")
    assert passes.eliminate_common_subexpressions(graph).counts() == common_subexpression_elimination(graph).counts()


def test_the_compile_parts_are_listed_with_what_they_take():
    listed = parts()
    for name in (DCE, CSE, "compile.fold_constants", "compile.fuse_elementwise"):
        assert "Graph" in listed[name].receives and "Graph" in listed[name].returns
    assert listed[DCE].engine is passes.eliminate_dead_code.part.engine


def _changes_its_input(graph):
    graph.nodes = [n for n in graph.nodes if n.op != "call_function" or n.name != "mul"]
    return graph


def _drops_an_input(graph):
    g = graph.copy()
    g.nodes = [n for n in g.nodes if n.name != "y"]
    return g


def _dangling(graph):
    g = graph.copy()
    g.nodes = [n for n in g.nodes if n.name != "mul"]
    return g


def _drops_an_index(graph):
    g = graph.copy()
    for n in g.nodes:
        n.args = map_refs(n.args, lambda r: Ref(r.node))
    return g


def _no_output(graph):
    g = graph.copy()
    g.nodes = g.nodes[:-1]
    return g


def _other_output(graph):
    g = graph.copy()
    g.output.args = (Ref("x"),)
    return g


def _output_first(graph):
    g = graph.copy()
    g.nodes = [g.nodes[-1]] + g.nodes[:-1]
    return g


def _unknown_constant(graph):
    g = graph.copy()
    g.nodes.insert(2, Node("ghost", "get_attr", "no_such_constant", meta=g.nodes[0].meta))
    return g


@pytest.mark.parametrize("bad, says", [
    (lambda graph: None, "returned a NoneType; expected a teachgrad.jit.Graph"),
    (lambda graph: graph.nodes, "returned a list; expected a teachgrad.jit.Graph"),
    (_changes_its_input, "after changing the graph it was given; expected the given graph left as it was"),
    (_drops_an_input, "whose inputs are ['x']; expected the inputs ['x', 'y'] in that order"),
    (_dangling, "reads 'mul', which is not a node before it"),
    (_drops_an_index, "reads maxdim; expected an index exactly where 'maxdim' returns several values"),
    (_no_output, "without an output node at the end"),
    (_output_first, "is an output node before the end"),
    (_other_output, "whose outputs are float32 [2, 3]; expected the outputs float32 [3]"),
    (_unknown_constant, "reads the constant 'no_such_constant', not in graph.constants"),
], ids=["None", "a list", "input changed", "input dropped", "dangling", "index dropped",
        "no output", "output first", "other output", "unknown constant"])
def test_a_result_the_compiler_cannot_use_is_refused_naming_the_part(bad, says):
    def fn(x, y):
        return (x * 2.0).tanh().max(dim=0).values + y.sum(dim=0)

    compiled = tg.compile(fn)
    x, y = tg.randn(2, 3), tg.randn(2, 3)
    plug(DCE, bad)
    with pytest.raises(PartError) as caught:
        compiled(x, y)
    message = str(caught.value)
    assert caught.value.part == DCE
    assert message.startswith(f"your {DCE} (plugged with tg.exercises.plug) returned ")
    assert says in message
    assert compiled.cache_info() == {"compiles": 0, "recompiles": 0, "hits": 0, "size": 0}
    unplug(DCE)
    np.testing.assert_allclose(compiled(x, y).numpy(), fn(x, y).numpy(), rtol=1e-6)


def test_an_exception_in_the_learners_pass_names_the_part_and_the_line():
    def broken(graph):
        g = graph.copy()
        return g.nodes[99]  # the line the message points at

    with plugged(CSE, broken), pytest.raises(PartError) as caught:
        tg.compile(lambda x: x * 2.0)(tg.randn(3))
    message = str(caught.value)
    assert message.startswith(f"in your {CSE} (plugged with tg.exercises.plug): IndexError")
    assert "line" in message and "return g.nodes[99]" in message
    assert isinstance(caught.value.__cause__, IndexError)


def test_plug_and_unplug_recompile_and_explain_says_why():
    def fn(x):
        return (x * 2.0).tanh() + (x * 2.0).tanh()

    compiled, x = tg.compile(fn), tg.randn(4)
    engine_out = compiled(x).numpy()
    engine_graph = compiled.graph
    plug(CSE, keeps_everything)
    yours_out = compiled(x).numpy()
    assert compiled.cache_info()["compiles"] == 2 and compiled.graph is not engine_graph
    why = compiled.recompiles[-1]
    assert why == ("guard failed: compiler passes plugged with tg.exercises.plug: was none (the "
                   "engine's own passes), now compile.eliminate_common_subexpressions = "
                   f"keeps_everything (#{re.search('#([0-9]+)', why)[1]})")
    assert "compiler passes plugged with tg.exercises.plug == compile.eliminate_common" in compiled.explain()
    np.testing.assert_array_equal(yours_out, engine_out)
    unplug(CSE)  # the engine's passes again: the graph they compiled is right again
    compiled(x)
    assert compiled.graph is engine_graph and compiled.cache_info()["hits"] == 1

    def keeps_everything_too(graph):  # another function: compiles again, even by the same name
        return graph.copy()
    keeps_everything_too.__name__ = "keeps_everything"
    plug(CSE, keeps_everything_too)
    compiled(x)
    assert compiled.cache_info()["compiles"] == 3
    plug(CSE, keeps_everything)  # the first one again: its graph is still cached
    compiled(x)
    assert compiled.cache_info() == {"compiles": 3, "recompiles": 2, "hits": 2, "size": 3}


def test_nothing_plugged_costs_one_attribute_read_and_a_plain_guard():
    graph = trace_graph(lambda x: x.exp() * 2.0, (tg.randn(3),))
    part = passes.eliminate_dead_code.part
    before = part.calls
    assert passes.eliminate_dead_code(graph).counts() == part.engine(graph).counts()
    assert part.calls == before  # the engine's pass ran directly, not through Part.call
    compiled = tg.compile(lambda x: x.exp() * 2.0)
    compiled(tg.randn(3))
    guards = compiled._latest().guards
    assert isinstance(guards, GuardSet) and not guards.others  # checked inline, no call
    assert guards.guards[0].description == "compiler passes plugged with tg.exercises.plug"


def test_a_pass_may_return_its_input_unchanged():
    def identity(graph):
        return graph
    with plugged("compile.fold_constants", identity):
        out = tg.compile(lambda x: x * tg.tensor(2.0).exp())(tg.ones(2))
    np.testing.assert_allclose(out.numpy(), np.full(2, np.exp(2.0)), rtol=1e-6)
    assert isinstance(passes.fold_constants, type(passes.optimise)) and isinstance(Graph(), Graph)

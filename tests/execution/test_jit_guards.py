"""tg.compile's guards: a compiled function never returns what a stale graph computes.

Each test changes something a trace assumed (a captured tensor, a closure number, the
training flag, a parameter, requires_grad, grad mode, the input shape) and checks that
the compiled function still matches eager teachgrad, and recompiled (or, for a traced
function, which cannot, refused with a clear error). PyTorch's compiled behaviour in the
same situations is recorded in tests/fixtures/compile_guards_torch.json
(scripts/record_compile_guards.py).
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

import teachgrad as tg
from teachgrad import nn
from teachgrad.jit import passes
from teachgrad.jit.compiler import CompiledGraph
from teachgrad.jit.ir import Ref, map_refs
from teachgrad.jit.traced import trace_graph

TORCH = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "compile_guards_torch.json").read_text())
GLOBAL_FACTOR = 2.0


def close(got: tg.Tensor, want: tg.Tensor) -> None:
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-7)


# -- captured tensors, closures, globals -----------------------------------------------

def test_captured_tensor_changed_in_place_recompiles_where_it_was_folded():
    scale = tg.tensor([1.0, 2.0, 3.0])

    def f(x):
        return x * scale.exp()  # scale.exp() is folded into a constant
    compiled, x = tg.compile(f), tg.randn(3)
    close(compiled(x), f(x))
    scale.add_(1.0)
    close(compiled(x), f(x))
    info = compiled.cache_info()
    assert info["compiles"] == 2 and info["recompiles"] == 1
    assert "unchanged in place (its version): was 0, now 1" in compiled.recompiles[0]


def test_captured_tensor_that_is_only_read_is_read_live_without_recompiling():
    weight = tg.randn(3, requires_grad=True)

    def f(x):
        return x * weight
    compiled, x = tg.compile(f), tg.randn(3)
    close(compiled(x), f(x))
    with tg.no_grad():
        weight.mul_(2.0)  # what an optimizer step does
    close(compiled(x), f(x))
    compiled(x).sum().backward()
    np.testing.assert_allclose(weight.grad.numpy(), x.numpy(), rtol=1e-6)
    assert compiled.cache_info() == {"compiles": 1, "recompiles": 0, "hits": 2, "size": 1}


def test_closure_number_and_captured_tensor_match_torch_compile():
    case = TORCH["closure_and_captured_change"]
    factor = 2.0
    scale = tg.tensor([1.0, 2.0, 3.0])

    def f(x):
        return x * factor + scale.exp()
    compiled, x = tg.compile(f), tg.tensor(case["x"])
    np.testing.assert_allclose(compiled(x).numpy(), case["before"], rtol=1e-6)
    factor = 3.0  # noqa: F841 (f reads it through its closure)
    np.testing.assert_allclose(compiled(x).numpy(), case["after_closure"], rtol=1e-6)
    scale.add_(1.0)
    np.testing.assert_allclose(compiled(x).numpy(), case["after_captured"], rtol=1e-6)
    assert compiled.cache_info()["recompiles"] == 2
    assert "closure variable 'factor' of" in compiled.recompiles[0]
    assert "was 2.0, now 3.0" in compiled.recompiles[0]


def test_global_number_and_a_helper_function_reading_one():
    global GLOBAL_FACTOR

    def helper(x):
        return x * GLOBAL_FACTOR

    def f(x):
        return helper(x) + 1.0
    compiled, x = tg.compile(f), tg.randn(4)
    close(compiled(x), f(x))
    try:
        GLOBAL_FACTOR = 5.0
        close(compiled(x), f(x))
    finally:
        GLOBAL_FACTOR = 2.0
    assert "global 'GLOBAL_FACTOR' of " in compiled.recompiles[0]
    close(compiled(x), f(x))  # back to 2.0: the first graph holds again
    assert compiled.cache_info() == {"compiles": 2, "recompiles": 1, "hits": 1, "size": 2}


def test_captured_tensor_replaced_by_another_object_recompiles():
    holder = {"w": tg.ones(3)}
    w = holder["w"]

    def f(x):
        return x + w
    compiled, x = tg.compile(f), tg.randn(3)
    compiled(x)
    w = tg.full((3,), 4.0)  # noqa: F841 (a new tensor in the closure)
    close(compiled(x), f(x))
    assert "is the tensor it was" in compiled.recompiles[0]


# -- modules ---------------------------------------------------------------------------

def test_eval_and_train_after_compiling_match_eager_batchnorm_every_step():
    torch_case = TORCH["batchnorm_train_then_eval"]
    model = nn.BatchNorm1d(3)
    eager = copy.deepcopy(model)
    compiled = tg.compile(model)
    with tg.no_grad():  # (the generated program; the next test runs the interpreter with grads)
        for batch, want in zip(torch_case["batches"], torch_case["train_outputs"]):
            b = tg.tensor(batch)
            got = compiled(b)
            close(got, eager(b))
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(model, name).numpy(), getattr(eager, name).numpy(), rtol=1e-6)
    np.testing.assert_allclose(model.running_mean.numpy(), torch_case["running_mean"], rtol=1e-5)
    np.testing.assert_allclose(model.running_var.numpy(), torch_case["running_var"], rtol=1e-5)
    assert int(model.num_batches_tracked.item()) == torch_case["num_batches_tracked"] == 3
    model.eval()
    eager.eval()
    same_shape = tg.tensor(torch_case["batches"][0])
    with tg.no_grad():
        close(compiled(same_shape), eager(same_shape))  # the same signature: the guard notices
        probe = tg.tensor(torch_case["probe"])
        np.testing.assert_allclose(compiled(probe).numpy(), torch_case["eval_output"], rtol=1e-5)
    assert compiled.recompiles[0] == "guard failed: model.training: was True, now False"


def test_compiled_batchnorm_in_training_updates_running_stats_like_eager_with_grads():
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    eager = copy.deepcopy(model)
    compiled = tg.compile(model)
    for step in range(4):
        x = tg.randn(6, 4)
        got, want = compiled(x), eager(x)
        close(got, want)
        got.sum().backward()
        want.sum().backward()
        close(model[0].weight.grad, eager[0].weight.grad)
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            np.testing.assert_allclose(getattr(model[1], name).numpy(), getattr(eager[1], name).numpy(),
                                       rtol=1e-6)
    assert int(model[1].num_batches_tracked.item()) == 4
    assert compiled.cache_info()["compiles"] == 1  # writing its own buffers is no reason to recompile


def test_batchnorm_running_stat_changed_in_eval_mode_is_noticed():
    model = nn.BatchNorm1d(3)
    model.eval()
    compiled, x = tg.compile(model), tg.randn(4, 3)
    with tg.no_grad():
        compiled(x)
        model.running_mean.fill_(0.5)
        model.running_var.fill_(4.0)
        close(compiled(x), model(x))


def test_parameter_replaced_or_changed_in_place_and_module_number_changed():
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 2)
            self.scale = 2.0

        def forward(self, x):
            return self.fc(x) * self.scale
    model, x = Scaled(), tg.randn(4, 3)
    compiled = tg.compile(model)
    close(compiled(x), model(x))
    with tg.no_grad():
        model.fc.weight.mul_(3.0)  # in place: read live, nothing to recompile
    close(compiled(x), model(x))
    assert compiled.cache_info()["recompiles"] == 0
    model.fc.weight = nn.Parameter(tg.randn(2, 3))
    close(compiled(x), model(x))
    assert "model.fc.weight is the object it was" in compiled.recompiles[-1]
    model.scale = 0.5
    close(compiled(x), model(x))
    assert compiled.recompiles[-1] == "guard failed: model.scale: was 2.0, now 0.5"


def test_requires_grad_change_recompiles_and_gradients_stay_right():
    frozen = tg.tensor([1.0, 2.0, 3.0])

    def f(x):
        return (x * frozen.exp()).sum()
    compiled, x = tg.compile(f), tg.randn(3)
    compiled(x)
    frozen.requires_grad_(True)  # it was folded as a constant: now it must not be
    compiled(x).backward()
    np.testing.assert_allclose(frozen.grad.numpy(), (x * frozen.exp()).detach().numpy(), rtol=1e-6)
    assert "frozen" in compiled.recompiles[0] or "requires_grad" in compiled.recompiles[0]


def test_grad_mode_and_input_requires_grad_are_part_of_the_signature():
    compiled = tg.compile(lambda x: (x * 2.0).tanh())
    x = tg.randn(3)
    compiled(x)
    with tg.no_grad():
        compiled(x)
    compiled(x.detach().requires_grad_(True))
    assert compiled.cache_info()["compiles"] == 3
    assert "grad mode: disabled (no_grad)" in compiled.recompiles[0]
    assert "requires_grad=True" in compiled.recompiles[1]


def test_explain_lists_the_guards_and_every_recompile():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    compiled = tg.compile(model)
    compiled(tg.randn(2, 3))
    model.eval()
    compiled(tg.randn(2, 3))
    text = compiled.explain()
    assert "guards (checked before each call):" in text
    assert "input 'input': shape [2, 3], float32, cpu, requires_grad=False" in text
    assert "model.0.weight is the object it was" in text
    assert "1 recompile(s):" in text and "model.training: was True, now False" in text
    assert [g for g in compiled.guards if "training" in g.description]


def test_cache_keeps_a_bounded_number_of_graphs():
    scale = tg.ones(3)
    compiled = tg.compile(lambda x: x * scale.exp())
    for _ in range(12):
        scale.add_(0.1)  # baked in: every call recompiles
        close(compiled(tg.ones(3)), tg.ones(3) * scale.exp())
    assert compiled.cache_info()["size"] == compiled.cache_limit
    assert compiled.cache_info()["compiles"] == 12


# -- shapes -----------------------------------------------------------------------------

def test_sizes_read_from_the_input_match_torch_compile_at_other_shapes():
    case = TORCH["shapes_change"]
    mean = tg.compile(lambda x: x.sum() / x.shape[0])
    plus_ones = tg.compile(lambda x: x + tg.ones(x.shape))
    mean(tg.tensor(case["three"]))
    plus_ones(tg.tensor(case["three"]))
    np.testing.assert_allclose(mean(tg.tensor(case["five"])).item(), case["mean_at_five"], rtol=1e-6)
    got = plus_ones(tg.tensor(case["one"]))
    assert tuple(got.shape) == (1,)
    np.testing.assert_allclose(got.numpy(), case["plus_ones_at_one"], rtol=1e-6)


def test_traced_function_refuses_another_shape_naming_both():
    traced = tg.jit.trace(lambda x: x.sum() / x.shape[0], (tg.randn(3),))
    with pytest.raises(TypeError, match=r"input 'x' was traced as a cpu float32 tensor of shape "
                                        r"\[3\], but got a cpu float32 tensor of shape \[5\]"):
        traced(tg.randn(5))


# -- in-place writes, returned constants, names ------------------------------------------

def test_buffer_written_in_place_inside_the_function_matches_torch_jit_trace():
    case = TORCH["buffer_written_in_place"]

    def f(x):
        buf = tg.zeros(3)
        buf += x
        buf *= 2.0
        return buf + 1.0
    traced = tg.jit.trace(f, (tg.tensor(case["example"]),))
    other = tg.tensor(case["other"])
    np.testing.assert_allclose(traced(other).numpy(), case["traced_on_other"], rtol=1e-6)
    compiled = tg.compile(f)
    compiled(tg.tensor(case["example"]))
    np.testing.assert_allclose(compiled(other).numpy(), case["traced_on_other"], rtol=1e-6)
    close(compiled(other), f(other))


def test_every_recorded_in_place_method_matches_eager():
    def f(x, y):
        a = tg.ones(3, dtype=x.dtype)
        a.add_(x, alpha=2.0)
        a.sub_(y)
        a.mul_(y)
        a.div_(2.0)
        a.clamp_(-1.0, 1.5)
        a.lerp_(y, 0.25)
        a.addcmul_(x, y, value=0.5)
        a.addcdiv_(x, y.abs() + 1.0, value=-1.0)
        b = tg.zeros(3, dtype=x.dtype)
        b.copy_(a)
        c = tg.empty(3, dtype=x.dtype)
        c.fill_(2.0)
        c -= b
        c /= 3.0
        return c
    compiled = tg.compile(f)
    compiled(tg.randn(3), tg.randn(3))
    for _ in range(3):
        x, y = tg.randn(3), tg.randn(3)
        close(compiled(x, y), f(x, y))
    x, y = tg.randn(3, dtype=tg.float64, requires_grad=True), tg.randn(3, dtype=tg.float64)
    assert tg.autograd.gradcheck(lambda x: tg.compile(f)(x, y), (x,))


def test_writes_that_cannot_be_recorded_are_refused():
    def into_a_view(x):
        buf = tg.zeros(2, 3)
        row = buf[0]
        buf += x
        return row
    with pytest.raises(tg.jit.TracingError, match=r"memory another value of the trace shares"):
        tg.compile(into_a_view)(tg.randn(2, 3))

    def random_fill(x):
        return x + tg.empty(3).normal_()
    with pytest.raises(tg.jit.TracingError, match=r"in-place operation normal_ .*cannot be recorded"):
        tg.compile(random_fill)(tg.randn(3))


def test_returned_constant_is_a_fresh_tensor_each_call():
    def f(x):
        return tg.ones(3), x * 2.0
    compiled = tg.compile(f)
    first, _ = compiled(tg.randn(3))
    first.add_(5.0)
    second, _ = compiled(tg.randn(3))
    np.testing.assert_array_equal(second.numpy(), np.ones(3, np.float32))
    with tg.no_grad():
        third, _ = compiled(tg.randn(3))
    third.mul_(0.0)
    with tg.no_grad():
        np.testing.assert_array_equal(compiled(tg.randn(3))[0].numpy(), np.ones(3, np.float32))
    traced = tg.jit.trace(f, (tg.randn(3),))
    traced(tg.randn(3))[0].add_(1.0)
    np.testing.assert_array_equal(traced(tg.randn(3))[0].numpy(), np.ones(3, np.float32))


def test_parameters_named_like_internal_constants_keep_their_own_values():
    class Named(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.constant0 = nn.Parameter(tg.full((3,), 10.0))
            self.register_buffer("folded_mul", tg.full((3,), 100.0))

        def forward(self, x):
            made = tg.tensor([1.0, 2.0, 3.0]) * 2.0  # an unnamed constant, folded into "mul"
            return x * self.constant0 + made + self.folded_mul
    model, x = Named(), tg.randn(3)
    traced = tg.jit.trace(model, (x,))
    assert traced.graph.constants["constant0"] is model.constant0
    close(traced(x), model(x))
    compiled = tg.compile(model)
    close(compiled(x), model(x))
    assert compiled.graph.constants["folded_mul"] is model.folded_mul


# -- generated source ----------------------------------------------------------------------

HOSTILE = "x); __import__('os').system('echo pwned'  # "


def _renamed(graph, hostile: str):
    """``graph`` with every node name and constant name replaced by a hostile string."""
    g = graph.copy()
    names = {n.name: f"{hostile}{i}" for i, n in enumerate(g.nodes)}
    targets = {t: f"{hostile}const{i}" for i, t in enumerate(g.constants)}
    for n in g.nodes:
        n.name = names[n.name]
        n.args = map_refs(n.args, lambda r: Ref(names[r.node], r.index))
        n.kwargs = map_refs(n.kwargs, lambda r: Ref(names[r.node], r.index))
        if n.op == "get_attr":
            n.target = targets[n.target]
    g.constants = {targets[k]: v for k, v in g.constants.items()}
    g.captured = {targets[k] for k in g.captured}
    return g


@pytest.mark.parametrize("chosen", [passes.DEFAULT_PASSES, ()], ids=["all passes", "no passes"])
def test_generated_source_never_contains_graph_names(chosen):
    offset = tg.tensor([0.5, -0.5, 1.0])

    def f(x, y):
        h = (x * 2.0 + y).tanh() + offset
        return tg.where(h > 0, h, -h).softmax(dim=0), h.max(dim=0).values
    x, y = tg.randn(3), tg.randn(3)
    graph = _renamed(trace_graph(f, (x, y)), HOSTILE)
    compiled = CompiledGraph(graph, chosen)
    assert "pwned" not in compiled.code and "__import__" not in compiled.code
    assert all("pwned" not in k.source and "import__" not in k.source for k in compiled.kernels)
    assert len(compiled.kernels) == (1 if chosen else 0)
    assert "os" not in compiled.code.replace("compiled_forward", "").split()
    with tg.no_grad():
        got = compiled((x, y))
    for g, e in zip(got, f(x, y)):
        close(g, e)


def test_value_read_into_python_while_tracing_is_guarded():
    limit = tg.tensor(2.0)

    def f(x):
        return (x + limit).clamp(max=limit.item())  # read by an operation, then as a number
    compiled, x = tg.compile(f), tg.tensor([1.0, 3.0, 5.0])
    close(compiled(x), f(x))
    limit.fill_(4.0)
    close(compiled(x), f(x))
    assert compiled.recompiles == ["guard failed: closure variable 'limit' of test_value_read_into_"
                                   "python_while_tracing_is_guarded.<locals>.f unchanged in place "
                                   "(its version): was 0, now 1"]


def test_module_captured_by_a_closure_is_guarded_too():
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    compiled, x = tg.compile(lambda x: model(x).relu()), tg.randn(4, 3)
    with tg.no_grad():
        compiled(x)
        model.eval()
        close(compiled(x), model(x).relu())
    assert compiled.recompiles == ["guard failed: model.training: was True, now False"]


class _Scale(tg.autograd.Function):
    """A user's Function with keyword attributes (their names and strings stay data)."""

    @staticmethod
    def forward(ctx, a, factor=1.0, mode="plain"):
        ctx.factor = factor
        return a * factor if mode == "scaled" else a

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None, None


def test_keyword_attributes_and_user_functions_reach_the_code_as_data():
    def f(x):
        return _Scale.apply(x, factor=3.0, mode="scaled") + 1.0
    compiled, x = tg.compile(f), tg.randn(4)
    with tg.no_grad():
        close(compiled(x), f(x))
    assert "factor" not in compiled.code and "scaled" not in compiled.code
    assert "_Scale" not in compiled.code  # a user's class name is not teachgrad's to print


def test_compiling_a_traced_batchnorm_keeps_its_writes():
    model = nn.BatchNorm1d(3)
    traced = tg.jit.trace(model, (tg.randn(4, 3),))  # a real call: the statistics moved once
    eager = copy.deepcopy(model)
    compiled = tg.compile(traced)
    for _ in range(3):
        x = tg.randn(4, 3)
        with tg.no_grad():
            close(compiled(x), eager(x))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(model, name).numpy(), getattr(eager, name).numpy(), rtol=1e-6)
    assert int(model.num_batches_tracked.item()) == 4


def test_a_users_forward_reading_a_global_is_guarded_inside_a_closure_too():
    class Shifted(nn.Module):
        def forward(self, x):
            return x + GLOBAL_FACTOR
    model = Shifted()
    direct, through = tg.compile(model), tg.compile(lambda x: model(x) * 1.0)
    x = tg.randn(3)
    direct(x), through(x)
    global GLOBAL_FACTOR
    try:
        GLOBAL_FACTOR = -1.0
        close(direct(x), x - 1.0)
        close(through(x), x - 1.0)
    finally:
        GLOBAL_FACTOR = 2.0

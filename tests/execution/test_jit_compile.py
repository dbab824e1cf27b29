"""tg.compile: each pass's effect, fused kernels against numpy, gradients, cache and recompiles."""
from __future__ import annotations

import linecache

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.jit import passes
from teachgrad.jit.traced import trace_graph

nn = tg.nn


def chain(x, y):
    """Six elementwise operations with a transcendental (the benchmark's chain)."""
    a = x * 2.0 + y
    b = a.tanh() * 0.5 - 1.0
    return (b * a).relu()


def chain_numpy(x, y):
    a = x * np.float32(2.0) + y
    b = np.tanh(a) * np.float32(0.5) - np.float32(1.0)
    return np.maximum(b * a, 0)


def counts(graph):
    c = graph.counts()
    return c["call_function"], c["get_attr"]


# -- each pass on its own ----------------------------------------------------------------

def test_dead_code_elimination_drops_unused_results():
    def f(x):
        unused = x.exp() * 3.0  # noqa: F841  (computed, never returned)
        return x + 1.0
    g = trace_graph(f, (tg.randn(4),))
    assert counts(g) == (3, 0)
    after = passes.eliminate_dead_code(g)
    assert [n.target.__name__ for n in after.operations()] == ["Add"]
    assert counts(g) == (3, 0)  # the input graph is untouched


def test_common_subexpression_elimination_merges_repeated_work():
    def f(x):
        return (x * 2.0).tanh() + (x * 2.0).tanh()
    g = trace_graph(f, (tg.randn(4),))
    after = passes.eliminate_common_subexpressions(g)
    assert counts(g) == (5, 0) and counts(after) == (3, 0)
    x = tg.randn(4)
    np.testing.assert_allclose(tg.jit.interpreter.run(after, (x,)).numpy(), f(x).numpy(), rtol=1e-6)


def test_constant_folding_runs_constant_work_once_but_never_on_parameters():
    scale = tg.tensor([1.0, 2.0, 3.0])
    weight = tg.tensor([0.5, 0.5, 0.5], requires_grad=True)

    def f(x):
        return x * (scale.exp() * 2.0) + weight * 3.0
    g = trace_graph(f, (tg.randn(3),))
    after = passes.fold_constants(g)
    ops = [n.target.__name__ for n in after.operations()]
    assert counts(g) == (5, 2) and ops == ["Mul", "Mul", "Add"]  # exp, *2 folded; weight*3 kept
    folded = [n.target for n in after.nodes if n.op == "get_attr" and n.target.startswith("folded_")]
    assert len(folded) == 1
    np.testing.assert_allclose(after.constants[folded[0]].numpy(), np.exp([1.0, 2.0, 3.0]) * 2, rtol=1e-6)


def test_fusion_makes_one_kernel_of_an_elementwise_chain():
    g = trace_graph(chain, (tg.randn(10), tg.randn(10)))
    after = passes.fuse_elementwise(g)
    assert counts(g) == (7, 0) and counts(after) == (1, 0)
    fused = next(after.operations()).target
    assert [m.target.__name__ for m in fused.members] == ["Mul", "Add", "Tanh", "Mul", "Sub", "Mul", "Relu"]
    assert "np.float32(2.0)" in fused.source and 'error_model="numpy"' in fused.source
    assert " 2.0 " not in fused.source  # no float64 literal to promote the arithmetic


def test_fusion_keeps_values_used_outside_the_group_and_stops_at_other_ops():
    def f(x):
        a = x.exp() * 2.0  # read by the sum (not fusible) and by the next op
        s = a.sum(dim=1, keepdim=True)
        return a.tanh() + s, a
    g = trace_graph(f, (tg.randn(3, 4),))
    after = passes.fuse_elementwise(g)
    names = [n.target.__name__ for n in after.operations()]
    assert names[0].startswith("fused_") and "Sum" in names
    x = tg.randn(3, 4)
    got = tg.jit.interpreter.run(after, (x,))
    want = f(x)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)


def test_fusion_alone_drops_a_dead_group_instead_of_making_a_kernel_without_outputs():
    def f(x):
        (x.exp() * 2.0).tanh()  # computed, never used: dead code the pass meets first
        return x + 1.0
    g = trace_graph(f, (tg.randn(5),))
    after = passes.fuse_elementwise(g)  # without eliminate_dead_code before it
    assert [n.target.__name__ for n in after.operations()] == ["Add"]
    compiled = tg.compile(f, passes=[passes.fuse_elementwise])
    x = tg.randn(5)
    np.testing.assert_allclose(compiled(x).numpy(), x.numpy() + 1.0, rtol=1e-6)


def test_no_fusion_across_broadcasting():
    g = trace_graph(lambda x, b: (x + b).tanh(), (tg.randn(3, 4), tg.randn(4)))
    after = passes.fuse_elementwise(g)
    assert [n.target.__name__ for n in after.operations()] == ["Add", "Tanh"]


# -- compiled functions --------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 7, 33, 1000])
def test_compiled_chain_matches_numpy_on_ragged_sizes(n):
    x, y = tg.randn(n), tg.randn(n)
    compiled = tg.compile(chain)
    got = compiled(x, y).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, chain_numpy(x.numpy(), y.numpy()), rtol=2e-6, atol=2e-6)
    assert len(compiled.kernels) == 1


def test_float32_tanh_and_sigmoid_formulas_match_numpy_everywhere():
    x = tg.tensor(np.linspace(-12, 12, 20001, dtype=np.float32))
    compiled = tg.compile(lambda x: (x * 1.0).tanh() + (x * 1.0).sigmoid())
    want = np.tanh(x.numpy()) + 1 / (1 + np.exp(-x.numpy()))
    np.testing.assert_allclose(compiled(x).numpy(), want, atol=1e-6)


def test_compiled_mlp_matches_eager_and_reads_live_parameters():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    compiled = tg.compile(model)
    x = tg.randn(2, 4)
    with tg.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-6)
        model[0].weight.mul_(2.0)  # an optimizer step changes a parameter in place
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-6)
    assert "cpu.matmul" in compiled.code and compiled.compiles == 1


def test_gradients_through_fused_regions_cpu():
    x = tg.randn(6, dtype=tg.float64, requires_grad=True)
    y = tg.randn(6, dtype=tg.float64, requires_grad=True)
    compiled = tg.compile(lambda x, y: chain(x, y).sigmoid() * x)
    assert tg.autograd.gradcheck(compiled, (x, y))
    assert len(compiled.kernels) == 1
    compiled(x, y).sum().backward()
    x2, y2 = x.detach().requires_grad_(), y.detach().requires_grad_()
    (chain(x2, y2).sigmoid() * x2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), y2.grad.numpy(), rtol=1e-12)


def test_gradients_of_a_compiled_model_reach_its_parameters():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    compiled = tg.compile(lambda x: (model(x) * 2.0).sigmoid() * 3.0)
    x = tg.randn(5, 3, dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradcheck(compiled, (x,))
    model.zero_grad()  # gradcheck's own backward passes left gradients behind
    compiled(x).sum().backward()
    got = model[0].weight.grad.numpy().copy()
    model.zero_grad()
    ((model(x) * 2.0).sigmoid() * 3.0).sum().backward()
    np.testing.assert_allclose(got, model[0].weight.grad.numpy(), rtol=1e-12)


def test_compiled_on_cuda_matches_numpy_and_gradchecks():
    compiled = tg.compile(chain)
    for n in (5, 70):  # ragged sizes, more elements than simulator threads
        x, y = tg.randn(n, device="cuda"), tg.randn(n, device="cuda")
        got = compiled(x, y)
        assert got.device.type == "cuda"
        np.testing.assert_allclose(got.cpu().numpy(), chain_numpy(x.cpu().numpy(), y.cpu().numpy()),
                                   rtol=1e-5, atol=1e-6)
    source = compiled.kernels[0].source
    assert "@cuda.jit" in source and "cuda.gridsize(1)" in source
    x = tg.randn(4, dtype=tg.float64, device="cuda", requires_grad=True)
    y = tg.randn(4, dtype=tg.float64, device="cuda", requires_grad=True)
    assert tg.autograd.gradcheck(tg.compile(lambda x, y: chain(x, y) * x), (x, y))


def test_kernel_source_is_in_linecache_and_cached_by_source():
    tg.jit.clear_cache()
    compiled = tg.compile(chain)
    compiled(tg.randn(8), tg.randn(8))
    assert tg.jit.cache_info() == {"hits": 0, "misses": 1, "size": 1}
    tg.compile(chain)(tg.randn(8), tg.randn(8))  # another function, same kernel source
    assert tg.jit.cache_info() == {"hits": 1, "misses": 1, "size": 1}
    filename = compiled.kernels[0].kernel.py_func.__code__.co_filename
    assert filename.startswith("<teachgrad-fused-")
    assert "tanh_f32" in "".join(linecache.getlines(filename))


def test_recompiles_on_new_shapes_and_dtypes_only():
    compiled = tg.compile(chain)
    compiled(tg.randn(8), tg.randn(8))
    compiled(tg.randn(8), tg.randn(8))
    assert compiled.compiles == 1
    compiled(tg.randn(9), tg.randn(9))
    assert compiled.compiles == 2
    out = compiled(tg.randn(9, dtype=tg.float64), tg.randn(9, dtype=tg.float64))
    assert compiled.compiles == 3 and out.dtype is tg.float64
    assert "np.float32" not in compiled.kernels[0].source  # float64 literals for float64


def test_explain_reports_node_counts_per_pass():
    def f(x):
        dead = x.exp()  # noqa: F841
        return (x * 2.0).tanh() + (x * 2.0).tanh()
    compiled = tg.compile(f)
    compiled(tg.randn(4))
    lines = compiled.explain().splitlines()[:4]  # (then the guards and the recompiles)
    assert [line.split()[0] for line in lines] == [
        "eliminate_dead_code", "eliminate_common_subexpressions", "fold_constants", "fuse_elementwise"]
    assert [line.split()[2:5] for line in lines] == [["6", "->", "5"], ["5", "->", "3"],
                                                     ["3", "->", "3"], ["3", "->", "1"]]


def test_compile_bad_input():
    with pytest.raises(TypeError, match=r"tg.compile needs a function, an nn.Module or a traced "
                                        r"function, not int"):
        tg.compile(3)
    with pytest.raises(TypeError, match=r"each pass must be a function from Graph to Graph, not str"):
        tg.compile(chain, passes=["fuse"])
    compiled = tg.compile(chain)
    with pytest.raises(RuntimeError, match=r"nothing is compiled yet.*call it once"):
        compiled.code
    with pytest.raises(TypeError, match=r"example_inputs must be a tensor or a tuple of tensors"):
        compiled(tg.randn(3), [1.0, 2.0, 3.0])


def test_compile_a_loaded_graph(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.Sigmoid())
    x = tg.randn(2, 3)
    path = str(tmp_path / "m.tgjit")
    tg.jit.save(tg.jit.trace(model, (x,)), path)
    compiled = tg.compile(tg.jit.load(path))
    with tg.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-6)
    assert "0.weight" in compiled.graph.constants


def test_generated_program_runs_every_kind_of_operation_and_tuple_outputs():
    def f(x, w):
        h = (x @ w).softmax(dim=1)
        top = h.max(dim=1)  # a Function with two outputs (values, indices)
        picked = h[:, :2].reshape(-1).sum(0, keepdim=True)
        return top.values * 2.0, top.indices, picked, tg.where(x > 0, x, -x).mean(1)
    x, w = tg.randn(3, 4), tg.randn(4, 5)
    compiled = tg.compile(f)
    with tg.no_grad():
        got = compiled(x, w)
    want = f(x, w)
    assert isinstance(got, tuple) and len(got) == 4
    for g, e in zip(got, want):
        assert g.dtype is e.dtype and tuple(g.shape) == tuple(e.shape)
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6)
    code = compiled.code
    assert "cpu.matmul(v0, v1)" in code and "Softmax._apply(" in code and "MaxDim._apply(" in code

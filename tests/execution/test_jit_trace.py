"""tg.jit.trace: the graph it records, running it, save/load, and every bad input."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd import function as function_module
from teachgrad.jit import GraphFormatError, TracerWarning, TracingError
from teachgrad.jit.ir import Ref

nn = tg.nn
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))


def test_trace_records_each_function_with_its_attributes_and_parameters_by_name():
    model = mlp()
    x = tg.randn(4, 3)
    traced = tg.jit.trace(model, (x,))
    ops = [(n.target.__name__, n.args) for n in traced.graph.operations()]
    assert ops == [("Linear", (Ref("input"), Ref("_0_weight"), Ref("_0_bias"))),
                   ("Tanh", (Ref("linear"),)),
                   ("Linear", (Ref("tanh"), Ref("_2_weight"), Ref("_2_bias")))]
    assert traced.graph.constants["0.weight"] is model[0].weight  # live parameters, not copies
    assert traced.graph.counts() == {"placeholder": 1, "get_attr": 4, "call_function": 3, "output": 1}
    np.testing.assert_allclose(traced(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    other = tg.randn(4, 3)  # the same graph on other values
    np.testing.assert_allclose(traced(other).detach().numpy(), model(other).detach().numpy(), rtol=1e-6)
    assert function_module.observer is None  # the seam is free again


def test_tabular_print_lists_every_node():
    traced = tg.jit.trace(lambda x, y: (x * 2.0 + y).sum(1), (tg.randn(2, 3), tg.randn(2, 3)))
    lines = traced.graph.tabular().splitlines()
    assert lines[0].split() == ["opcode", "name", "target", "args", "kwargs", "shape"]
    assert lines[2].split() == ["placeholder", "x", "x", "()", "{}", "[2,", "3]"]
    assert lines[4].split()[:5] == ["call_function", "mul", "Mul", "(x,", "2.0)"]
    assert lines[-1].split() == ["output", "output", "(sum,)", "{}"]


def test_attributes_and_comparisons_are_recorded():
    def f(x):
        return tg.where(x > 0, x.sum(dim=1, keepdim=True) * x, -x).reshape(-1)
    x = tg.randn(3, 4)
    traced = tg.jit.trace(f, (x,))
    names = [n.target.__name__ for n in traced.graph.operations()]
    assert names == ["Compare", "Sum", "Mul", "Neg", "Where", "Reshape"]
    sum_node = traced.graph.node("sum")
    assert sum_node.args == (Ref("x"), (1,), True)
    y = tg.randn(3, 4)  # the comparison is recomputed for new inputs, not baked in
    np.testing.assert_allclose(traced(y).numpy(), f(y).numpy())


def test_values_made_outside_functions_stay_in_the_graph():
    def f(x):
        same = x.reshape(3, 4)  # no-op reshape: the engine hands back x.detach()
        return same * x.argmax(dim=1, keepdim=True).float() + x.detach()
    x = tg.randn(3, 4)
    traced = tg.jit.trace(f, (x,))
    assert traced.graph.constants == {}  # nothing computed from x was frozen as a constant
    assert "ArgReduce" in [n.target.__name__ for n in traced.graph.operations()]
    y = tg.randn(3, 4)
    np.testing.assert_allclose(traced(y).numpy(), f(y).numpy())


def test_nested_function_records_only_the_outermost():
    class Softplus(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return (x.exp() + 1).log()  # three ops inside: not in the graph

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x.sigmoid()

    traced = tg.jit.trace(lambda x: Softplus.apply(x) * 2.0, (tg.randn(4),))
    assert [n.target.__name__ for n in traced.graph.operations()] == ["Softplus", "Mul"]


def test_same_tensor_passed_twice_is_two_inputs():
    x = tg.randn(3)
    traced = tg.jit.trace(lambda a, b: a * 2.0 + b, (x, x))
    a, b = tg.randn(3), tg.randn(3)
    np.testing.assert_allclose(traced(a, b).numpy(), (a * 2.0 + b).numpy(), rtol=1e-6)


def test_gradients_flow_through_a_traced_graph():
    model = mlp().double()
    traced = tg.jit.trace(model, (tg.randn(2, 3, dtype=tg.float64),))
    x = tg.randn(2, 3, dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradcheck(traced, (x,))
    traced(x).sum().backward()
    assert model[0].weight.grad is not None


def test_check_inputs_warns_naming_the_op_that_differs():
    def f(x):
        if x.sum() > 0:  # data-dependent: baked into the trace
            return x.relu()
        return x.tanh()
    pos, neg = tg.ones(3), -tg.ones(3)
    with pytest.warns(TracerWarning, match="baked into the graph"):
        traced = tg.jit.trace(f, (pos,))
    with pytest.warns(TracerWarning) as caught:
        tg.jit.trace(f, (pos,), check_inputs=[(neg,)])
    assert any("operation 2 is Relu with (x,) in the first trace but Tanh with (x,) in the re-trace"
               in str(w.message) for w in caught)
    np.testing.assert_allclose(traced(neg).numpy(), [0.0, 0.0, 0.0])  # relu: the baked branch
    with warnings.catch_warnings():
        warnings.simplefilter("error", TracerWarning)
        tg.jit.trace(lambda x: x * 2.0, (pos,), check_inputs=[(neg,)])  # same graph: silent


# -- bad input -------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["item", "numpy", "tolist"])
def test_graph_break_names_the_op_and_the_fix(method):
    def f(x):
        s = (x * 2.0).sum()
        getattr(s, method)()
        return x
    with pytest.raises(TracingError, match=rf"graph break: \.{method}\(\) was called on the result of "
                                           rf"Sum \(node 'sum'\).*Fix: keep the computation"):
        tg.jit.trace(f, (tg.randn(3),))
    assert function_module.observer is None
    assert tg.randn(3).sum().item() is not None  # the methods are restored


@pytest.mark.parametrize("index_of", [lambda x: x > 0, lambda x: (x > 0).long().cumsum(0) - 1],
                         ids=["mask", "positions"])
def test_indexing_with_a_computed_tensor_is_a_graph_break_not_a_baked_choice(index_of):
    # x[mask] reads the mask's values on the host: a graph would keep this call's
    # selection for every input, so compiling refuses instead of answering wrongly later
    for run in (lambda f, x: tg.jit.trace(f, (x,)), lambda f, x: tg.compile(f)(x)):
        with pytest.raises(TracingError, match=r"graph break: indexing with (Compare|Sub|Add)"
                                               r".*Fix: use operations that take the index"):
            run(lambda x: x[index_of(x)] * 2.0, tg.tensor([1.0, -1.0, 2.0]))
    with pytest.raises(TracingError, match=r"indexing with input 'i'"):
        tg.compile(lambda x, i: x[i])(tg.ones(3), tg.tensor([0, 2]))
    assert function_module.observer is None
    x = tg.tensor([1.0, -1.0, 2.0])
    assert x[x > 0].tolist() == [1.0, 2.0]  # eager indexing is restored


def test_indexing_with_a_captured_tensor_recompiles_when_it_changes():
    idx = tg.tensor([2, 0])
    compiled = tg.compile(lambda x: x[idx] * 2.0)
    x = tg.tensor([1.0, -1.0, 5.0])
    assert compiled(x).tolist() == [10.0, 2.0]
    idx[0] = 1
    assert compiled(x).tolist() == [-2.0, 2.0]
    assert re.search(r"'idx' of \S*<lambda> unchanged in place \(its version\): was 0, now 1",
                     compiled.explain())


def test_in_place_write_is_recorded_and_a_write_into_an_input_is_a_graph_break():
    def f(x):
        y = x * 2.0
        y.add_(1.0)
        return y
    traced = tg.jit.trace(f, (tg.randn(3),))
    assert [n.target.__name__ for n in traced.graph.operations()] == ["Mul", "Add"]
    x = tg.randn(3)
    np.testing.assert_allclose(traced(x).numpy(), f(x).numpy(), rtol=1e-6)

    def g(x):
        x.add_(1.0)
        return x
    with pytest.raises(TracingError, match=r"in-place operation add_ writes into input 'x'"):
        tg.jit.trace(g, (tg.randn(3),))


def test_non_tensor_return_is_rejected():
    with pytest.raises(TracingError, match=r"returned a float as its result.*Fix: return tensors"):
        tg.jit.trace(lambda x: 1.5, (tg.randn(3),))
    with pytest.raises(TracingError, match=r"returned a NoneType as element 1 of its tuple"):
        tg.jit.trace(lambda x: (x * 2.0, None), (tg.randn(3),))


def test_keyword_only_tensor_is_rejected():
    def f(x, *, scale):
        return x * scale
    with pytest.raises(TracingError, match=r"keyword-only argument 'scale'.*Fix: make it positional"):
        tg.jit.trace(f, (tg.randn(3),))


def test_example_inputs_must_be_tensors():
    with pytest.raises(TypeError, match=r"example_inputs must be a tensor or a tuple of tensors, "
                                        r"not \['Tensor', 'float'\]"):
        tg.jit.trace(lambda x, y: x, (tg.randn(3), 2.0))


def test_calling_a_traced_function_with_wrong_inputs():
    traced = tg.jit.trace(lambda x: x * 2.0, (tg.randn(3),))
    with pytest.raises(TypeError, match=r"takes 1 input\(s\) \(x\), but 2 were given"):
        traced(tg.randn(3), tg.randn(3))
    with pytest.raises(TypeError, match=r"traced as a cpu float32 tensor of shape \[3\], but "
                                        r"got a cpu float64 tensor of shape \[3\]"):
        traced(tg.randn(3, dtype=tg.float64))
    with pytest.raises(TypeError, match=r"traced as a cpu float32 tensor of shape \[3\], but "
                                        r"got a cpu float32 tensor of shape \[5\].*tg.compile"):
        traced(tg.randn(5))


# -- save / load ---------------------------------------------------------------------------

def test_save_load_round_trip(tmp_path):
    model = mlp()
    x = tg.randn(4, 3)
    path = str(tmp_path / "mlp.tgjit")
    tg.jit.save(tg.jit.trace(model, (x,)), path)
    loaded = tg.jit.load(path)
    np.testing.assert_allclose(loaded(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    assert loaded.graph.constants["0.weight"].requires_grad
    assert loaded.graph.tabular() == tg.jit.trace(model, (x,)).graph.tabular()


def test_loaded_graph_runs_in_a_fresh_process_without_the_model_class(tmp_path):
    class Net(nn.Module):  # exists only in this process
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 4)

        def forward(self, x):
            h = self.fc(x)
            return tg.where(h > 0, h, h * 0.1).softmax(dim=1)

    net = Net()
    x = tg.randn(2, 3)
    path = str(tmp_path / "net.tgjit")
    tg.jit.save(tg.jit.trace(net, (x,)), path)
    np.save(tmp_path / "x.npy", x.numpy())
    script = ("import numpy as np, teachgrad as tg, sys\n"
              f"f = tg.jit.load({path!r})\n"
              f"x = tg.tensor(np.load({str(tmp_path / 'x.npy')!r}))\n"
              "print(repr(f(x).detach().numpy().tolist()))\n"
              "print('Net' in sys.modules['__main__'].__dict__)\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    values, has_class = done.stdout.strip().splitlines()
    np.testing.assert_allclose(eval(values), net(x).detach().numpy(), rtol=1e-6)
    assert has_class == "False"


def _rewrite_header(path: str, change) -> None:
    with np.load(path) as archive:
        arrays = {k: archive[k] for k in archive.files}
    header = json.loads(str(arrays["__graph__"]))
    change(header)
    arrays["__graph__"] = np.array(json.dumps(header))
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def test_load_rejects_another_format_version(tmp_path):
    path = str(tmp_path / "m.tgjit")
    tg.jit.save(tg.jit.trace(mlp(), (tg.randn(2, 3),)), path)
    _rewrite_header(path, lambda h: h.update(version=99))
    with pytest.raises(GraphFormatError, match=r"written in graph format version 99, but this "
                                               r"teachgrad reads version 1. Fix: trace and save"):
        tg.jit.load(path)


def test_load_rejects_damaged_files(tmp_path):
    path = tmp_path / "m.tgjit"
    tg.jit.save(tg.jit.trace(mlp(), (tg.randn(2, 3),)), str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut in half
    with pytest.raises(GraphFormatError, match=r"the file is damaged or is not a saved graph"):
        tg.jit.load(str(path))
    path.write_bytes(b"not a graph at all")
    with pytest.raises(GraphFormatError, match=r"damaged"):
        tg.jit.load(str(path))
    tg.jit.save(tg.jit.trace(mlp(), (tg.randn(2, 3),)), str(path))
    _rewrite_header(str(path), lambda h: h["nodes"][3].update(target="teachgrad.ops.nothing:Gone"))
    with pytest.raises(GraphFormatError, match=r"uses the operation 'teachgrad.ops.nothing:Gone', "
                                               r"which is not a registered Function"):
        tg.jit.load(str(path))
    tg.jit.save(tg.jit.trace(mlp(), (tg.randn(2, 3),)), str(path))
    _rewrite_header(str(path), lambda h: h["nodes"][3].pop("args"))
    with pytest.raises(GraphFormatError, match=r"node 3: wrong fields \(missing \['args'\]"):
        tg.jit.load(str(path))


def test_save_rejects_what_it_cannot_store(tmp_path):
    with pytest.raises(TypeError, match=r"takes what tg.jit.trace returns, not CompiledFunction"):
        tg.jit.save(tg.compile(mlp()), str(tmp_path / "x"))
    assert not (tmp_path / "x").exists()


def test_graph_converts_to_the_snapshot_the_graph_view_draws():
    from teachgrad.widgets.graph_view import draw
    traced = tg.jit.trace(mlp(), (tg.randn(2, 3),))
    snap = traced.graph.to_snapshot()
    kinds = [(n.kind, n.label) for n in snap.nodes]
    assert kinds[:4] == [("leaf", "input"), ("leaf", "_0_weight"), ("leaf", "_0_bias"), ("op", "Linear")]
    assert kinds[-1] == ("output", "output")
    into_linear = [(e.source, e.position) for e in snap.edges if e.target == "linear"]
    assert into_linear == [("input", 0), ("_0_weight", 1), ("_0_bias", 2)]
    picture = draw(snap)
    assert "<svg" in picture.svg and "Linear" in picture.svg


def test_trace_save_load_on_cuda(tmp_path):
    model = mlp().to("cuda")
    x = tg.randn(3, 3, device="cuda")
    traced = tg.jit.trace(model, (x,))
    assert {n.meta[0].device for n in traced.graph.nodes if n.meta} == {"cuda"}
    path = str(tmp_path / "cuda.tgjit")
    tg.jit.save(traced, path)
    loaded = tg.jit.load(path)
    assert loaded.graph.constants["0.weight"].device.type == "cuda"
    want = model(x).detach().cpu().numpy()
    np.testing.assert_allclose(loaded(x).detach().cpu().numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(traced(x).detach().cpu().numpy(), want, rtol=1e-5)


def test_dropout_in_training_mode_warns_that_its_mask_is_baked_in():
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5))
    with pytest.warns(TracerWarning, match=r"training mode and has Dropout.*Fix: call model.eval\(\)"):
        tg.jit.trace(model, (tg.randn(2, 3),))
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TracerWarning)
        traced = tg.jit.trace(model, (tg.randn(2, 3),))
    assert [n.target.__name__ for n in traced.graph.operations()] == ["Linear"]
    channels = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Dropout2d(0.25))  # a subclass warns too
    with pytest.warns(TracerWarning, match=r"training mode and has Dropout"):
        tg.jit.trace(channels, (tg.randn(1, 1, 4, 4),))


def test_a_traced_batch_norm_in_training_mode_saves_and_its_writes_load(tmp_path):
    # the running statistics, which every call writes, travel with the file and keep moving
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).train()
    traced = tg.jit.trace(model, (tg.randn(5, 4),))
    path = tmp_path / "bn.tgjit"
    tg.jit.save(traced, path)
    loaded = tg.jit.load(path)
    assert [name for name, _ in loaded.graph.writes] == [name for name, _ in traced.graph.writes]
    for _ in range(3):
        x = tg.randn(5, 4)
        np.testing.assert_array_equal(loaded(x).detach().numpy(), model(x).detach().numpy())
    for name in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
        np.testing.assert_array_equal(loaded.graph.constants[name].numpy(),
                                      model.state_dict()[name].numpy())


def _bn_header_with(tmp_path, change):
    import io as _io
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).train()
    buffer = _io.BytesIO()
    tg.jit.save(tg.jit.trace(model, (tg.randn(5, 4),)), buffer)
    with np.load(_io.BytesIO(buffer.getvalue()), allow_pickle=False) as archive:
        arrays = {k: archive[k] for k in archive.files}
    header = json.loads(str(arrays["__graph__"]))
    change(header["nodes"][-1]["kwargs"]["writes"])
    arrays["__graph__"] = np.array(json.dumps(header))
    out = _io.BytesIO()
    np.savez(out, **arrays)
    out.seek(0)
    return out


@pytest.mark.parametrize("change,message", [
    (lambda w: w["tuple"][0]["tuple"].__setitem__(0, "1.weight_x"), "not a constant the graph reads"),
    (lambda w: w["tuple"].append(w["tuple"][0]), "written twice"),
    (lambda w: w["tuple"][1]["tuple"].__setitem__(0, "1.running_var"), "written twice"),
    (lambda w: w["tuple"][0]["tuple"].pop(), "pair"),
])
def test_a_graph_files_writes_are_checked_before_anything_is_built(tmp_path, change, message):
    with pytest.raises(GraphFormatError, match=message):
        tg.jit.load(_bn_header_with(tmp_path, change))

"""Layer norm's compiled loops (numpy float arrays) against its whole-array operations
(the path every other backend, and a recorded backward, takes)."""
import numpy as np
import pytest

import teachgrad as tg
import teachgrad.nn.functional as F
from teachgrad.ops import normalization

rng = np.random.default_rng(7)


def _run(x0, shape, w0, b0, g0, strided=False):
    x = tg.tensor(x0, requires_grad=True)
    w = None if w0 is None else tg.tensor(w0, requires_grad=True)
    b = None if b0 is None else tg.tensor(b0, requires_grad=True)
    inp = x.transpose(0, 1) if strided else x
    y = F.layer_norm(inp, shape, w, b)
    y.backward(tg.tensor(g0))
    grads = [x.grad] + [t.grad for t in (w, b) if t is not None]
    return [y.detach().numpy()] + [g.numpy() for g in grads]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize("shape,strided", [((6,), False), ((3, 6), False), ((6,), True)])
def test_loops_compute_what_the_array_operations_do(dtype, affine, shape, strided, monkeypatch):
    x0 = (rng.standard_normal((4, 5, 3, 6)) * 3 + 1).astype(dtype)
    w0 = rng.standard_normal(shape).astype(dtype) if affine != "none" else None
    b0 = rng.standard_normal(shape).astype(dtype) if affine == "both" else None
    out_shape = (5, 4, 3, 6) if strided else x0.shape
    g0 = rng.standard_normal(out_shape).astype(dtype)
    called = []
    for name in ("_forward_loops", "_backward_loops"):
        real = getattr(normalization, name)
        monkeypatch.setattr(normalization, name,
                            lambda *args, name=name, real=real: called.append(name) or real(*args))
    fused = _run(x0, shape, w0, b0, g0, strided)
    assert called == ["_forward_loops", "_backward_loops"], "the compiled loops did not run"
    monkeypatch.setattr(normalization, "loops_take", lambda *arrays: False)
    plain = _run(x0, shape, w0, b0, g0, strided)
    tolerance = 2e-5 if dtype == np.float32 else 1e-12
    assert len(fused) == len(plain)
    for a, b in zip(fused, plain):
        assert a.dtype == dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)


def test_loops_match_numpy_formula():
    x0 = rng.standard_normal((7, 10)).astype(np.float64)
    w0, b0 = rng.standard_normal(10), rng.standard_normal(10)
    out = F.layer_norm(tg.tensor(x0), (10,), tg.tensor(w0), tg.tensor(b0)).numpy()
    mean, var = x0.mean(1, keepdims=True), x0.var(1, keepdims=True)
    np.testing.assert_allclose(out, (x0 - mean) / np.sqrt(var + 1e-5) * w0 + b0, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_without_a_graph_gives_the_recorded_forward_s_bits(dtype, monkeypatch):
    # the loops run without a graph too, with the recorded forward's numbers
    x0 = rng.standard_normal((8, 5, 16)).astype(dtype)
    w, b = (tg.tensor(rng.standard_normal(16).astype(dtype), requires_grad=True) for _ in range(2))
    called = []
    real = normalization._forward_loops
    monkeypatch.setattr(normalization, "_forward_loops",
                        lambda *args: called.append(args[0]._recording) or real(*args))
    with tg.no_grad():
        plain = F.layer_norm(tg.tensor(x0), (16,), w, b)
    recorded = F.layer_norm(tg.tensor(x0, requires_grad=True), (16,), w, b)
    assert called == [False, True]
    np.testing.assert_array_equal(plain.numpy(), recorded.detach().numpy())


def test_layer_norm_refuses_a_weight_of_another_dtype_or_shape_before_any_work():
    x = tg.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32))
    with pytest.raises(RuntimeError, match="weight type"):
        F.layer_norm(x, (4,), tg.ones(4, dtype=tg.float64))
    with pytest.raises(RuntimeError, match="bias must have shape"):
        F.layer_norm(x, (4,), tg.ones(4), tg.zeros(5))
    with pytest.raises(RuntimeError, match="expected input with shape"):
        F.layer_norm(x, (3, 5))
    with pytest.raises(RuntimeError, match="expected input with shape"):
        F.layer_norm(tg.ones(4), (2, 4))


def test_a_gradient_the_loops_do_not_take_runs_the_formula_on_the_loops_saved_rows(monkeypatch):
    # forward ran the loops; backward gets a gradient they do not take (here: told so),
    # and the formula then reads x̂ and 1/σ from the rows the loops kept
    x0 = rng.standard_normal((4, 3, 8))
    w0, b0, g0 = rng.standard_normal(8), rng.standard_normal(8), rng.standard_normal((4, 3, 8))
    expected = _run(x0, (8,), w0, b0, g0)
    real = normalization.loops_take
    calls = []

    def only_forward(*arrays):
        calls.append(len(calls))
        return real(*arrays) if len(calls) == 1 else False
    monkeypatch.setattr(normalization, "loops_take", only_forward)
    got = _run(x0, (8,), w0, b0, g0)
    assert len(calls) == 2
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)

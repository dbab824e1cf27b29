"""The LSTM's loop over time on numpy arrays (``backends/lstm_loops.py``: each step written
into whole-sequence arrays) against the readable per-step path of ``ops/lstm.py`` (the
path every other backend takes): outputs, final states and every gradient, in both
directions and layouts, and the fast path checked to have run."""
import numpy as np
import pytest

import teachgrad as tg
from teachgrad.backends import lstm_loops, pointwise_loops
from teachgrad.nn import recurrent_cells
from teachgrad.ops import lstm
from teachgrad.ops.lstm import LSTMSequence

rng = np.random.default_rng(5)
BATCH, HIDDEN, STEPS = 3, 5, 4


def _inputs(dtype, batch_first):
    shape = (BATCH, STEPS, 4 * HIDDEN) if batch_first else (STEPS, BATCH, 4 * HIDDEN)
    return [rng.standard_normal(s).astype(dtype) * scale for s, scale in
            ((shape, 2.0), ((BATCH, HIDDEN), 1.0), ((BATCH, HIDDEN), 1.0),
             ((4 * HIDDEN, HIDDEN), 0.5))]


def _run(arrays, reverse, batch_first, grads, weight_grad=True):
    """Forward, then backward from ``grads`` (of the output, h_T, c_T): every result."""
    tensors = [tg.tensor(a, requires_grad=(k < 3 or weight_grad)) for k, a in enumerate(arrays)]
    output, h, c = LSTMSequence.apply(*tensors, reverse, batch_first)
    loss = sum((result * tg.tensor(g)).sum() for result, g in zip((output, h, c), grads))
    loss.backward()
    results = [output, h, c] + [t.grad for t in tensors if t.requires_grad]
    return [r.detach().numpy() for r in results]


@pytest.fixture
def calls(monkeypatch):
    """Names of the fast path's functions as they run."""
    seen = []
    for name in ("forward_sequence", "backward_sequence"):
        real = getattr(lstm_loops, name)
        monkeypatch.setattr(lstm_loops, name,
                            lambda *a, name=name, real=real, **k: seen.append(name) or real(*a, **k))
    return seen


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_in_place_loop_computes_what_the_readable_path_does(dtype, reverse, batch_first, calls,
                                                            monkeypatch):
    arrays = _inputs(dtype, batch_first)
    output_shape = arrays[0].shape[:2] + (HIDDEN,)
    grads = [rng.standard_normal(s).astype(dtype) for s in (output_shape, (BATCH, HIDDEN),
                                                             (BATCH, HIDDEN))]
    fast = _run(arrays, reverse, batch_first, grads)
    assert calls == ["forward_sequence", "backward_sequence"], "the in-place loop did not run"
    monkeypatch.setattr(lstm, "loops_take", lambda *arrays: False)
    readable = _run(arrays, reverse, batch_first, grads)
    assert len(calls) == 2  # the readable path ran the second time
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    for name, f, r in zip(["output", "h", "c", "gates_x", "h0", "c0", "weight_hh"], fast, readable):
        assert f.dtype == dtype and f.shape == r.shape, name
        np.testing.assert_allclose(f, r, rtol=tolerance, atol=tolerance, err_msg=name)


def test_in_place_loop_without_weight_gradient_and_with_a_strided_output_gradient(
        monkeypatch):
    """W_hh frozen (no states kept for its gradient); the loss on ``output.transpose(0, 1)``,
    so the output's gradient arrives as a strided view."""
    arrays = _inputs(np.float64, False)
    weights = rng.standard_normal((BATCH, STEPS, HIDDEN))
    seen = []
    real = lstm_loops.backward_sequence
    monkeypatch.setattr(lstm_loops, "backward_sequence",
                        lambda *a, **k: seen.append(a[3].flags.c_contiguous) or real(*a, **k))

    def run():
        tensors = [tg.tensor(a, requires_grad=k < 3) for k, a in enumerate(arrays)]
        output, h, c = LSTMSequence.apply(*tensors, False, False)
        (output.transpose(0, 1) * tg.tensor(weights)).sum().backward()
        return [output.detach().numpy()] + [t.grad.numpy() for t in tensors[:3]]

    fast = run()
    assert seen == [False], "the in-place loop did not run on a strided gradient"
    monkeypatch.setattr(lstm, "loops_take", lambda *arrays: False)
    for f, r in zip(fast, run()):
        np.testing.assert_allclose(f, r, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("fast", [True, False])
def test_without_h0_gradient_the_last_product_is_skipped_and_the_rest_unchanged(
        reverse, fast, monkeypatch):
    """h0 without ``requires_grad`` (the zeros ``nn.LSTM`` makes): the backward leaves out
    the product that only h0's gradient needs, on both paths, and every other gradient is
    what it is when h0 wants one too."""
    arrays = _inputs(np.float64, True)
    grads = [rng.standard_normal(s) for s in ((BATCH, STEPS, HIDDEN), (BATCH, HIDDEN),
                                              (BATCH, HIDDEN))]
    if not fast:
        monkeypatch.setattr(lstm, "loops_take", lambda *arrays: False)
    products = []
    real_matmul = np.matmul
    monkeypatch.setattr(np, "matmul", lambda *a, **k: products.append(a[0].shape) or
                        real_matmul(*a, **k))

    def run(h0_grad):
        products.clear()
        tensors = [tg.tensor(a, requires_grad=(k != 1 or h0_grad)) for k, a in enumerate(arrays)]
        output, h, c = LSTMSequence.apply(*tensors, reverse, True)
        sum((r * tg.tensor(g)).sum() for r, g in zip((output, h, c), grads)).backward()
        assert (tensors[1].grad is not None) == h0_grad
        return [t.grad.numpy() for k, t in enumerate(tensors) if k != 1], len(products)

    with_h0, products_with = run(True)
    without_h0, products_without = run(False)
    assert products_without == products_with - 1
    for w, wo in zip(with_h0, without_h0):
        np.testing.assert_array_equal(w, wo)


def test_final_states_are_their_own_arrays():
    """Changing h_T or c_T in place leaves the output (and what backward reads) alone."""
    arrays = [tg.tensor(a) for a in _inputs(np.float32, True)]
    output, h, c = LSTMSequence.apply(*arrays, False, True)
    last = output[:, -1].numpy().copy()
    np.testing.assert_array_equal(h.numpy(), last)
    h.add_(1.0)
    np.testing.assert_array_equal(output[:, -1].numpy(), last)


def test_lstm_layer_only_h_n_in_the_loss_matches_the_readable_path(monkeypatch):
    """The output unused: its gradient arrives as zeros (whatever layout the engine picks)."""
    tg.manual_seed(3)
    layer = tg.nn.LSTM(3, 4, batch_first=True)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)

    def gradients():
        layer.zero_grad()
        _, (h, c) = layer(tg.tensor(x))
        (h.sum() * 2 + c.sum()).backward()
        return [p.grad.numpy().copy() for p in layer.parameters()]

    fast = gradients()
    monkeypatch.setattr(lstm, "loops_take", lambda *arrays: False)
    monkeypatch.setattr(recurrent_cells, "_one_node_fits", lambda *arrays: False)
    for f, r in zip(fast, gradients()):
        np.testing.assert_allclose(f, r, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_gate_pass_computes_what_the_array_operations_do(dtype):
    """The compiled per-step gate pass of the float64 forward (``pointwise_loops.py``)
    against ``ops/lstm.py``'s whole-array gate formulas (``test_lstm_step_loops.py`` holds
    the backward's pass to them)."""
    from teachgrad.backends import get_backend
    bk = get_backend("cpu")
    a = rng.standard_normal((3, 4, 5)).astype(dtype) * 3
    c = rng.standard_normal((3, 5)).astype(dtype)
    gates = np.tanh(a * lstm_loops.gate_scales(np.dtype(dtype), 5))
    c_new = np.empty_like(c)
    one = gates.dtype.type(1)
    pointwise_loops.lstm_gates_forward(gates, c, one, one / 2, c_new)
    plain_gates, plain_c = lstm.gates_forward(bk, a, c)
    tolerance = 1e-6 if dtype == np.float32 else 1e-14
    for fused, plain in ((gates, plain_gates), (c_new, plain_c)):
        assert fused.dtype == dtype and fused.shape == plain.shape
        np.testing.assert_allclose(fused, plain, rtol=tolerance, atol=tolerance)

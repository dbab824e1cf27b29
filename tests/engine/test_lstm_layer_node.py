"""``LSTMLayer``: an LSTM layer's input projection and its loop over time as one node on
numpy arrays, against the composition it stands for (``F.linear`` of the input, then
``LSTMSequence``; the path every other backend takes): the same bits for outputs, final
states and every gradient, the node checked to have run, a float64 gradcheck, and the
cases where the composition must run instead (autocast, a learner's plugged backward)."""
import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd import gradcheck
from teachgrad.nn import recurrent_cells
from teachgrad.ops.lstm import LSTMLayer

rng = np.random.default_rng(11)


def _layer_results(layer, x, states, h0_grad):
    """Output, final states, and the gradients of the input, given states and parameters."""
    layer.zero_grad()
    inputs = tg.tensor(x, requires_grad=True)
    hx = None
    if states is not None:
        hx = tuple(tg.tensor(s, requires_grad=h0_grad) for s in states)
    output, (h, c) = layer(inputs, hx)
    ((output * output).sum() + (h * 3).sum() + (c * c).sum()).backward()
    grads = [inputs.grad] + [p.grad for p in layer.parameters()]
    if hx is not None and h0_grad:
        grads += [s.grad for s in hx]
    return [t.detach().numpy().copy() for t in (output, h, c, *grads)]


@pytest.fixture
def nodes(monkeypatch):
    """How many times the one-node path ran."""
    seen = []
    real = LSTMLayer.forward
    monkeypatch.setattr(LSTMLayer, "forward",
                        staticmethod(lambda *a, **k: seen.append(1) or real(*a, **k)))
    return seen


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_one_node_gives_the_same_bits_as_the_composition(dtype, batch_first, bias, nodes,
                                                         monkeypatch):
    tg.manual_seed(4)
    layer = tg.nn.LSTM(6, 5, num_layers=2, bidirectional=True, bias=bias,
                       batch_first=batch_first, dtype=getattr(tg, np.dtype(dtype).name))
    x = rng.standard_normal((3, 4, 6) if batch_first else (4, 3, 6)).astype(dtype)
    states = [rng.standard_normal((4, 3, 5)).astype(dtype) for _ in range(2)]
    for given_states, h0_grad in ((None, False), (states, True), (states, False)):
        one_node = _layer_results(layer, x, given_states, h0_grad)
        assert len(nodes) == 4, "the one-node path did not run (2 layers x 2 directions)"
        nodes.clear()
        with monkeypatch.context() as patch:
            patch.setattr(recurrent_cells, "_one_node_fits", lambda *a: False)
            composition = _layer_results(layer, x, given_states, h0_grad)
        assert not nodes
        assert len(one_node) == len(composition)
        for fast, readable in zip(one_node, composition):
            assert fast.dtype == dtype
            np.testing.assert_array_equal(fast, readable)


def test_one_node_gradcheck_float64():
    batch, steps, features, hidden = 2, 3, 4, 3
    args = [tg.tensor(rng.standard_normal(shape), requires_grad=True) for shape in (
        (batch, steps, features), (batch, hidden), (batch, hidden), (4 * hidden, features),
        (4 * hidden, hidden), (4 * hidden,), (4 * hidden,))]
    for reverse in (False, True):
        assert gradcheck(lambda *a: LSTMLayer.apply(*a, reverse, True), args)


def test_frozen_weights_and_an_input_without_gradient(nodes):
    """Only what wants a gradient gets one (no product for the rest)."""
    tg.manual_seed(2)
    layer = tg.nn.LSTM(3, 4)
    layer.weight_ih_l0.requires_grad_(False)
    layer.bias_hh_l0.requires_grad_(False)
    output, _ = layer(tg.tensor(rng.standard_normal((5, 2, 3)).astype(np.float32)))
    output.sum().backward()
    assert nodes == [1]
    assert layer.weight_ih_l0.grad is None and layer.bias_hh_l0.grad is None
    assert layer.weight_hh_l0.grad is not None and layer.bias_ih_l0.grad is not None


def test_autocast_and_a_plugged_backward_take_the_composition(nodes):
    tg.manual_seed(1)
    layer = tg.nn.LSTM(3, 4)
    x = tg.tensor(rng.standard_normal((5, 2, 3)).astype(np.float32))
    with tg.autocast("cpu", dtype=tg.bfloat16):
        layer(x)
    assert not nodes
    calls = []

    def my_linear_backward(ctx, grad):
        calls.append(1)
        x, weight = ctx.saved_tensors
        rows = grad.reshape(-1, grad.shape[-1])
        return ((rows @ weight).reshape(*x.shape), rows.T @ x.reshape(-1, x.shape[-1]),
                rows.sum(0))

    with tg.exercises.plugged("backward:Linear", my_linear_backward):
        output, _ = layer(x)
        output.sum().backward()
    assert not nodes and calls == [1]
    layer(x)
    assert nodes == [1]


def test_an_empty_batch_gives_empty_results(nodes):
    layer = tg.nn.LSTM(4, 3, batch_first=True)
    x = tg.zeros((0, 3, 4), requires_grad=True)
    output, (h, c) = layer(x)
    (output.sum() + c.sum()).backward()
    assert nodes == [1] and tuple(output.shape) == (0, 3, 3) and tuple(h.shape) == (1, 0, 3)
    assert tuple(x.grad.shape) == (0, 3, 4) and not layer.weight_hh_l0.grad.numpy().any()

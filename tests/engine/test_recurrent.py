"""Recurrent layers and cells: float64 gradchecks (cells, the LSTM's Function, small
multi-layer bidirectional layers), bad input refused before any work, dropout between
layers, PyTorch's parameter names and starting values, pad_sequence's checks."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import contextlib
import math
import warnings

import numpy as np
import pytest

from teachgrad import nn
from teachgrad.autograd import function, gradcheck
from teachgrad.ops.lstm import LSTMSequence

rng = np.random.default_rng(22)


def T(*shape, device="cpu"):
    return tg.tensor(rng.standard_normal(shape), dtype=tg.float64, device=device, requires_grad=True)


@contextlib.contextmanager
def parameters_replaced(module, names, tensors):
    """Let ``module`` compute with ``tensors`` in place of its parameters (so gradcheck's
    perturbed copies reach the weights), then put the parameters back."""
    owners = {}
    for name in names:
        owner, leaf = module, name
        while "." in leaf:
            head, leaf = leaf.split(".", 1)
            owner = getattr(owner, head)
        owners[name] = (owner, leaf, owner._parameters[leaf])
    try:
        for name, t in zip(names, tensors):
            owner, leaf, _ = owners[name]
            owner._parameters[leaf] = t
        yield
    finally:
        for owner, leaf, original in owners.values():
            owner._parameters[leaf] = original


def gradcheck_module(module, inputs, call, device="cpu"):
    """gradcheck of ``call(module, *inputs)`` in the inputs and every parameter."""
    module = module.to(device=device, dtype=tg.float64)
    names = [n for n, _ in module.named_parameters()]
    params = [tg.tensor(p.detach().cpu().numpy(), device=device, requires_grad=True)
              for _, p in module.named_parameters()]

    def fn(*tensors):
        with parameters_replaced(module, names, tensors[len(inputs):]):
            return call(module, *tensors[:len(inputs)])

    assert gradcheck(fn, tuple(inputs) + tuple(params))


def flat(out):
    """``(output, h)`` / ``(output, (h, c))`` / ``(h, c)`` as one flat tuple."""
    if isinstance(out, tuple) and isinstance(out[1], tuple):
        return (out[0], *out[1])
    return out if isinstance(out, tuple) else (out,)


# -- gradchecks ----------------------------------------------------------------
@pytest.mark.parametrize("cell, states", [
    (lambda: nn.RNNCell(3, 2), 1), (lambda: nn.RNNCell(3, 2, nonlinearity="relu"), 1),
    (lambda: nn.GRUCell(3, 2), 1), (lambda: nn.LSTMCell(3, 2), 2),
    (lambda: nn.LSTMCell(3, 2, bias=False), 2)])
def test_cells_gradcheck(cell, states):
    hx = tuple(T(4, 2) for _ in range(states))
    gradcheck_module(cell(), (T(4, 3), *hx),
                     lambda m, x, *hx: flat(m(x, hx if len(hx) == 2 else hx[0])))


@pytest.mark.parametrize("layer", [nn.LSTM, nn.GRU, nn.RNN])
def test_two_layer_bidirectional_layers_gradcheck(layer):
    module = layer(3, 2, num_layers=2, bidirectional=True, batch_first=True)
    states = 2 if layer is nn.LSTM else 1
    hx = tuple(T(4, 2, 2) for _ in range(states))
    gradcheck_module(module, (T(2, 3, 3), *hx),
                     lambda m, x, *hx: flat(m(x, hx if len(hx) == 2 else hx[0])))


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_sequence_function_gradcheck(reverse):
    """(On cuda its gradients are checked against PyTorch's: test_recurrent_torch.py.)"""
    args = (T(3, 2, 8), T(2, 2), T(2, 2), T(8, 2))
    assert gradcheck(lambda *a: LSTMSequence.apply(*a, reverse), args)


def test_lstm_gates_are_pytorchs_in_order_i_f_g_o():
    """One step written out with numpy, the gates read from the rows of the weights."""
    cell = nn.LSTMCell(3, 2).double()
    x, h, c = (rng.standard_normal(s) for s in ((4, 3), (4, 2), (4, 2)))
    w_ih, w_hh, b_ih, b_hh = (p.detach().numpy() for p in cell.parameters())
    a = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    i, f, g, o = sigmoid(a[:, :2]), sigmoid(a[:, 2:4]), np.tanh(a[:, 4:6]), sigmoid(a[:, 6:])
    c_next = f * c + i * g
    h_out, c_out = cell(tg.tensor(x), (tg.tensor(h), tg.tensor(c)))
    np.testing.assert_allclose(c_out.detach().numpy(), c_next, rtol=1e-12)
    np.testing.assert_allclose(h_out.detach().numpy(), o * np.tanh(c_next), rtol=1e-12)


# -- bad input, refused before any work ---------------------------------------------
@contextlib.contextmanager
def no_operation_runs():
    """Fails the test if any differentiable operation runs inside."""
    ran = []

    def watch(cls, args, kwargs):
        ran.append(cls.__name__)
        return cls._apply(*args, **kwargs)

    previous, function.observer = function.observer, watch
    try:
        yield
    finally:
        function.observer = previous
    assert not ran, f"operations ran before the error: {ran}"


class FakePackedSequence:
    """What matters about a PackedSequence here: it has batch_sizes."""
    batch_sizes = tg.tensor([2, 1])
    data = tg.zeros(3, 4)


LSTM = nn.LSTM(4, 3, num_layers=2)
GRU = nn.GRU(4, 3)
CELL = nn.LSTMCell(4, 3)
BAD_CALLS = [
    ("input size", lambda: LSTM(tg.zeros(5, 2, 6)), RuntimeError,
     "input.size(-1) must be equal to input_size. Expected 4, got 6"),
    ("4-D input", lambda: LSTM(tg.zeros(5, 2, 3, 4)), ValueError,
     "LSTM: Expected input to be 2D or 3D, got 4D instead"),
    ("h0 layers", lambda: LSTM(tg.zeros(5, 2, 4), (tg.zeros(1, 2, 3), tg.zeros(2, 2, 3))),
     RuntimeError, "Expected hidden[0] size (2, 2, 3), got [1, 2, 3]"),
    ("c0 batch", lambda: LSTM(tg.zeros(5, 2, 4), (tg.zeros(2, 2, 3), tg.zeros(2, 1, 3))),
     RuntimeError, "Expected hidden[1] size (2, 2, 3), got [2, 1, 3]"),
    ("h0 batch", lambda: GRU(tg.zeros(5, 2, 4), tg.zeros(1, 3, 3)), RuntimeError,
     "Expected hidden size (1, 2, 3), got [1, 3, 3]"),
    ("3-D h0 unbatched", lambda: GRU(tg.zeros(5, 4), tg.zeros(1, 2, 3)), RuntimeError,
     "For unbatched 2-D input, hx should also be 2-D but got 3-D tensor"),
    ("2-D h0 batched", lambda: LSTM(tg.zeros(5, 2, 4), (tg.zeros(2, 3), tg.zeros(2, 3))),
     RuntimeError, "For batched 3-D input, hx and cx should also be 3-D but got (2-D, 2-D) tensors"),
    ("LSTM hx not a pair", lambda: LSTM(tg.zeros(5, 2, 4), tg.zeros(2, 2, 3)), RuntimeError,
     "hx must be a tuple (h_0, c_0)"),
    ("dtype", lambda: GRU(tg.zeros(5, 2, 4, dtype=tg.float64)), ValueError,
     "GRU input dtype (teachgrad.float64) does not match weight dtype (teachgrad.float32)"),
    ("empty sequence", lambda: GRU(tg.zeros(0, 2, 4)), RuntimeError,
     "Expected sequence length to be larger than 0"),
    ("packed", lambda: LSTM(FakePackedSequence()), NotImplementedError, "pad_sequence"),
    ("cell input size", lambda: CELL(tg.zeros(2, 5)), RuntimeError,
     "input has inconsistent input_size: got 5 expected 4"),
    ("cell 3-D", lambda: CELL(tg.zeros(2, 2, 4)), ValueError,
     "LSTMCell: Expected input to be 1D or 2D, got 3D instead"),
    ("cell batch", lambda: CELL(tg.zeros(2, 4), (tg.zeros(3, 3), tg.zeros(3, 3))), RuntimeError,
     "Input batch size 2 doesn't match hidden0 batch size 3"),
    ("cell hidden", lambda: CELL(tg.zeros(2, 4), (tg.zeros(2, 3), tg.zeros(2, 2))), RuntimeError,
     "hidden1 has inconsistent hidden_size: got 2, expected 3"),
    ("cell hx dims", lambda: nn.GRUCell(4, 3)(tg.zeros(4), tg.zeros(2, 3)), RuntimeError,
     "for a 1-D input, hx should also be 1-D"),
]


@pytest.mark.parametrize("what, call, error, message", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_input_is_refused_before_any_work(what, call, error, message):
    with no_operation_runs():
        with pytest.raises(error) as info:
            call()
    assert message in str(info.value)


def test_packed_sequences_say_what_to_do_instead():
    for fn in (lambda: nn.utils.rnn.pack_padded_sequence(tg.zeros(3, 2, 4), [3, 2]),
               lambda: nn.utils.rnn.pack_sequence([tg.zeros(3, 4)]),
               lambda: nn.utils.rnn.pad_packed_sequence(None),
               lambda: nn.utils.rnn.PackedSequence(tg.zeros(3, 4), tg.tensor([2, 1]))):
        with pytest.raises(NotImplementedError, match="pad_sequence.*last step"):
            fn()


@pytest.mark.parametrize("make, error, message", [
    (lambda: nn.RNN(4, 3, nonlinearity="sigmoid"), ValueError, "Unknown nonlinearity 'sigmoid'"),
    (lambda: nn.RNNCell(4, 3, nonlinearity="x"), ValueError, "Unknown nonlinearity 'x'"),
    (lambda: nn.LSTM(4, 3, dropout=1.5), ValueError, "dropout should be a number in range [0, 1]"),
    (lambda: nn.LSTM(4, 0), ValueError, "hidden_size must be greater than zero"),
    (lambda: nn.GRU(4, 3, num_layers=0), ValueError, "num_layers must be greater than zero"),
    (lambda: nn.LSTM(4, 3.0), TypeError, "hidden_size should be of type int, got: float"),
    (lambda: nn.LSTMCell(0, 3), ValueError, "input_size must be greater than zero"),
    (lambda: nn.LSTM(4, 3, proj_size=2), NotImplementedError, "proj_size"),
])
def test_bad_options_are_refused(make, error, message):
    with pytest.raises(error) as info:
        make()
    assert message in str(info.value)


def test_dropout_with_one_layer_warns_as_pytorch_does():
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(4, 3, dropout=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.GRU(4, 3, num_layers=2, dropout=0.5)


# -- dropout between layers ---------------------------------------------------------------
@pytest.mark.parametrize("layer", [nn.LSTM, nn.GRU, nn.RNN])
def test_dropout_acts_between_layers_in_training_only(layer):
    with_dropout = layer(4, 3, num_layers=2, dropout=0.5)
    plain = layer(4, 3, num_layers=2)
    plain.load_state_dict(with_dropout.state_dict())
    x = tg.randn(6, 2, 4)
    expected = plain(x)[0].detach().numpy()
    with_dropout.eval()
    np.testing.assert_array_equal(with_dropout(x)[0].detach().numpy(), expected)
    with_dropout.train()
    tg.manual_seed(1)
    first = with_dropout(x)[0].detach().numpy()
    tg.manual_seed(1)
    np.testing.assert_array_equal(with_dropout(x)[0].detach().numpy(), first)  # the seed decides
    assert not np.allclose(first, expected)


def test_dropout_one_cuts_the_second_layer_off_its_input():
    """With p = 1 the second layer sees zeros: its output is that of a zero input."""
    lstm = nn.LSTM(4, 3, num_layers=2, dropout=1.0)
    out, _ = lstm(tg.randn(5, 2, 4))
    second = nn.LSTM(3, 3)
    second.load_state_dict({k.replace("_l1", "_l0"): v for k, v in lstm.state_dict().items()
                            if k.endswith("_l1")})
    np.testing.assert_allclose(out.detach().numpy(), second(tg.zeros(5, 2, 3))[0].detach().numpy(),
                               rtol=1e-6)


# -- parameters as PyTorch names, shapes and starts them ----------------------------------
def test_parameter_names_shapes_and_start_are_pytorchs():
    lstm = nn.LSTM(5, 4, num_layers=2, bidirectional=True)
    shapes = {n: tuple(p.shape) for n, p in lstm.named_parameters()}
    assert list(shapes)[:4] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    assert shapes["weight_ih_l0_reverse"] == (16, 5)
    assert shapes["weight_ih_l1"] == (16, 8)  # layer 2 reads both directions
    assert shapes["weight_hh_l1_reverse"] == (16, 4)
    assert len(shapes) == 16
    bound = 1 / math.sqrt(4)
    values = np.concatenate([p.detach().numpy().ravel() for p in lstm.parameters()])
    assert np.abs(values).max() <= bound and np.abs(values).max() > 0.9 * bound
    assert [len(w) for w in lstm.all_weights] == [4, 4, 4, 4]
    gru = nn.GRU(5, 4, bias=False)
    assert [n for n, _ in gru.named_parameters()] == ["weight_ih_l0", "weight_hh_l0"]
    assert tuple(gru.weight_ih_l0.shape) == (12, 5)
    assert {n: tuple(p.shape) for n, p in nn.GRUCell(5, 4).named_parameters()} == {
        "weight_ih": (12, 5), "weight_hh": (12, 4), "bias_ih": (12,), "bias_hh": (12,)}


def test_repr_is_pytorchs():
    assert repr(nn.LSTM(4, 3, 2, bidirectional=True, dropout=0.2, batch_first=True)) == \
        "LSTM(4, 3, num_layers=2, batch_first=True, dropout=0.2, bidirectional=True)"
    assert repr(nn.RNN(4, 3, bias=False)) == "RNN(4, 3, bias=False)"
    assert repr(nn.RNNCell(4, 3, nonlinearity="relu")) == "RNNCell(4, 3, nonlinearity=relu)"
    assert repr(nn.GRUCell(4, 3)) == "GRUCell(4, 3)"


def test_flatten_parameters_changes_nothing():
    lstm = nn.LSTM(4, 3)
    before = {k: v.numpy().copy() for k, v in lstm.state_dict().items()}
    lstm.flatten_parameters()
    assert all(np.array_equal(v.numpy(), before[k]) for k, v in lstm.state_dict().items())


# -- pad_sequence ------------------------------------------------------------------------
@pytest.mark.parametrize("call, message", [
    (lambda: nn.utils.rnn.pad_sequence([]), "received an empty list of sequences"),
    (lambda: nn.utils.rnn.pad_sequence([tg.ones(2)], padding_side="middle"),
     "Expected padding_side to be one of left or right, but got middle."),
    (lambda: nn.utils.rnn.pad_sequence([tg.ones(2, 3), tg.ones(3, 4)]),
     "sequence 1 has shape (3, 4) and sequence 0 (2, 3)"),
    (lambda: nn.utils.rnn.pad_sequence([tg.ones(2), tg.ones(2, dtype=tg.float64)]),
     "sequence 1 is teachgrad.float64"),
])
def test_pad_sequence_refuses_what_cannot_be_one_tensor(call, message):
    with pytest.raises(RuntimeError) as info:
        call()
    assert message in str(info.value)


def test_pad_sequence_of_a_tensor_pads_its_rows():
    out = nn.utils.rnn.pad_sequence(tg.arange(6).reshape(2, 3))
    assert out.tolist() == [[0, 3], [1, 4], [2, 5]]

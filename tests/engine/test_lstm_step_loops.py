"""The float32 LSTM forward step as one compiled pass (``backends/lstm_step_loops.py``):
its tanh against the exact one, the pass against the numpy calls it replaces, and the
loop over time taking it for float32 only."""
import numpy as np
import pytest

import teachgrad as tg
from teachgrad.backends import lstm_loops, lstm_step_loops, pointwise_loops

rng = np.random.default_rng(8)


def _tanh(x):
    out = np.empty_like(x)
    lstm_step_loops.tanh_float32_array(x, out)
    return out


def test_tanh_is_within_six_units_in_the_last_place():
    x = np.concatenate([np.linspace(-12, 12, 400_001), [1e-30, -1e-20, 1e-7, 0.0004, 7.9, 8.0],
                        rng.standard_normal(10_000) * 3]).astype(np.float32)
    exact = np.tanh(x.astype(np.float64))
    ulps = np.abs(_tanh(x) - exact) / np.spacing(np.abs(exact).astype(np.float32))
    assert ulps.max() <= 6
    np.testing.assert_array_equal(_tanh(-x), -_tanh(x))  # odd, as tanh is


def test_tanh_keeps_nan_and_saturates_at_infinity():
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 40.0, -40.0], np.float32)
    result = _tanh(special)
    assert np.isnan(result[0])
    np.testing.assert_array_equal(result[1:], [1.0, -1.0, 0.0, -0.0, 1.0, -1.0])
    assert np.signbit(result[4])


def _numpy_step(recurrent, from_input, c):
    """The numpy calls (and the gate pass) ``forward_sequence`` makes in float64."""
    batch, four_hidden = recurrent.shape
    gates = np.tanh(recurrent + from_input).reshape(batch, 4, four_hidden // 4)
    c_new = np.empty_like(c)
    one = gates.dtype.type(1)
    pointwise_loops.lstm_gates_forward(gates, c, one, one / 2, c_new)
    tanh_c = np.tanh(c_new)
    return gates, c_new, tanh_c, gates[:, 3] * tanh_c


@pytest.mark.parametrize("batch_first", [False, True])
def test_step_pass_computes_what_the_numpy_calls_do(batch_first):
    batch, steps, hidden, t = 3, 4, 5, 2
    recurrent = (rng.standard_normal((batch, 4 * hidden)) * 2).astype(np.float32)
    sequence = (batch, steps) if batch_first else (steps, batch)
    gates_x = (rng.standard_normal(sequence + (4 * hidden,)) * 2).astype(np.float32)
    c = np.repeat(rng.standard_normal((batch, hidden)), 2, axis=1)[:, ::2].astype(np.float32)
    gates = np.empty((batch, 4, hidden), np.float32)
    c_new, tanh_c = np.empty((batch, hidden), np.float32), np.empty((batch, hidden), np.float32)
    output = np.zeros(sequence + (hidden,), np.float32)
    lstm_step_loops.lstm_step_forward(recurrent, gates_x, t, batch_first, c, gates, c_new,
                                      tanh_c, output)
    from_input = gates_x[:, t] if batch_first else gates_x[t]
    expected = _numpy_step(recurrent, from_input, c)
    h = output[:, t] if batch_first else output[t]
    for got, want in zip((gates, c_new, tanh_c, h), expected):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    untouched = np.delete(output, t, axis=1 if batch_first else 0)
    assert not untouched.any()  # only step t written


@pytest.mark.parametrize("dtype, runs", [(np.float32, 4), (np.float64, 0)])
def test_the_loop_takes_the_pass_for_float32_only(dtype, runs, monkeypatch):
    seen = []
    real = lstm_step_loops.lstm_step_forward
    monkeypatch.setattr(lstm_step_loops, "lstm_step_forward",
                        lambda *a: seen.append(a[2]) or real(*a))
    layer = tg.nn.LSTM(3, 5, batch_first=True, dtype=getattr(tg, np.dtype(dtype).name))
    output, _ = layer(tg.tensor(rng.standard_normal((2, 4, 3)).astype(dtype)))
    assert len(seen) == runs and output.dtype == getattr(tg, np.dtype(dtype).name)
    assert np.isfinite(output.detach().numpy()).all()


def _backward_spec(gates, c_before, tanh_c, dh_next, dh_output, dc):
    """The backward step's arithmetic as numpy operations in the kernel's order (IEEE
    arithmetic element by element: the same bits)."""
    i, f, g, o = (gates[:, k] for k in range(4))
    one = gates.dtype.type(1)
    dh = dh_next + dh_output
    dc_new = dc + dh * (o * (one - tanh_c * tanh_c))
    grad = np.stack([dc_new * g * (i * (one - i)), dc_new * c_before * (f * (one - f)),
                     dc_new * i * ((one + g) * (one - g)), dh * tanh_c * (o * (one - o))],
                    axis=1)
    return grad, dc_new * f


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch_first", [False, True])
def test_backward_pass_writes_the_gate_gradients_in_place_with_the_same_bits(dtype,
                                                                              batch_first):
    from teachgrad.backends import get_backend
    from teachgrad.ops import lstm
    batch, steps, hidden, t = 3, 4, 5, 1
    gates = np.tanh(rng.standard_normal((batch, 4, hidden)) * 2).astype(dtype)
    gates[:, [0, 1, 3]] = (1 + gates[:, [0, 1, 3]]) / 2
    c_before, tanh_c, dh_next, dc = (rng.standard_normal((batch, hidden)).astype(dtype)
                                     for _ in range(4))
    sequence = (batch, steps) if batch_first else (steps, batch)
    grad_output = rng.standard_normal(sequence + (hidden,)).astype(dtype)
    grad_gates_x = np.zeros(sequence + (4 * hidden,), dtype)
    dc_before = np.empty((batch, hidden), dtype)
    lstm_step_loops.lstm_step_backward(gates, c_before, tanh_c, dh_next, grad_output, dc, t,
                                       batch_first, grad_gates_x, dc_before,
                                       np.empty(hidden, dtype), np.empty(hidden, dtype))
    dh_output = grad_output[:, t] if batch_first else grad_output[t]
    grad_step = grad_gates_x[:, t] if batch_first else grad_gates_x[t]
    spec_grad, spec_dc = _backward_spec(gates, c_before, tanh_c, dh_next, dh_output, dc)
    np.testing.assert_array_equal(grad_step, spec_grad.reshape(batch, 4 * hidden))
    np.testing.assert_array_equal(dc_before, spec_dc)
    assert not np.delete(grad_gates_x, t, axis=1 if batch_first else 0).any()
    readable_grad, readable_dc = lstm.gates_backward(get_backend("cpu"), gates, c_before, tanh_c,
                                                     dh_next, dh_output, dc)
    tolerance = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(grad_step, readable_grad.reshape(batch, 4 * hidden),
                               rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(dc_before, readable_dc, rtol=tolerance, atol=tolerance)

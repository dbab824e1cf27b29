"""The compiled passes a CNN's training step runs on numpy arrays, and what they promise.

im2col's copy, col2im, max pooling, batch norm's statistics and passes, ReLU's
backward and the convolution bias's gradient run compiled loops on numpy float
arrays; every other backend runs the whole-array code. Here: that a training step
of a small CNN really takes every one of them, that each gives the whole-array
code's bits (or its values within rounding, where a sum accumulates in float64), and
that the batch's statistics, computed by those loops, are one operation a trace
records (so a traced graph recomputes them for every batch).
"""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
import teachgrad.nn as nn
import teachgrad.nn.functional as F
from teachgrad.backends import batch_norm_loops, relu_loop, window_loops
from teachgrad.backends.compiled_loops import loops_take
from teachgrad.ops import batch_norm as batch_norm_ops
from teachgrad.ops import conv as conv_ops

rng = np.random.default_rng(23)


def _small_cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 12 * 12, 5))


def test_a_cnn_training_step_runs_every_compiled_pass(monkeypatch):
    calls: dict[str, int] = {}

    def counted(module, name):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return original(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapper)

    for name in ("copy_windows", "add_windows", "max_windows_2x2", "add_max_gradients"):
        counted(window_loops, name)
    for name in ("channel_sums", "center_and_square", "scale_shift", "gradient_sums",
                 "input_gradient"):
        counted(batch_norm_loops, name)
    counted(relu_loop, "_forward")
    counted(relu_loop, "_gradient")
    model = _small_cnn()
    x = tg.tensor(rng.standard_normal((4, 3, 24, 24)).astype(np.float32), requires_grad=True)
    F.cross_entropy(model(x), tg.tensor([1, 3, 0, 4])).backward()
    # channel_sums: the batch's mean and the convolution bias's gradient
    assert calls == {"copy_windows": 1, "add_windows": 1, "max_windows_2x2": 1,
                     "add_max_gradients": 1, "channel_sums": 2, "center_and_square": 1,
                     "scale_shift": 1, "gradient_sums": 1, "input_gradient": 1, "_forward": 1,
                     "_gradient": 1}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_backward_loop_gives_the_bits_of_the_numpy_expression(dtype):
    a = rng.standard_normal(6000).astype(dtype)
    a[:6] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-30]
    grad = rng.standard_normal(6000).astype(dtype)
    grad[6:12] = [-1.0, np.nan, np.inf, -np.inf, -0.0, 0.0]  # where a < 0 or a > 0: both
    a[6:9], a[9:12] = -1.0, 1.0
    fast = relu_loop.relu_gradient(grad, a)
    with np.errstate(invalid="ignore"):  # (inf * 0 is NaN: in both)
        expected = grad * (a > 0)
    assert fast.dtype == expected.dtype
    np.testing.assert_array_equal(fast.view(np.uint8), expected.view(np.uint8))  # -0.0, NaN too


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_forward_loop_gives_numpys_bits(dtype):
    a = rng.standard_normal(10000).astype(dtype)
    a[:6] = [0.0, -0.0, np.nan, np.inf, -np.inf, -1e-30]
    expected = np.maximum(a, np.zeros_like(a))  # (-0.0 becomes 0.0, NaN stays)
    np.testing.assert_array_equal(relu_loop.relu(a).view(np.uint8), expected.view(np.uint8))
    assert relu_loop.relu(a[::2]) is None  # not contiguous: numpy's maximum instead
    np.testing.assert_array_equal(tg.tensor(a)[::2].relu().numpy(), expected[::2])


def test_a_relu_network_does_not_load_numba():
    """numba takes about half a second to load: ReLU uses its loops only once something
    else (a convolution, batch norm) has loaded it."""
    import subprocess
    import sys
    program = ("import sys, teachgrad as tg, teachgrad.nn as nn\n"
               "model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n"
               "model(tg.randn(3, 4)).sum().backward()\n"
               "print('numba' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def test_relu_backward_loop_declines_what_it_does_not_take():
    assert relu_loop.relu_gradient(np.ones(100), np.ones(100)) is None  # small: numpy's
    assert relu_loop.relu(np.ones(100)) is None
    a = rng.standard_normal((200, 60)).astype(np.float32)
    assert relu_loop.relu_gradient(a[:, ::2], a[:, ::2]) is None  # not contiguous
    assert relu_loop.relu_gradient(a.astype(np.float64), a) is None  # two dtypes
    assert relu_loop.relu_gradient(a.astype(np.int64), a.astype(np.int64)) is None
    # and the Function then takes numpy's expression: same gradient
    x = tg.tensor(a, requires_grad=True)
    y = x.t().relu()  # a transposed input: the saved array is not contiguous
    y.backward(tg.ones(60, 200))
    np.testing.assert_array_equal(x.grad.numpy(), (a > 0).astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 3, 4, 6), (7, 4), (3, 2, 9)])
def test_batch_statistics_loops_match_the_tensor_operations(monkeypatch, dtype, shape):
    x = (rng.standard_normal(shape) * 2 + 3).astype(dtype)
    compiled = [t.numpy() for t in batch_norm_ops.batch_statistics(tg.tensor(x))]
    monkeypatch.setattr(batch_norm_ops, "loops_take", lambda *arrays: False)
    whole_array = [t.numpy() for t in batch_norm_ops.batch_statistics(tg.tensor(x))]
    axes = (0, *range(2, x.ndim))
    mean = x.astype(np.float64).mean(axis=axes, keepdims=True)
    definition = [mean, x - mean, ((x - mean) ** 2).mean(axis=axes, keepdims=True)]
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    for got, other, exact in zip(compiled, whole_array, definition):
        assert got.dtype == dtype and got.shape == other.shape
        np.testing.assert_allclose(got, other, rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(got, exact, rtol=tolerance, atol=tolerance)


def test_a_trace_records_the_batch_statistics_as_one_operation():
    model = nn.BatchNorm2d(3)
    x = tg.tensor(rng.standard_normal((4, 3, 5, 5)).astype(np.float32))
    traced = tg.jit.trace(model, (x,))
    names = [node.name for node in traced.graph.nodes]
    assert any(name.startswith("batchstatistics") for name in names)
    # a new batch: the traced graph computes its statistics, with eager's bits
    other = tg.tensor(rng.standard_normal((4, 3, 5, 5)).astype(np.float32) * 4 - 1)
    eager = nn.BatchNorm2d(3)
    np.testing.assert_array_equal(traced(other).detach().numpy(), eager(other).detach().numpy())


def test_batch_statistics_refuse_to_be_differentiated_on_their_own():
    x = tg.randn(4, 3, requires_grad=True)
    mean, centered, var = batch_norm_ops.BatchStatistics.apply(x)
    with pytest.raises(RuntimeError, match="not differentiable on its own.*tg.no_grad"):
        var.sum().backward()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_convolution_with_bias_compiled_and_whole_array_agree(monkeypatch, dtype):
    x = rng.standard_normal((3, 2, 6, 5)).astype(dtype)
    weight = rng.standard_normal((4, 2, 3, 3)).astype(dtype)
    bias = rng.standard_normal(4).astype(dtype)
    grad = rng.standard_normal((3, 4, 6, 5)).astype(dtype)

    def run(loops: bool):
        monkeypatch.setattr(conv_ops, "loops_take", loops_take if loops else (lambda *arrays: False))
        t, w, b = (tg.tensor(a, requires_grad=True) for a in (x, weight, bias))
        out = F.conv2d(t, w, b, padding=1)
        out.backward(tg.tensor(grad))
        return [a.detach().numpy() for a in (out, t.grad, w.grad, b.grad)]

    compiled, whole_array = run(True), run(False)
    np.testing.assert_array_equal(compiled[0], whole_array[0])  # the same copies and product
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    for got, other in zip(compiled[1:], whole_array[1:]):
        np.testing.assert_allclose(got, other, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(compiled[3], grad.sum(axis=(0, 2, 3)), rtol=tolerance)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    by_definition = np.einsum("ncij,ocij->no", np.lib.stride_tricks.sliding_window_view(
        padded, (3, 3), axis=(2, 3)).reshape(3, 2, 30, 3, 3).transpose(0, 2, 1, 3, 4).reshape(
        90, 2, 3, 3), weight).reshape(3, 30, 4).transpose(0, 2, 1).reshape(3, 4, 6, 5)
    np.testing.assert_allclose(compiled[0], by_definition + bias[:, None, None], rtol=tolerance,
                               atol=tolerance)

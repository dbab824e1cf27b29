"""The sigmoid's compiled passes (``backends/sigmoid_loops.py``) against numpy's formulas.

The numpy backend's sigmoid takes three calls (two compiled passes around numpy's own
``exp``) where the numpy formula takes seven, and its gradient one pass where the
formula takes three: on every input the bits must be the formula's, and the passes must
run when they should (numba loaded, or an array large enough to be worth loading it)
and not otherwise.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.backends import numpy_backend, sigmoid_loops
from teachgrad.backends.numpy_backend import NumpyBackend, _sigmoid_formula
from teachgrad.ops import elementwise

rng = np.random.default_rng(41)


def _two_branch(x: np.ndarray) -> np.ndarray:
    """1/(1+e) for x >= 0 and e/(1+e) below, e = exp(-|x|): the formula, written out."""
    e = np.exp(-np.abs(x))
    return np.asarray(np.where(x >= 0, 1, e) / (1 + e)).astype(x.dtype)


def _awkward(dtype, shape) -> np.ndarray:
    info = np.finfo(dtype)
    x = np.asarray(rng.standard_normal(shape) * 30).astype(dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, -1e4, 1e4, info.tiny / 4, -info.tiny / 4,
               info.eps, -info.eps, 88.0, -88.0, 89.0, -89.0, -104.0, info.max, -info.max]
    n = min(len(special), x.size)
    x.flat[:n] = np.array(special[:n], dtype)
    return x


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    """The same bits, NaN for NaN (IEEE 754 leaves a NaN's sign to the order in which an
    instruction takes its operands, which a vectorised loop may swap)."""
    nan = np.isnan(want)
    return bool((np.isnan(got) == nan).all()) and _bits(got[~nan]) == _bits(want[~nan])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2,), (7,), (18,), (3, 6), (1000,), (4099,), (300, 250),
                                   (2, 3, 4, 5)])
def test_compiled_sigmoid_gives_the_formulas_bits(dtype, shape):
    x = _awkward(dtype, shape)
    before = x.copy()
    with np.errstate(over="raise", invalid="ignore", under="ignore"):
        got = sigmoid_loops.sigmoid(x)
        want = _two_branch(x)
    assert type(got) is np.ndarray and got.dtype == x.dtype and got.shape == x.shape
    assert _same(got, want)
    assert _bits(x) == _bits(before)  # (the input is only read)
    with np.errstate(over="raise", invalid="ignore"):  # and numpy's calls, which it replaces
        assert _same(_sigmoid_formula(x), want)


def test_compiled_sigmoid_reads_without_writing():
    x = _awkward(np.float32, (50,))
    before = x.copy()
    x.flags.writeable = False  # (a kept or shared array: read only)
    out = sigmoid_loops.sigmoid(x)
    assert _bits(x) == _bits(before) and _same(out, _two_branch(before))


@pytest.mark.parametrize("x", [np.ones(10, np.float16), np.arange(10), np.ones((20, 20))[:, ::2],
                               np.ones(0, np.float32), np.ones(10, ">f4")],
                         ids=["float16", "int64", "strided", "empty", "big-endian"])
def test_compiled_sigmoid_declines_what_it_does_not_take(x):
    assert sigmoid_loops.sigmoid(x) is None
    got = NumpyBackend().unary("sigmoid", x)  # and the backend then takes the formula
    np.testing.assert_array_equal(got, _two_branch(x.astype(got.dtype)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1024,), (5000,), (40, 70)])
def test_compiled_sigmoid_gradient_gives_the_formulas_bits(dtype, shape):
    s = _two_branch(_awkward(dtype, shape))  # (0, 1, 0.5, nan, subnormals among them)
    grad = _awkward(dtype, shape)[::-1].copy() if len(shape) == 1 else _awkward(dtype, shape)
    got = sigmoid_loops.sigmoid_gradient(grad, s)
    with np.errstate(all="ignore"):
        want = grad * s * (np.ones((), dtype) - s)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert _same(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_sums_gradient_spread_over_the_shape_is_taken_as_its_number(dtype):
    """``sigmoid(x).sum().backward()``: the gradient arriving is one number with every
    stride 0; the pass reads it once, with the bits numpy's broadcasting gives."""
    s = _two_branch(_awkward(dtype, (40, 70)))
    for number in [0.7, -1.0, 0.0, np.inf]:
        grad = np.broadcast_to(np.array(number, dtype), s.shape)
        got = sigmoid_loops.sigmoid_gradient(grad, s)
        with np.errstate(all="ignore"):
            want = grad * s * (np.ones((), dtype) - s)
        assert got is not None and _same(got, want), number


def test_compiled_sigmoid_gradient_declines_what_it_does_not_take():
    s = np.full((40, 50), 0.25, np.float32)
    rows = np.broadcast_to(np.ones((1, 50), np.float32), s.shape)  # (strides 0 and 4)
    for grad, out in [(rows, s), (np.ones((40, 50)), s), (np.ones((40, 49), np.float32), s),
                      (np.ones((40, 100), np.float32)[:, ::2], s), (np.ones((50, 40), np.float32), s.T),
                      (np.ones((40, 50), np.float16), s.astype(np.float16)),
                      (np.ones(0, np.float32), np.ones(0, np.float32))]:
        assert sigmoid_loops.sigmoid_gradient(grad, out) is None


def _count(monkeypatch, name: str) -> dict:
    calls = {name: 0}
    original = getattr(sigmoid_loops, name)

    def counted(*args):
        result = original(*args)
        calls[name] += result is not None
        return result

    monkeypatch.setattr(sigmoid_loops, name, counted)
    return calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_tensors_sigmoid_takes_the_passes_and_its_gradient_has_the_formulas_bits(dtype, monkeypatch):
    forward, backward = _count(monkeypatch, "sigmoid"), _count(monkeypatch, "sigmoid_gradient")
    x0 = _awkward(dtype, (2, 1500))
    upstream = rng.standard_normal(x0.shape).astype(dtype)
    x = tg.tensor(x0, requires_grad=True)
    y = x.sigmoid()
    y.backward(tg.tensor(upstream))
    assert forward["sigmoid"] == 1 and backward["sigmoid_gradient"] == 1  # both passes ran
    s = _two_branch(x0)
    with np.errstate(all="ignore"):
        want = upstream * s * (np.ones((), dtype) - s)
    assert _same(y.detach().numpy(), s) and _same(x.grad.numpy(), want)


def test_a_small_sigmoids_gradient_keeps_the_formula(monkeypatch):
    backward = _count(monkeypatch, "sigmoid_gradient")
    x = tg.randn(elementwise._SIGMOID_GRADIENT_LOOP_FROM - 1, requires_grad=True)
    x.sigmoid().backward(tg.randn(x.shape[0]))
    assert backward["sigmoid_gradient"] == 0  # (below the threshold numpy's calls are quicker)


def test_sigmoid_through_the_passes_passes_gradcheck():
    x = tg.tensor(rng.standard_normal(1100) * 4, requires_grad=True)  # (float64)
    assert tg.autograd.gradcheck(lambda t: (t.sigmoid() * t).sigmoid(), (x,))


def test_only_a_large_sigmoid_loads_numba():
    """numba takes about half a second to load: a sigmoid below 64 KiB computes with numpy
    unless something else has loaded it, a larger one loads it for its passes. Either way
    the bits are the formula's."""
    program = ("import sys, numpy as np, teachgrad as tg\n"
               "n = int(sys.argv[1])\n"
               "x = tg.tensor((np.arange(n, dtype=np.float32) - n / 2) / 97, requires_grad=True)\n"
               "y = x.sigmoid()\n"
               "y.backward(tg.ones(n))\n"
               "print('numba' in sys.modules)\n"
               "sys.stdout.buffer.write(y.detach().numpy().tobytes() + x.grad.numpy().tobytes())\n")
    for n, loads in [(1000, False), (16384, True)]:
        done = subprocess.run([sys.executable, "-c", program, str(n)], capture_output=True,
                              timeout=300)
        first, _, data = done.stdout.partition(b"\n")
        assert first.decode().strip() == str(loads), done.stderr.decode()
        x0 = (np.arange(n, dtype=np.float32) - np.float32(n / 2)) / np.float32(97)
        s = _two_branch(x0)
        want = np.ones(n, np.float32) * s * (np.ones((), np.float32) - s)
        assert data == s.tobytes() + want.tobytes()


def test_no_pass_waits_for_numba_while_another_thread_loads_it(monkeypatch):
    """``set_cpu_backend("numba")`` loads numba in a background thread while numpy computes:
    until that thread is done (numba half imported, or compiling for the backend), a small
    sigmoid, ReLU or Adam update keeps numpy's calls instead of waiting for it (which took
    0.35-0.66 s in one call)."""
    import threading

    import numba

    from teachgrad.backends import compiled_loops, numba_loading

    assert compiled_loops.numba_loaded()  # (imported by this module, nothing loading)
    forward, backward = _count(monkeypatch, "sigmoid"), _count(monkeypatch, "sigmoid_gradient")
    x = tg.randn(2000, requires_grad=True)
    for half_imported in (True, False):
        with monkeypatch.context() as patch:
            if half_imported:  # (what importlib marks while a module's code runs)
                patch.setattr(numba.__spec__, "_initializing", True, raising=False)
            else:  # (a load thread started and not finished)
                patch.setattr(numba_loading, "_thread", threading.current_thread())
                patch.setattr(numba_loading, "_loaded", threading.Event())
            assert not compiled_loops.numba_loaded()
            y = x.sigmoid()
            y.backward(tg.ones(2000))
            assert numpy_backend.relu_passes() is None
            assert not NumpyBackend().adam_update(*(np.ones(10, np.float32) for _ in range(4)), {})
        assert forward["sigmoid"] == 0 and backward["sigmoid_gradient"] == 0
        s = _two_branch(x.detach().numpy())
        assert _same(y.detach().numpy(), s)
        x.grad = None
    assert compiled_loops.numba_loaded()  # (and afterwards the passes run again)
    x.sigmoid().backward(tg.ones(2000))
    assert forward["sigmoid"] == 1 and backward["sigmoid_gradient"] == 1

"""The engine's shortcuts give exactly what the full paths give, and step aside when they must.

* ``autograd/lean.py``: tensor arithmetic with nothing recorded goes straight to the
  backend; while recording, plain operands go straight to the Function.
* ``engine.backward_steps(records=False)``: what ``backward()`` runs, no step records.
* the numba CPU backend's flat loops for contiguous operands.
"""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd import backward_steps, function
from teachgrad.backends.numba_cpu import NumbaCPUBackend
from teachgrad.backends.numpy_backend import NumpyBackend
from teachgrad.ops import functional as F

# (operator, the public function it shortcuts: the full path, with all its checks)
BINARY = [(lambda a, b: a + b, F.add), (lambda a, b: a - b, F.sub),
          (lambda a, b: a * b, F.mul), (lambda a, b: a / b, F.div)]
UNARY = [(lambda a: -a, F.neg), (lambda a: a.exp(), F.exp), (lambda a: a.log(), F.log),
         (lambda a: a.sqrt(), F.sqrt), (lambda a: a.sin(), F.sin), (lambda a: a.cos(), F.cos),
         (lambda a: a.tanh(), F.tanh), (lambda a: a.sigmoid(), F.sigmoid)]


@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
@pytest.mark.parametrize("op", range(len(BINARY)))
def test_unrecorded_arithmetic_matches_the_full_path(dtype, op):
    rng = np.random.default_rng(op)
    a = tg.tensor(rng.random((3, 5)) + 0.5, dtype=dtype)
    b = tg.tensor(rng.random((3, 5)) + 0.5, dtype=dtype)
    fn, full_fn = BINARY[op]
    with tg.no_grad():
        for x, y in [(a, b), (a, 2), (a, 0.3), (3, a), (1.5, a)]:
            lean, full = fn(x, y), full_fn(x, y)
            assert lean.dtype is full.dtype is dtype and lean.shape == full.shape
            np.testing.assert_array_equal(lean.numpy(), full.numpy())
            assert lean.grad_fn is None and not lean.requires_grad


@pytest.mark.parametrize("op", range(len(UNARY)))
def test_unrecorded_unary_functions_match_the_full_path(op):
    a = tg.tensor(np.random.default_rng(op).random(7) + 0.1, dtype=tg.float64)
    fn, full_fn = UNARY[op]
    with tg.no_grad():
        np.testing.assert_array_equal(fn(a).numpy(), full_fn(a).numpy())
    x = a.detach().requires_grad_()
    recorded, full = fn(x), full_fn(x)  # recording: the same Function, the same values
    assert recorded.grad_fn.function is full.grad_fn.function
    np.testing.assert_array_equal(recorded.detach().numpy(), full.detach().numpy())


def test_integer_and_broadcast_operands_take_the_full_path():
    i = tg.tensor([1, 2, 3])
    with tg.no_grad():
        assert (i / 2).dtype is tg.float32  # promotion only the full path does
        assert (-i).dtype is tg.int64 and (i * 2).dtype is tg.int64
        row = tg.ones(3) + tg.ones(2, 3)  # broadcasting: checked by the full path
        assert row.shape == (2, 3)
        with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match"):
            tg.ones(3) + tg.ones(2)


def test_an_observer_sees_unrecorded_arithmetic_too():
    seen = []

    def watch(cls, args, kwargs):
        seen.append(cls.__name__)
        return cls._apply(*args, **kwargs)

    a = tg.ones(4)
    function.observer = watch
    try:
        with tg.no_grad():
            (a * 2 + a).tanh()
            -a
    finally:
        function.observer = None
    assert seen == ["Mul", "Add", "Tanh", "Neg"]


def test_recorded_plain_operands_still_leave_every_node():
    x = tg.tensor([0.5, -1.0], requires_grad=True)
    y = ((x * 3 + 1) / x - x).tanh().sigmoid()
    names, node = [], y.grad_fn
    while node is not None and hasattr(node, "function"):
        names.append(node.name())
        node = node.next_functions[0][0]
    assert names == ["SigmoidBackward", "TanhBackward", "SubBackward", "DivBackward",
                     "AddBackward", "MulBackward"]
    y.sum().backward()
    ok = tg.autograd.gradcheck(lambda t: ((t * 3 + 1) / t - t).tanh().sigmoid(),
                               (tg.tensor([0.5, -1.0], dtype=tg.float64, requires_grad=True),))
    assert ok


def test_backward_without_records_runs_the_same_steps_as_the_stepper():
    def chain(y0, w):
        y = y0
        for _ in range(3):
            y = (y * w + 0.1).tanh() - y.sigmoid() * 0.5
        return y.sum()

    rng = np.random.default_rng(0)
    values = rng.standard_normal(5), rng.standard_normal(5)
    grads = []
    for mode in ("backward", "stepper", "no records"):
        y0, w = (tg.tensor(v, dtype=tg.float64, requires_grad=True) for v in values)
        loss = chain(y0, w)
        if mode == "backward":
            loss.backward()
        elif mode == "stepper":
            steps = list(backward_steps(loss))
            assert [s.index for s in steps] == list(range(len(steps))) and steps[-1].pending == 0
            assert any(any(s.accumulated) for s in steps)  # y and w are reused: merges
        else:
            assert set(backward_steps(loss, records=False)) == {None}
        grads.append((y0.grad.numpy(), w.grad.numpy()))
    for other in grads[1:]:
        for got, want in zip(other, grads[0]):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [1, 7, 33, 1000])
def test_numba_flat_loops_match_numpy_on_ragged_sizes(dtype, size):
    numba, ref = NumbaCPUBackend(), NumpyBackend()
    rng = np.random.default_rng(size)
    a = (rng.random((size,)) + 0.5).astype(dtype)
    b = (rng.random((size,)) + 0.5).astype(dtype)
    for op in ("add", "sub", "mul", "div"):
        for x, y in [(a, b), (a, 0.5), (a, 3)]:
            got, want = numba.binary(op, x, y), ref.binary(op, x, y)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-13)
    for op in ("neg", "exp", "tanh"):
        np.testing.assert_allclose(numba.unary(op, a), ref.unary(op, a), rtol=1e-6)
    m = a.reshape(1, -1)
    for axes, keep in [(None, False), ((0, 1), True)]:
        got, want = numba.reduce("sum", m, axes, keep), ref.reduce("sum", m, axes, keep)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5)

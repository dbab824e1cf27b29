"""Cross-entropy as one node on the CPU's arrays (ops/loss.py ``CrossEntropy``, loops in
backends/loss_loops.py) against the readable path it stands in for, ``nll_loss`` after
``log_softmax`` (two nodes): values and gradients, every reduction, float32 and float64,
ragged class counts; the loops ran; a float64 gradcheck; the cases it leaves to the
readable path."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import numpy as np
import pytest

import teachgrad.nn.functional as F
from teachgrad.autograd import gradcheck
from teachgrad.backends import loss_loops

rng = np.random.default_rng(25)
TOLERANCE = {tg.float32: 2e-6, tg.float64: 1e-14}


def _readable(logits, target, reduction):
    """The two-node path: what ``cross_entropy`` computed before the one node."""
    return F.nll_loss(F.log_softmax(logits, dim=1), target, reduction=reduction)


def _loss_and_gradient(loss_fn, values, target, dtype, reduction, upstream):
    x = tg.tensor(values, dtype=dtype, requires_grad=True)
    loss = loss_fn(x, tg.tensor(target), reduction=reduction)
    upstream = upstream if reduction == "none" else 1.5  # (of the loss: a scale other than 1)
    loss.backward(tg.tensor(upstream, dtype=dtype))
    return loss, x.grad.numpy()


def _cases(rows, classes, dtype):
    values = rng.standard_normal((rows, classes)) * 4
    target = rng.integers(0, classes, rows)
    upstream = rng.standard_normal(rows)
    return values, target, upstream


@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("classes", [1, 7, 62, 65, 300])
def test_the_loops_give_the_two_nodes_numbers_within_rounding(dtype, reduction, classes):
    rows = max(8, 40_000 // classes)  # large enough for the loops (64 KiB and more)
    values, target, upstream = _cases(rows, classes, dtype)
    loss, grad = _loss_and_gradient(F.cross_entropy, values, target, dtype, reduction, upstream)
    want, want_grad = _loss_and_gradient(_readable, values, target, dtype, reduction, upstream)
    assert loss.grad_fn.name() == "CrossEntropyBackward"
    tol = TOLERANCE[dtype]
    # the forward takes the very operations of log_softmax's loops: the same bits
    np.testing.assert_array_equal(loss.detach().numpy(), want.detach().numpy())
    # (at a row's target, scale * p - scale loses to cancellation: what is left of the
    # rounding is measured against the scale, the largest magnitude in the row)
    np.testing.assert_allclose(grad, want_grad, rtol=tol, atol=tol * np.abs(want_grad).max())


@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_small_arrays_give_the_two_nodes_bits(dtype, reduction):
    # below the loops' size the node runs the two nodes' own numpy operations, in order
    values, target, upstream = _cases(5, 6, dtype)
    loss, grad = _loss_and_gradient(F.cross_entropy, values, target, dtype, reduction, upstream)
    want, want_grad = _loss_and_gradient(_readable, values, target, dtype, reduction, upstream)
    assert loss.grad_fn.name() == "CrossEntropyBackward"
    np.testing.assert_array_equal(loss.detach().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(grad, want_grad)


def test_the_loops_run_for_large_arrays(monkeypatch):
    calls = []
    for name in ("picked_losses", "softmax_minus_one_hot"):
        real = getattr(loss_loops, name)
        monkeypatch.setattr(loss_loops, name,
                            lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    x = tg.tensor(rng.standard_normal((1024, 62)).astype(np.float32), requires_grad=True)
    F.cross_entropy(x, tg.tensor(rng.integers(0, 62, 1024))).backward()
    assert calls == ["picked_losses", "softmax_minus_one_hot"]
    small = tg.tensor(rng.standard_normal((4, 6)).astype(np.float32), requires_grad=True)
    F.cross_entropy(small, tg.tensor([0, 5, 2, 1])).backward()
    assert len(calls) == 2  # (a few floats: numpy's operations, no compiled call)


@pytest.mark.parametrize("loops", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_gradcheck_in_float64(loops, reduction, monkeypatch):
    if loops:  # every array counts as large: the compiled loops at a gradcheck's size
        monkeypatch.setattr(tg.tensor([1.0])._backend, "one_pass_bytes", 0)
    x = tg.tensor(rng.standard_normal((5, 7)) * 3, requires_grad=True)
    target = tg.tensor([0, 6, 3, 3, 1])
    assert gradcheck(lambda x: F.cross_entropy(x, target, reduction=reduction), (x,))


def test_nan_and_minus_infinity_logits_as_the_two_nodes():
    values = rng.standard_normal((2000, 40))
    values[3, 5] = np.nan  # a NaN row: its loss NaN, its gradient NaN, the others finite
    values[9, :20] = -np.inf  # impossible classes (the target is not among them)
    target = rng.integers(20, 40, 2000)
    loss, grad = _loss_and_gradient(F.cross_entropy, values, target, tg.float64, "none", np.ones(2000))
    want, want_grad = _loss_and_gradient(_readable, values, target, tg.float64, "none", np.ones(2000))
    np.testing.assert_allclose(loss.detach().numpy(), want.detach().numpy(), rtol=1e-14)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-14, atol=1e-16)
    assert np.isnan(grad[3]).all() and np.isfinite(np.delete(grad, 3, axis=0)).all()
    assert (grad[9, :20] == 0).all()


@pytest.mark.parametrize("call", [
    lambda x, t: F.cross_entropy(x, t, weight=tg.ones(7, dtype=x.dtype)),
    lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
    lambda x, t: F.cross_entropy(x, tg.where(t == 0, -100, t)),  # some targets ignored
    lambda x, t: F.cross_entropy(x.half(), t),  # 16-bit: not the loops' dtypes
    lambda x, t: F.cross_entropy(x.unsqueeze(2), t.unsqueeze(1)),  # (N, C, d1)
    lambda x, t: F.cross_entropy(x[0], t[0]),  # one sample, (C,)
], ids=["weight", "label_smoothing", "ignore_index", "float16", "3-d", "1-d"])
def test_other_cases_keep_the_readable_path(call):
    x = tg.tensor(rng.standard_normal((6, 7)), dtype=tg.float32, requires_grad=True)
    t = tg.tensor([0, 1, 2, 3, 0, 6])
    loss = call(x, t)
    assert loss.grad_fn.name() != "CrossEntropyBackward"
    loss.backward()
    assert x.grad is not None and np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("classes", [*range(1, 20), 62, 64, 65, 130])
def test_row_maxima_and_sums_of_ragged_rows(dtype, classes):
    x = rng.standard_normal((37, classes)).astype(dtype)
    tops, sums = np.empty(37, dtype), np.empty(37)
    loss_loops.row_maxima(x, tops)
    np.testing.assert_array_equal(tops, x.max(axis=1))
    loss_loops.row_sums(x, sums)
    np.testing.assert_allclose(sums, x.astype(np.float64).sum(axis=1), rtol=1e-12, atol=1e-12)

"""tg.utils.checkpoint: the same gradients as without it, dropout included, and a lower peak."""
import gc
import warnings

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.streams import blocking_launches
from teachgrad.utils.checkpoint import checkpoint, checkpoint_sequential


def _mlp(seed=1, dropout=0.0, depth=3, width=6, dtype=tg.float64):
    tg.manual_seed(seed)
    layers = [tg.nn.Linear(4, width)]
    for _ in range(depth - 1):
        layers += [tg.nn.Tanh(), tg.nn.Dropout(dropout), tg.nn.Linear(width, width)]
    layers += [tg.nn.ReLU(), tg.nn.Linear(width, 1)]
    return tg.nn.Sequential(*layers).to(dtype)


def _grads(model, x):
    return [x.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]


@pytest.mark.parametrize("use_reentrant", [False, True])
@pytest.mark.parametrize("segments", [1, 2, 3])
def test_same_gradients_as_without_checkpointing_dropout_included(use_reentrant, segments):
    x = tg.tensor(np.random.default_rng(0).normal(size=(5, 4)))
    plain, checked = _mlp(dropout=0.5), _mlp(dropout=0.5)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    tg.manual_seed(7)
    expected = plain(xa).sum()
    expected.backward()
    tg.manual_seed(7)
    got = checkpoint_sequential(checked, segments, xb, use_reentrant=use_reentrant).sum()
    got.backward()
    assert got.item() == expected.item()
    for a, b in zip(_grads(plain, xa), _grads(checked, xb)):
        np.testing.assert_allclose(b, a, rtol=1e-12)


def test_the_gradient_against_finite_differences():
    def f(a, b):
        return (a * b).sin() + a.exp() * 0.5

    a = tg.tensor(np.random.default_rng(1).normal(size=(3,)), requires_grad=True)
    b = tg.tensor(np.random.default_rng(2).normal(size=(3,)), requires_grad=True)
    assert tg.autograd.gradcheck(lambda p, q: checkpoint(f, p, q, use_reentrant=False), (a, b))
    checkpoint(f, a, b, use_reentrant=False).sum().backward()
    an, bn = a.detach().numpy(), b.detach().numpy()
    np.testing.assert_allclose(a.grad.numpy(), np.cos(an * bn) * bn + 0.5 * np.exp(an), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), np.cos(an * bn) * an, rtol=1e-12)


def test_the_random_state_after_it_is_as_without_it():
    model = _mlp(dropout=0.5)
    x = tg.randn(5, 4, dtype=tg.float64, requires_grad=True)
    tg.manual_seed(3)
    checkpoint(model, x, use_reentrant=False).sum().backward()
    after = tg.rand(4).numpy()
    tg.manual_seed(3)
    model(x).sum()
    np.testing.assert_array_equal(after, tg.rand(4).numpy())


def test_parameters_get_gradients_when_no_input_requires_grad_non_reentrant():
    model = _mlp()
    x = tg.randn(5, 4, dtype=tg.float64)
    checkpoint(model, x, use_reentrant=False).sum().backward()
    reference = _mlp()
    reference(x).sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)


def test_leaving_use_reentrant_out_warns_and_uses_the_recommended_variant():
    x = tg.randn(3, dtype=tg.float64)
    model = _mlp(depth=1, width=3)
    with pytest.warns(UserWarning, match="pass use_reentrant explicitly"):
        out = checkpoint(lambda a: model[0](a.reshape(1, 3) @ tg.ones(3, 4, dtype=tg.float64)), x)
    out.sum().backward()  # no input requires grad: only the non-reentrant variant reaches w
    assert model[0].weight.grad is not None


def test_reentrant_warns_when_no_input_requires_grad():
    with pytest.warns(UserWarning, match="none of the inputs has requires_grad"):
        out = checkpoint(_mlp(), tg.randn(2, 4, dtype=tg.float64), use_reentrant=True)
    assert not out.requires_grad


def test_keyword_arguments_reach_the_function_non_reentrant_only():
    x = tg.randn(3, dtype=tg.float64, requires_grad=True)
    out = checkpoint(lambda a, scale: a * scale, x, scale=3.0, use_reentrant=False)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 3.0))
    with pytest.raises(ValueError, match="unexpected keyword arguments scale"):
        checkpoint(lambda a, scale: a * scale, x, scale=3.0, use_reentrant=True)


def test_no_graph_inside_until_backward():
    x = tg.randn(3, dtype=tg.float64, requires_grad=True)
    out = checkpoint(lambda a: a.exp().sin(), x, use_reentrant=False)
    assert out.grad_fn.name() == "CheckpointFunctionBackward"
    assert [type(n).__name__ for n, _ in out.grad_fn.next_functions if n is not None] == \
        ["AccumulateGrad"]


@pytest.mark.parametrize("call, error, match", [
    (lambda x: checkpoint(3, x, use_reentrant=False), TypeError, "function or module"),
    (lambda x: checkpoint(tg.sin, x, use_reentrant="no"), TypeError, "True or False"),
    (lambda x: checkpoint(lambda a: 3, x, use_reentrant=False), TypeError, "return a tensor"),
    (lambda x: checkpoint_sequential(_mlp(), 0, x, use_reentrant=False), ValueError, "segments"),
    (lambda x: checkpoint_sequential(_mlp(), 99, x, use_reentrant=False), ValueError, "segments"),
    (lambda x: checkpoint_sequential("abc", 1, x, use_reentrant=False), TypeError, "Sequential"),
])
def test_bad_arguments_are_refused(call, error, match):
    x = tg.randn(2, 4, dtype=tg.float64, requires_grad=True)
    with pytest.raises(error, match=match):
        call(x)


def _peak_of_a_step(segments):
    tg.manual_seed(0)
    layers = []
    for _ in range(12):  # (a segment of four layers saves one input instead of four outputs)
        layers += [tg.nn.Linear(8, 8), tg.nn.Tanh()]
    model = tg.nn.Sequential(*layers).to("cuda")
    x = tg.randn(64, 8, device="cuda")
    gc.collect()
    tg.cuda.reset_peak_memory_stats()
    base = tg.cuda.memory_allocated()
    out = model(x) if segments is None else checkpoint_sequential(model, segments, x,
                                                                  use_reentrant=False)
    loss = out.sum()
    loss.backward()
    return tg.cuda.max_memory_allocated() - base, [p.grad.cpu().numpy() for p in model.parameters()]


def test_the_peak_is_lower_with_checkpointing_on_cuda():
    with warnings.catch_warnings(), blocking_launches():
        warnings.simplefilter("ignore")
        plain, plain_grads = _peak_of_a_step(None)
        checked, checked_grads = _peak_of_a_step(3)
    assert checked < 0.95 * plain
    for a, b in zip(plain_grads, checked_grads):
        np.testing.assert_allclose(b, a, rtol=1e-5)

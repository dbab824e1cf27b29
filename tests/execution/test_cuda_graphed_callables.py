"""tg.cuda.make_graphed_callables: a module's forward and backward as two replayed graphs."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import numpy as np
import pytest

from teachgrad.streams.stream import capturing


def mlp() -> tg.nn.Module:
    tg.manual_seed(3)
    return tg.nn.Sequential(tg.nn.Linear(3, 5), tg.nn.Tanh(), tg.nn.Linear(5, 2)).to("cuda")


def test_a_graphed_module_gives_eager_outputs_and_gradients_step_after_step():
    eager, graphed = mlp(), mlp()
    sample = tg.zeros(4, 3, device="cuda", requires_grad=True)
    graphed = tg.cuda.make_graphed_callables(graphed, (sample,), num_warmup_iters=2)
    assert graphed.forward_graph.launches and graphed.backward_graph.launches
    rng = np.random.default_rng(1)
    for _ in range(3):  # the parameters' .grad accumulate as in eager mode
        x = rng.normal(size=(4, 3)).astype(np.float32)
        a = tg.tensor(x, device="cuda", requires_grad=True)
        b = tg.tensor(x, device="cuda", requires_grad=True)
        expected, got = eager(a), graphed(b)
        (expected ** 2).sum().backward()
        (got ** 2).sum().backward()
        np.testing.assert_allclose(got.detach().cpu().numpy(), expected.detach().cpu().numpy(),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b.grad.cpu().numpy(), a.grad.cpu().numpy(), rtol=1e-5, atol=1e-6)
    for p, q in zip(eager.parameters(), graphed.parameters()):
        np.testing.assert_allclose(q.grad.cpu().numpy(), p.grad.cpu().numpy(), rtol=1e-5, atol=1e-6)
    assert graphed.forward_graph.replays == 3 and graphed.backward_graph.replays == 3


def test_a_graphed_function_and_the_other_training_mode():
    w = tg.tensor(np.arange(6.0).reshape(3, 2), dtype=tg.float32, device="cuda", requires_grad=True)
    double = tg.cuda.make_graphed_callables(lambda x: (x @ w) * 2, (tg.ones(2, 3, device="cuda"),))
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    out = double(tg.tensor(x, device="cuda"))
    np.testing.assert_allclose(out.detach().cpu().numpy(), x @ np.arange(6.0).reshape(3, 2) * 2)
    model = tg.cuda.make_graphed_callables(mlp(), (tg.zeros(4, 3, device="cuda"),))
    model.eval()  # captured in training mode: eval runs the original forward (any shape)
    assert tuple(model(tg.zeros(7, 3, device="cuda")).shape) == (7, 2)


def test_arguments_of_another_shape_are_refused():
    model = tg.cuda.make_graphed_callables(mlp(), (tg.zeros(4, 3, device="cuda"),))
    with pytest.raises(ValueError, match=r"captured for arguments of shape \[4, 3\].*\[5, 3\]"):
        model(tg.zeros(5, 3, device="cuda"))


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((mlp, ([1.0],)), {}, TypeError, "tuple of tensors"),
    ((mlp, (tg.zeros(2, 3),)), {}, ValueError, "cuda tensors"),
    ((mlp, (tg.zeros(2, 3, device="cuda"),)), dict(num_warmup_iters=-1), ValueError, ">= 0"),
    ((mlp, (tg.zeros(2, 3, device="cuda"),)), dict(allow_unused_input="no"), TypeError, "True or False"),
    ((mlp, (tg.zeros(2, 3, device="cuda"),)), dict(pool=3), TypeError, "graph_pool_handle"),
    (((mlp, mlp), ((tg.zeros(2, 3, device="cuda"),),)), {}, TypeError, "one per callable"),
])
def test_bad_arguments_are_refused_before_any_capture(args, kwargs, error, message):
    make, sample = args
    callables = tuple(m() for m in make) if isinstance(make, tuple) else make()
    with pytest.raises(error, match=message):
        tg.cuda.make_graphed_callables(callables, sample, **kwargs)
    assert capturing == []

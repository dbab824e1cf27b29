"""Adam's and AdamW's update in one compiled pass (``backends/adam_loop.py``): the same bits
as the optimizer's tensor operations (``optim.adam.adam_step``), taken when it can be, and
left for the tensor operations when it cannot."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.backends import adam_loop
from teachgrad.optim import adam

SETTINGS = [
    (tg.optim.Adam, {}),
    (tg.optim.Adam, dict(weight_decay=0.1)),
    (tg.optim.AdamW, dict(weight_decay=0.1)),
    (tg.optim.AdamW, dict(weight_decay=0.0, lr=0.3)),
    (tg.optim.Adam, dict(maximize=True, betas=(0.3, 0.99))),
    (tg.optim.AdamW, dict(maximize=True, betas=(0.6, 0.5), lr=0.1, eps=1e-3)),  # (lerp from g)
]


def _grads(shape, steps, dtype, seed=3):
    rng = np.random.default_rng(seed)
    grads = [rng.standard_normal(shape).astype(dtype) for _ in range(steps)]
    grads[1].flat[:4] = [0.0, -0.0, 1e18, -1e-30]  # (zeros, large and tiny: one rounding each)
    return grads


def _train(optimizer_class, options, dtype, shapes, steps, fused, monkeypatch, calls=None):
    """Parameters of ``shapes`` after ``steps`` updates, with the one-call update allowed
    (``fused``) or not; ``calls`` counts the loop's runs."""
    rng = np.random.default_rng(1)
    params = [tg.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in shapes]
    optimizer = optimizer_class(params, **options)
    grads = [_grads(s, steps, dtype, seed=k) for k, s in enumerate(shapes)]
    with monkeypatch.context() as patch:
        if not fused:
            patch.setattr(adam, "adam_step_in_one_call", lambda *args: False)
        if calls is not None:
            loop = adam_loop.adam_update
            patch.setattr(adam_loop, "adam_update",
                          lambda *args: (calls.append(args[0].size), loop(*args))[1])
        for step in range(steps):
            for p, g in zip(params, grads):
                p.grad = tg.tensor(g[step])
            optimizer.step()
    states = [optimizer.state[p] for p in params]
    return ([p.detach().numpy() for p in params]
            + [s[k].numpy() for s in states for k in ("exp_avg", "exp_avg_sq")]
            + [s["step"] for s in states])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("optimizer_class,options", SETTINGS)
def test_one_pass_gives_the_tensor_operations_bits(optimizer_class, options, dtype, monkeypatch):
    shapes = [(300, 70), (7,), (3, 1, 5)]  # (a large one first: numba is loaded by then)
    calls: list = []
    fused = _train(optimizer_class, options, dtype, shapes, 4, True, monkeypatch, calls)
    operations = _train(optimizer_class, options, dtype, shapes, 4, False, monkeypatch)
    assert sorted(calls) == sorted([7, 15, 21000] * 3)  # every parameter, every step after the first
    for got, want in zip(fused, operations):
        np.testing.assert_array_equal(got, want)


def test_nan_and_inf_gradients_give_the_same_bits(monkeypatch):
    grads = np.array([[np.nan, np.inf, -np.inf, 0.0] * 5000], np.float32)

    def run(fused):
        p = tg.ones(1, 20000, requires_grad=True)
        optimizer = tg.optim.AdamW([p], lr=0.01)
        with monkeypatch.context() as patch:
            if not fused:
                patch.setattr(adam, "adam_step_in_one_call", lambda *args: False)
            for _ in range(2):
                p.grad = tg.tensor(grads)
                optimizer.step()
        return p.detach().numpy(), optimizer.state[p]["exp_avg_sq"].numpy()

    for got, want in zip(run(True), run(False)):
        np.testing.assert_array_equal(got, want)  # (nan where nan, inf where inf)


def _runs_in_one_call(param, grad, **options) -> bool:
    optimizer = tg.optim.Adam([param], **options)
    param.grad = grad
    optimizer.step()  # (the first step starts the state)
    param.grad = grad
    state = optimizer.state[param]
    return adam.adam_step_in_one_call(param, grad, state, optimizer.param_groups[0], False)


def test_the_one_call_is_left_to_the_tensor_operations_when_it_cannot_take_them():
    big = np.ones((200, 100), np.float32)
    assert _runs_in_one_call(tg.tensor(big, requires_grad=True), tg.tensor(big))
    # AMSGrad keeps a third moment the loop does not
    assert not _runs_in_one_call(tg.tensor(big, requires_grad=True), tg.tensor(big), amsgrad=True)
    # a strided gradient (the transpose of a contiguous one), or one of another dtype
    square = np.ones((150, 150), np.float32)
    assert not _runs_in_one_call(tg.tensor(square, requires_grad=True), tg.tensor(square).T)
    # a gradient that is the parameter's own memory
    p = tg.tensor(big, requires_grad=True)
    assert not _runs_in_one_call(p, p.detach())


def test_a_watching_tool_sees_the_tensor_operations(monkeypatch):
    """The profiler and the memory tracker watch every operation: the update then runs
    as adam_step's operations, which they record (the chapters show them)."""
    p = tg.ones(200, 100, requires_grad=True)
    optimizer = tg.optim.Adam([p])
    p.grad = tg.ones(200, 100)
    optimizer.step()  # (the first step makes the state, as adam_step's operations)
    calls: list = []
    loop = adam_loop.adam_update
    monkeypatch.setattr(adam_loop, "adam_update", lambda *args: (calls.append(1), loop(*args))[1])
    with tg.profiler.profile() as prof:
        optimizer.step()
    assert calls == []
    assert "Sqrt" in prof.key_averages().table()
    optimizer.step()
    assert calls == [1]


def test_versions_move_as_the_in_place_operations_move_them():
    p = tg.ones(200, 100, requires_grad=True)
    optimizer = tg.optim.AdamW([p])
    p.grad = tg.ones(200, 100)
    optimizer.step()
    state = optimizer.state[p]
    before = [t._version for t in (p, state["exp_avg"], state["exp_avg_sq"])]
    optimizer.step()
    after = [t._version for t in (p, state["exp_avg"], state["exp_avg_sq"])]
    assert all(b < a for b, a in zip(before, after))
    assert state["step"] == 2


def test_every_device_updates_as_adam_step_does(device, monkeypatch):
    """The numba backend takes the loop at every size (numba is loaded), with the bits of
    its own tensor operations; cuda tensors keep their kernels (the loop never runs)."""
    calls: list = []
    loop = adam_loop.adam_update
    monkeypatch.setattr(adam_loop, "adam_update", lambda *args: (calls.append(1), loop(*args))[1])
    start = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    grads = _grads((3, 4), 3, np.float32)

    def run(fused):
        p = tg.tensor(start, device=device, requires_grad=True)
        optimizer = tg.optim.AdamW([p], lr=0.1)
        with monkeypatch.context() as patch:
            if not fused:
                patch.setattr(adam, "adam_step_in_one_call", lambda *args: False)
            for g in grads:
                p.grad = tg.tensor(g, device=device)
                optimizer.step()
        return p.detach().cpu().numpy()

    unfused = run(False)
    assert calls == []
    np.testing.assert_array_equal(run(True), unfused)
    assert len(calls) == (0 if device == "cuda" else 2)
    # and both are Adam: AdamW's formula in float64, to float32 rounding
    p, m, v = start.astype(np.float64), 0.0, 0.0
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        p = p * (1 - 0.1 * 0.01)
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        p = p - 0.1 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    np.testing.assert_allclose(unfused, p, rtol=1e-5, atol=1e-5)

"""teachgrad.optim: each update rule against numpy transcriptions of PyTorch's documented algorithms."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad import nn, optim

# The objective f(w) = sum(w**4 / 4 + c * w) has gradient w**3 + c: it depends on w,
# so a wrong update in one step shows up in every later gradient.
START = np.array([[0.5, -1.2, 2.0], [0.3, -0.7, 1.1]])
C = np.array([[0.1, -0.4, 0.25], [-0.3, 0.2, 0.6]])
STEPS = 6


def gradient(w: np.ndarray) -> np.ndarray:
    return w**3 + C


# -- the documented rules, one step each, in numpy ----------------------------------------
def sgd_reference(w, g, state, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                  maximize=False):
    g = -g if maximize else g
    if weight_decay != 0:
        g = g + weight_decay * w
    if momentum != 0:
        state["b"] = g.copy() if "b" not in state else momentum * state["b"] + (1 - dampening) * g
        g = g + momentum * state["b"] if nesterov else state["b"]
    return w - lr * g


def adam_reference(w, g, state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                   maximize=False, decoupled=False):
    beta1, beta2 = betas
    t = state["t"] = state.get("t", 0) + 1
    g = -g if maximize else g
    if weight_decay != 0:
        if decoupled:
            w = w * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * w
    state["m"] = beta1 * state.get("m", 0.0) + (1 - beta1) * g
    state["v"] = beta2 * state.get("v", 0.0) + (1 - beta2) * g**2
    m_hat = state["m"] / (1 - beta1**t)
    if amsgrad:
        state["v_max"] = np.maximum(state.get("v_max", 0.0), state["v"])
        v_hat = state["v_max"] / (1 - beta2**t)
    else:
        v_hat = state["v"] / (1 - beta2**t)
    return w - lr * m_hat / (np.sqrt(v_hat) + eps)


def rmsprop_reference(w, g, state, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                      centered=False, maximize=False):
    g = -g if maximize else g
    if weight_decay != 0:
        g = g + weight_decay * w
    state["v"] = alpha * state.get("v", 0.0) + (1 - alpha) * g**2
    v_tilde = state["v"]
    if centered:
        state["g_ave"] = alpha * state.get("g_ave", 0.0) + (1 - alpha) * g
        v_tilde = v_tilde - state["g_ave"] ** 2
    if momentum > 0:
        state["b"] = momentum * state.get("b", 0.0) + g / (np.sqrt(v_tilde) + eps)
        return w - lr * state["b"]
    return w - lr * g / (np.sqrt(v_tilde) + eps)


def adamw_reference(w, g, state, weight_decay=1e-2, **kwargs):
    return adam_reference(w, g, state, weight_decay=weight_decay, decoupled=True, **kwargs)


CASES = [
    (optim.SGD, sgd_reference, {"lr": 0.05}),
    (optim.SGD, sgd_reference, {"lr": 0.05, "momentum": 0.9}),
    (optim.SGD, sgd_reference, {"lr": 0.05, "momentum": 0.8, "dampening": 0.3}),
    (optim.SGD, sgd_reference, {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
    (optim.SGD, sgd_reference, {"lr": 0.02, "weight_decay": 0.5, "maximize": True}),
    (optim.Adam, adam_reference, {}),
    (optim.Adam, adam_reference, {"lr": 0.1, "betas": (0.8, 0.9), "eps": 1e-3}),
    (optim.Adam, adam_reference, {"lr": 0.1, "weight_decay": 0.2}),
    (optim.Adam, adam_reference, {"lr": 0.1, "amsgrad": True, "maximize": True}),
    (optim.Adam, adam_reference, {"lr": 0.1, "betas": (0.9, 0.5), "amsgrad": True}),  # v shrinks: max matters
    (optim.AdamW, adamw_reference, {"lr": 0.1}),
    (optim.AdamW, adamw_reference, {"lr": 0.1, "weight_decay": 0.3, "amsgrad": True}),
    (optim.RMSprop, rmsprop_reference, {}),
    (optim.RMSprop, rmsprop_reference, {"lr": 0.05, "alpha": 0.9, "centered": True}),
    (optim.RMSprop, rmsprop_reference, {"lr": 0.05, "momentum": 0.9}),
    (optim.RMSprop, rmsprop_reference, {"lr": 0.05, "momentum": 0.5, "centered": True, "weight_decay": 0.1}),
]


def run_teachgrad(optimizer_class, hyper, dtype=tg.float64, steps=STEPS):
    w = nn.Parameter(tg.tensor(START, dtype=dtype))
    optimizer = optimizer_class([w], **hyper)
    c = tg.tensor(C, dtype=dtype)
    trajectory = []
    for _ in range(steps):
        optimizer.zero_grad()
        (w**4 / 4 + c * w).sum().backward()
        optimizer.step()
        trajectory.append(w.detach().numpy().copy())
    return trajectory


def run_reference(reference, hyper, steps=STEPS):
    w, state, trajectory = START.copy(), {}, []
    for _ in range(steps):
        w = reference(w, gradient(w), state, **hyper)
        trajectory.append(w)
    return trajectory


@pytest.mark.parametrize("optimizer_class, reference, hyper", CASES)
def test_update_rule_matches_documented_algorithm(optimizer_class, reference, hyper):
    got_steps, expected_steps = run_teachgrad(optimizer_class, hyper), run_reference(reference, hyper)
    for step, (got, expected) in enumerate(zip(got_steps, expected_steps, strict=True)):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=f"step {step + 1}")


@pytest.mark.parametrize("optimizer_class, reference, hyper", [
    (optim.SGD, sgd_reference, {"lr": 0.05, "momentum": 0.9}),
    (optim.Adam, adam_reference, {"lr": 0.1, "betas": (0.8, 0.9), "eps": 1e-3}),
    (optim.RMSprop, rmsprop_reference, {"lr": 0.05, "alpha": 0.9, "centered": True}),
])
def test_float32_parameters_follow_the_same_rule(optimizer_class, reference, hyper):
    got = run_teachgrad(optimizer_class, hyper, dtype=tg.float32)[-1]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, run_reference(reference, hyper)[-1], rtol=2e-5, atol=2e-6)


def test_defaults_match_pytorch():
    w = [nn.Parameter(tg.zeros(1))]
    assert optim.SGD(w).defaults["lr"] == 1e-3
    adam = optim.Adam(w).defaults
    assert (adam["lr"], adam["betas"], adam["eps"], adam["weight_decay"]) == (1e-3, (0.9, 0.999), 1e-8, 0.0)
    rms = optim.RMSprop(w).defaults
    assert (rms["lr"], rms["alpha"], rms["eps"]) == (1e-2, 0.99, 1e-8)
    assert optim.AdamW(w).defaults["weight_decay"] == 1e-2


def test_param_groups_have_their_own_hyperparameters():
    a, b = nn.Parameter(tg.ones(2)), nn.Parameter(tg.ones(2))
    optimizer = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1)
    assert [g["lr"] for g in optimizer.param_groups] == [0.1, 0.5]
    (a.sum() + b.sum()).backward()
    optimizer.step()
    assert a.tolist() == pytest.approx([0.9, 0.9]) and b.tolist() == pytest.approx([0.5, 0.5])


def test_step_updates_in_place_and_skips_parameters_without_grad():
    used, unused = nn.Parameter(tg.ones(2)), nn.Parameter(tg.ones(2))
    optimizer = optim.Adam([used, unused], lr=0.1)
    (used * 3).sum().backward()
    loss = optimizer.step(closure=lambda: tg.tensor(7.0))
    assert loss.item() == 7.0
    assert used.tolist() == pytest.approx([0.9, 0.9]) and unused.tolist() == [1.0, 1.0]
    assert list(optimizer.state) == [used] and optimizer.state[used]["step"] == 1
    assert used.requires_grad and used.is_leaf


def test_zero_grad_to_none_or_zeros():
    w = nn.Parameter(tg.ones(3))
    optimizer = optim.SGD([w], lr=0.1)
    (w * 2).sum().backward()
    grad = w.grad
    optimizer.zero_grad(set_to_none=False)
    assert w.grad is grad and w.grad.tolist() == [0.0, 0.0, 0.0]
    optimizer.zero_grad()
    assert w.grad is None


@pytest.mark.parametrize("optimizer_class, hyper", [
    (optim.SGD, {"lr": 0.05, "momentum": 0.9}),
    (optim.Adam, {"lr": 0.1, "amsgrad": True}),
    (optim.RMSprop, {"lr": 0.05, "momentum": 0.5, "centered": True}),
])
def test_state_dict_round_trip_continues_identically(optimizer_class, hyper):
    def build():
        w = nn.Parameter(tg.tensor(START))
        return w, optimizer_class([w], **hyper)

    def advance(w, optimizer, steps):
        for _ in range(steps):
            optimizer.zero_grad()
            (w**4 / 4 + tg.tensor(C) * w).sum().backward()
            optimizer.step()

    w, optimizer = build()
    advance(w, optimizer, 3)
    saved = optimizer.state_dict()
    assert saved["param_groups"][0]["params"] == [0] and list(saved["state"]) == [0]
    w2, optimizer2 = build()
    with tg.no_grad():
        w2.copy_(w)
    optimizer2.load_state_dict(saved)
    advance(w, optimizer, 2)  # the loaded state is a copy: this must not move optimizer2's state
    advance(w2, optimizer2, 2)
    np.testing.assert_array_equal(w2.detach().numpy(), w.detach().numpy())


def test_load_state_dict_checks_groups_before_changing_anything():
    a, b = nn.Parameter(tg.ones(1)), nn.Parameter(tg.ones(1))
    saved = optim.SGD([a, b], lr=0.5).state_dict()
    target = optim.SGD([a], lr=0.1)
    with pytest.raises(ValueError, match="group 0 has 2 parameters saved, 1 here"):
        target.load_state_dict(saved)
    assert target.param_groups[0]["lr"] == 0.1


def test_constructor_errors():
    w = nn.Parameter(tg.ones(1))
    with pytest.raises(ValueError, match=r"Invalid learning rate: -0.1 \(it must be >= 0\)"):
        optim.SGD([w], lr=-0.1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening"):
        optim.SGD([w], nesterov=True)
    with pytest.raises(ValueError, match=r"Invalid beta parameter at index 1: 1.0 \(it must be in \[0, 1\)\)"):
        optim.Adam([w], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts, but got a single Tensor"):
        optim.Adam(w)
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        optim.SGD([{"params": [w]}, {"params": [w]}])
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.SGD([w * 2])
    with pytest.raises(TypeError, match="ordering of tensors in sets will change between runs"):
        optim.SGD({w})


def test_repr_lists_each_group():
    optimizer = optim.SGD([nn.Parameter(tg.ones(1))], lr=0.1, momentum=0.9)
    assert repr(optimizer) == (
        "SGD (\nParameter Group 0\n    dampening: 0.0\n    lr: 0.1\n    maximize: False\n"
        "    momentum: 0.9\n    nesterov: False\n    weight_decay: 0.0\n)"
    )

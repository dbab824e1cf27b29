"""``tg.amp.GradScaler`` replays PyTorch's recorded step sequences (``scripts/record_lowprec.py``).

Each sequence trains two parameters with SGD for ten steps, injecting inf into the
loss at chosen steps; the scale, the growth tracker and the parameters after every
step, and the gradients after ``unscale_`` and clipping, must be PyTorch's.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.amp.grad_scaler import next_scale
from lowprec_fixture import load

RUNS = {  # name -> (init_scale, growth_interval, steps with an inf, clip norm)
    "grow": (2.0 ** 4, 3, set(), None),
    "backoff": (2.0 ** 16, 2, {1, 2, 5}, None),
    "clip": (2.0 ** 10, 4, {3}, 0.5),
    "overflow_to_inf_scale": (2.0 ** 126, 1, set(), None),
}


def _replay(init_scale, growth_interval, inf_steps, clip):
    w = tg.tensor([0.5, -1.25, 2.0], requires_grad=True)
    b = tg.tensor([0.25], requires_grad=True)
    opt = tg.optim.SGD([w, b], lr=0.1)
    scaler = tg.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    x = tg.tensor([1.0, 2.0, -0.5])
    seen = {"scales": [], "trackers": [], "params": [], "clipped": []}
    for step in range(10):
        opt.zero_grad()
        loss = ((w * x).sum() + b).pow(2).sum()
        if step in inf_steps:
            loss = loss * tg.tensor(float("inf"))
        scaler.scale(loss).backward()
        if clip is not None:
            scaler.unscale_(opt)
            tg.nn.utils.clip_grad_norm_([w, b], max_norm=clip)
            seen["clipped"].append(tg.cat([w.grad, b.grad]).tolist())
        scaler.step(opt)
        scaler.update()
        seen["scales"].append(scaler.get_scale())
        seen["trackers"].append(scaler.state_dict()["_growth_tracker"])
        seen["params"].append(tg.cat([w.detach(), b.detach()]).tolist())
    seen["state_dict"] = scaler.state_dict()
    return seen


@pytest.mark.filterwarnings("ignore:.*encountered in multiply:RuntimeWarning")  # the injected infs
@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_sequence_of_steps_replays_pytorchs(name):
    want = load()[1]["scaler"][name]
    got = _replay(*RUNS[name])
    assert got["scales"] == want["scales"]
    assert got["trackers"] == want["trackers"]
    assert got["state_dict"] == want["state_dict"]
    np.testing.assert_allclose(got["params"], want["params"], rtol=1e-6)
    if want["clipped"]:
        np.testing.assert_allclose(np.nan_to_num(got["clipped"], nan=7.0),
                                   np.nan_to_num(want["clipped"], nan=7.0), rtol=1e-6)


def test_a_step_with_an_inf_gradient_leaves_the_parameters_alone():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = tg.optim.SGD([w], lr=0.5)
    scaler = tg.amp.GradScaler("cpu", init_scale=8.0)
    scaler.scale((w * tg.tensor([float("inf"), 1.0])).sum()).backward()
    scaler.step(opt)
    assert w.tolist() == [1.0, 2.0]
    scaler.update()
    assert scaler.get_scale() == 4.0


def test_the_update_rule():
    s = np.float32(1024.0)
    assert next_scale(s, 0, True, 2.0, 0.5, 3) == (512.0, 0)
    assert next_scale(s, 0, False, 2.0, 0.5, 3) == (1024.0, 1)
    assert next_scale(s, 2, False, 2.0, 0.5, 3) == (2048.0, 0)
    big = np.float32(3e38)
    assert next_scale(big, 0, False, 2.0, 0.5, 1) == (big, 0)  # growing would overflow
    assert isinstance(next_scale(s, 2, False, 2.0, 0.5, 3)[0], np.float32)


def _setup():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = tg.optim.SGD([w], lr=0.1)
    scaler = tg.amp.GradScaler("cpu", init_scale=4.0)
    scaler.scale(w.sum()).backward()
    return w, opt, scaler


def test_unscale_divides_the_gradients_once_per_step():
    w, opt, scaler = _setup()
    assert w.grad.tolist() == [4.0, 4.0]
    scaler.unscale_(opt)
    assert w.grad.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    assert w.grad.tolist() == [1.0, 1.0]  # the refused call changed nothing
    scaler.step(opt)  # uses the unscaled gradients, does not divide again
    assert w.tolist() == pytest.approx([0.9, 1.9])
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) is being called after step"):
        scaler.unscale_(opt)
    scaler.update()
    assert scaler.get_scale() == 4.0


def test_float16_gradients_are_refused_as_in_pytorch():
    w = tg.tensor([1.0, 2.0], dtype=tg.float16, requires_grad=True)
    opt = tg.optim.SGD([w], lr=0.1)
    scaler = tg.amp.GradScaler("cpu", init_scale=4.0)
    scaler.scale(w.sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        scaler.unscale_(opt)
    assert w.grad.tolist() == [4.0, 4.0]


def test_update_before_any_step_and_step_before_any_scale_are_refused():
    scaler = tg.amp.GradScaler("cpu")
    opt = tg.optim.SGD([tg.tensor([1.0], requires_grad=True)], lr=0.1)
    with pytest.raises(RuntimeError, match="no loss was scaled yet"):
        scaler.step(opt)
    scaler.scale(tg.tensor(1.0))
    with pytest.raises(RuntimeError, match="No inf checks were recorded prior to update"):
        scaler.update()
    with pytest.raises(RuntimeError, match="none of its parameters has a gradient"):
        scaler.step(opt)


def test_a_disabled_scaler_passes_everything_through():
    w, opt, _ = _setup()
    scaler = tg.amp.GradScaler("cpu", enabled=False)
    loss = w.sum()
    assert scaler.scale(loss) is loss
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {}
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == pytest.approx([0.6, 1.6])


def test_scale_multiplies_by_a_0d_float32_scale_as_pytorch_does():
    scaler = tg.amp.GradScaler("cpu", init_scale=2.0)
    # (a 0-d 16-bit loss meets a 0-d float32 scale: float32; a 16-bit vector stays 16-bit)
    assert scaler.scale(tg.tensor(3.0, dtype=tg.bfloat16)).dtype is tg.float32
    assert scaler.scale(tg.ones(2, dtype=tg.bfloat16)).dtype is tg.bfloat16
    a, b = scaler.scale([tg.tensor(1.0), tg.tensor(2.0)])
    assert (a.item(), b.item()) == (2.0, 4.0)
    with pytest.raises(TypeError, match="expected a tensor or a list/tuple of tensors"):
        scaler.scale(3.0)


def test_state_dict_round_trip_and_validation():
    _, index = load()
    saved = index["scaler"]["backoff"]["state_dict"]
    scaler = tg.amp.GradScaler("cpu")
    scaler.load_state_dict(saved)
    assert scaler.state_dict() == saved
    for bad, message in [({}, "source state dict is empty"),
                         ({**saved, "extra": 1}, "expected the keys"),
                         ({**saved, "scale": -1.0}, "init_scale must be a positive number"),
                         ({**saved, "growth_factor": 0.5}, "growth_factor must be > 1.0"),
                         ({**saved, "_growth_tracker": -2}, "_growth_tracker must be an int"),
                         ({**saved, "growth_interval": 1.5}, "growth_interval must be a positive")]:
        fresh = tg.amp.GradScaler("cpu", init_scale=8.0)
        with pytest.raises((RuntimeError, KeyError, ValueError), match=message):
            fresh.load_state_dict(bad)
        assert fresh.state_dict()["scale"] == 8.0  # nothing was half-loaded


@pytest.mark.parametrize("kwargs, message", [
    ({"device": "tpu"}, "device must be 'cpu' or 'cuda'"),
    ({"init_scale": 0}, "init_scale must be a positive number"),
    ({"growth_factor": 1.0}, "growth_factor must be > 1.0"),
    ({"backoff_factor": 1.0}, "backoff_factor must be in \\(0, 1\\)"),
    ({"growth_interval": 0}, "growth_interval must be a positive int"),
    ({"enabled": 1}, "enabled must be True or False"),
])
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        tg.amp.GradScaler(**{"device": "cpu", **kwargs})


def test_the_scale_is_a_float_as_in_pytorch():
    scaler = tg.amp.GradScaler("cpu")
    assert scaler.get_scale() == 65536.0 and isinstance(scaler.get_scale(), float)
    assert math.isinf(_replay(2.0 ** 126, 1, set(), None)["scales"][-1]) is False

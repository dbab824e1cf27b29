"""Learning-rate schedulers against PyTorch's sequences (recorded by
scripts/record_torch_layers.py into tests/fixtures/torch_lr_scheduler.json)."""
import json
import os

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.optim import lr_scheduler as S

with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures",
                       "torch_lr_scheduler.json")) as _f:
    FIXTURE = json.load(_f)
SEQUENCES = FIXTURE["sequences"]


def warmup(epoch: int) -> float:  # the same function the recording used
    return min(1.0, (epoch + 1) / 5) * 0.95 ** epoch


def _optimizer() -> tg.optim.SGD:
    a, b = tg.zeros(1, requires_grad=True), tg.zeros(1, requires_grad=True)
    low = FIXTURE["groups_lr"][1]
    return tg.optim.SGD([{"params": [a]}, {"params": [b], "lr": low}], lr=FIXTURE["groups_lr"][0])


def _scheduler(spec: dict, optimizer, **extra) -> S.LRScheduler:
    options = dict(spec["options"])
    if spec["class"] == "LambdaLR":
        options["lr_lambda"] = warmup
    return getattr(S, spec["class"])(optimizer, **options, **extra)


def _ids():
    return [f"{s['class']}-{'-'.join(f'{k}={v}' for k, v in s['options'].items())}" for s in SEQUENCES]


@pytest.mark.parametrize("spec", SEQUENCES, ids=_ids())
def test_learning_rates_match_pytorch_step_for_step(spec):
    optimizer = _optimizer()
    scheduler = _scheduler(spec, optimizer)
    seen = [scheduler.get_last_lr()]
    for _ in range(len(spec["lrs"]) - 1):
        optimizer.step()
        scheduler.step()
        seen.append(scheduler.get_last_lr())
        assert [g["lr"] for g in optimizer.param_groups] == seen[-1]
    np.testing.assert_allclose(seen, spec["lrs"], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("spec", SEQUENCES, ids=_ids())
def test_state_dict_resumes_the_same_sequence_even_through_a_file(spec, tmp_path):
    optimizer = _optimizer()
    scheduler = _scheduler(spec, optimizer)
    for _ in range(12):
        optimizer.step()
        scheduler.step()
    tg.save({"scheduler": scheduler.state_dict(), "optimizer": optimizer.state_dict()},
            tmp_path / "ckpt.tg")
    checkpoint = tg.load(tmp_path / "ckpt.tg")
    fresh_optimizer = _optimizer()
    fresh_optimizer.load_state_dict(checkpoint["optimizer"])
    resumed = _scheduler(spec, fresh_optimizer)
    resumed.load_state_dict(checkpoint["scheduler"])
    assert resumed.last_epoch == 12
    for epoch in range(13, len(spec["lrs"])):
        fresh_optimizer.step()
        resumed.step()
        assert resumed.get_last_lr() == pytest.approx(spec["lrs"][epoch], rel=1e-12, abs=1e-15)


def test_the_fixture_covers_every_scheduler():
    assert {s["class"] for s in SEQUENCES} == {
        "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR"}


def test_step_with_an_epoch_uses_the_closed_form_and_warns():
    optimizer = _optimizer()
    scheduler = S.StepLR(optimizer, step_size=3, gamma=0.5)
    with pytest.warns(UserWarning, match="epoch parameter in `scheduler.step\\(\\)`"):
        scheduler.step(7)
    assert scheduler.get_last_lr() == pytest.approx([0.1 * 0.25, 0.02 * 0.25])
    cosine = S.CosineAnnealingLR(_optimizer(), T_max=4)
    with pytest.warns(UserWarning):
        cosine.step(2)
    assert cosine.get_last_lr() == pytest.approx([0.05, 0.01])


def test_lambda_lr_saves_callable_objects_but_not_functions():
    class Decay:
        def __init__(self, rate):
            self.rate = rate

        def __call__(self, epoch):
            return self.rate ** epoch

    optimizer = _optimizer()
    scheduler = S.LambdaLR(optimizer, [Decay(0.5), lambda epoch: 1.0])
    state = scheduler.state_dict()
    assert state["lr_lambdas"] == [{"rate": 0.5}, None]
    state["lr_lambdas"] = [{"rate": 0.25}, None]
    scheduler.load_state_dict(state)
    assert scheduler.lr_lambdas[0].rate == 0.25


def test_the_initial_lr_is_kept_in_the_groups_and_needed_to_resume():
    optimizer = _optimizer()
    S.ExponentialLR(optimizer, gamma=0.5)
    assert [g["initial_lr"] for g in optimizer.param_groups] == [0.1, 0.02]
    with pytest.raises(KeyError, match=r"param 'initial_lr' is not specified in param_groups\[0\] "
                                       r"when resuming scheduler with last_epoch >= 0"):
        S.StepLR(_optimizer(), step_size=2, last_epoch=4)


@pytest.mark.parametrize("make, message", [
    (lambda o: S.StepLR("sgd", 2), "str is not an Optimizer"),
    (lambda o: S.LambdaLR("sgd", [warmup]), "str is not an Optimizer"),
    (lambda o: S.StepLR(o, 0), "step_size must be a positive int, got 0"),
    (lambda o: S.StepLR(o, 2.5), "step_size must be a positive int, got 2.5"),
    (lambda o: S.StepLR(o, 2, gamma="x"), "gamma must be a number, got 'x'"),
    (lambda o: S.CosineAnnealingLR(o, T_max=0), "T_max must be a positive int, got 0"),
    (lambda o: S.MultiStepLR(o, [2, 4.5]), r"milestones must be epoch numbers \(ints\)"),
    (lambda o: S.LambdaLR(o, [warmup]), "Expected 2 lr_lambdas, but got 1"),
    (lambda o: S.LambdaLR(o, 0.5), "lr_lambda must be a function of the epoch, got 0.5"),
    (lambda o: S.ExponentialLR(o, 0.9, last_epoch=-2), "last_epoch must be -1"),
])
def test_bad_arguments_are_refused_before_the_optimizer_changes(make, message):
    optimizer = _optimizer()
    with pytest.raises((TypeError, ValueError), match=message):
        make(optimizer)
    assert [g["lr"] for g in optimizer.param_groups] == [0.1, 0.02]
    assert all("initial_lr" not in g for g in optimizer.param_groups)


def test_load_state_dict_refuses_another_objects_state_and_changes_nothing():
    scheduler = S.StepLR(_optimizer(), step_size=2)
    with pytest.raises(KeyError, match=r"missing key\(s\) \['base_lrs', 'last_epoch'\]: this is "
                                       r"not a scheduler's state_dict"):
        scheduler.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="the state has 1 learning rates but the optimizer has 2"):
        scheduler.load_state_dict({"base_lrs": [0.1], "last_epoch": 3})
    assert scheduler.last_epoch == 0 and scheduler.base_lrs == [0.1, 0.02]

"""Exercise 17.3, loss scaling: the checker accepts PyTorch's update rule and rejects
each way of getting it wrong, with a hint that names the mistake."""
from __future__ import annotations

import math

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.amp.grad_scaler import next_scale
from teachgrad.exercises import ch17
from teachgrad.exercises.core import SOLVED


def reference(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    """The chapter's solution."""
    if found_inf:
        return scale * backoff_factor, 0
    growth_tracker += 1
    if growth_tracker == growth_interval:
        with np.errstate(over="ignore"):
            grown = np.float32(scale * growth_factor)
        return (float(grown) if math.isfinite(grown) else scale), 0
    return scale, growth_tracker


def rejected(feedback, *words: str) -> None:
    assert feedback.status in ("wrong", "error"), feedback.message
    for word in words:
        assert word in feedback.message, feedback.message


def test_the_reference_rule_is_solved_and_ran_inside_grad_scaler():
    feedback = ch17.check_update_scale(reference)
    assert feedback.status == SOLVED, feedback.message
    assert "GradScaler ran on it" in feedback.message


def test_the_exercise_is_in_the_catalog_as_a_build_exercise():
    [exercise] = [e for e in tg.exercises.catalog(kind="build") if e.id == "17.3"]
    assert exercise.checker == "ch17.check_update_scale"
    assert exercise.plugs_into == ("amp.update_scale",)
    assert "amp.update_scale" in tg.exercises.parts()


def test_no_backoff():
    def wrong(scale, tracker, found_inf, growth, backoff, interval):
        return reference(scale, tracker, False, growth, backoff, interval)
    rejected(ch17.check_update_scale(wrong), "multiply it by backoff_factor")


def test_the_count_survives_an_overflow():
    def wrong(scale, tracker, found_inf, growth, backoff, interval):
        if found_inf:
            return scale * backoff, tracker
        return reference(scale, tracker, found_inf, growth, backoff, interval)
    rejected(ch17.check_update_scale(wrong), "starts again from 0")


def test_no_float32_overflow_guard():
    def wrong(scale, tracker, found_inf, growth, backoff, interval):
        if not found_inf and tracker + 1 == interval:
            return scale * growth, 0
        return reference(scale, tracker, found_inf, growth, backoff, interval)
    rejected(ch17.check_update_scale(wrong), "float32's largest number")


def test_grows_when_the_count_passes_the_interval():
    def wrong(scale, tracker, found_inf, growth, backoff, interval):
        if not found_inf and tracker + 1 > interval:
            return reference(scale, interval - 1, found_inf, growth, backoff, interval)
        return reference(scale, tracker, found_inf, growth, backoff, interval)
    rejected(ch17.check_update_scale(wrong), "reaching growth_interval exactly")


def test_one_step_late():
    def wrong(scale, tracker, found_inf, growth, backoff, interval):
        return reference(scale, tracker, found_inf, growth, backoff, interval + 1)
    rejected(ch17.check_update_scale(wrong), "wrong update")


def test_calling_the_engines_rule_is_not_writing_it():
    def wrong(scale, tracker, found_inf, growth, backoff, interval):
        new, count = next_scale(np.float32(scale), tracker, found_inf, growth, backoff, interval)
        return float(new), count
    rejected(ch17.check_update_scale(wrong))


def test_a_plugged_rule_runs_inside_grad_scaler_and_its_answer_is_checked():
    calls = []

    def halve_always(scale, tracker, found_inf, growth, backoff, interval):
        calls.append(found_inf)
        return scale / 2, 0

    w = tg.tensor([1.0], requires_grad=True)
    opt = tg.optim.SGD([w], lr=0.1)
    scaler = tg.amp.GradScaler("cpu", init_scale=8.0)
    with tg.exercises.plugged("amp.update_scale", halve_always):
        scaler.scale(w.sum()).backward()
        scaler.step(opt)
        scaler.update()
    assert calls == [False] and scaler.get_scale() == 4.0

    with tg.exercises.plugged("amp.update_scale", lambda *args: "twice"):
        scaler.scale(w.sum()).backward()
        scaler.step(opt)
        with pytest.raises(tg.autograd.parts.PartError, match="returned 'twice'"):
            scaler.update()

"""Exercise 17.3, loss scaling: the rule ``GradScaler.update`` adapts its scale by.

The learner writes ``update_scale(scale, growth_tracker, found_inf, growth_factor,
backoff_factor, growth_interval) -> (new_scale, new_growth_tracker)``. It is checked
on the chapter's cases, on cases drawn by hypothesis against the engine's rule
(PyTorch's, in float32), and then plugged into the part ``amp.update_scale``: a
training run with overflowing steps must end with the same scales, step for step, as
with the engine's own rule.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

import teachgrad as tg

from ..building import plugged_workload, property_test, written_by_the_learner
from ..core import Feedback, Mismatch, Test, check, unseen_rng

PART = "amp.update_scale"
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _engine(scale: float, tracker: int, found_inf: bool, growth: float, backoff: float,
            interval: int) -> tuple[float, int]:
    from ...amp.grad_scaler import next_scale
    new_scale, new_tracker = next_scale(np.float32(scale), tracker, found_inf, growth, backoff,
                                        interval)
    return float(new_scale), new_tracker


def _hint(args: tuple, expected: tuple, got: tuple) -> str:
    scale, tracker, found_inf, growth, backoff, interval = args
    if found_inf:
        if got[0] != expected[0]:
            return ("an inf/NaN gradient means the scale was too big: multiply it by "
                    "backoff_factor")
        return "after an overflow the count of clean steps starts again from 0"
    if tracker + 1 == interval and float(np.float32(scale * growth)) == math.inf:
        return ("the scale is a float32: growing it past float32's largest number "
                f"({FLOAT32_MAX:.4g}) would make it inf, so keep the old scale (and restart "
                "the count)")
    if got[1] != expected[1]:
        return ("a clean step adds one to the count; the growth_interval-th clean step in a "
                "row (the count reaching growth_interval exactly) grows the scale and "
                "restarts the count at 0")
    return ("grow (multiply by growth_factor) only when the count reaches growth_interval; "
            "otherwise the scale stays as it is")


def _call(update_scale: Callable, args: tuple) -> None:
    """Run the learner's rule on ``args``: a Mismatch unless it gives the engine's answer."""
    args = (float(np.float32(args[0])),) + tuple(args[1:])  # the scale is a float32 value
    expected = _engine(*args)
    with written_by_the_learner(PART, "update_scale"):
        got = update_scale(*args)
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        raise Mismatch("update_scale should return a pair (new_scale, new_growth_tracker)",
                       expected, got, "return new_scale, new_growth_tracker")
    try:
        answer = (float(np.float32(got[0])), int(got[1]))
    except (TypeError, ValueError, OverflowError):
        raise Mismatch("update_scale should return two numbers", expected, got,
                       "return new_scale, new_growth_tracker") from None
    if answer != expected:
        scale, tracker, found_inf, growth, backoff, interval = args
        raise Mismatch(f"wrong update for scale={scale:g}, growth_tracker={tracker}, "
                       f"found_inf={found_inf}, growth_factor={growth:g}, "
                       f"backoff_factor={backoff:g}, growth_interval={interval}",
                       expected, answer, _hint(args, expected, answer))


def _case(description: str, update_scale: Callable, *args: Any) -> Test:
    return Test(description, lambda: _call(update_scale, args))


def _drawn(st: Any) -> Any:
    interval = st.integers(1, 6)
    return st.tuples(st.sampled_from([2.0 ** 16, 1024.0, 3.0, 0.375, 2.0 ** 126, 2.0 ** 127,
                                      1e38, 6.5e-8]),
                     st.integers(0, 8), st.booleans(), st.sampled_from([2.0, 1.5, 4.0, 3.0]),
                     st.sampled_from([0.5, 0.25, 0.75, 0.1]), interval)


def _scales_of_a_run(seed: int, inf_steps: set[int]) -> list[float]:
    """The scale after each of 12 steps of a small model trained with a GradScaler
    (growth_interval 2), the loss made inf at ``inf_steps``."""
    rng = np.random.default_rng(seed)
    w = tg.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    opt = tg.optim.SGD([w], lr=0.05)
    scaler = tg.amp.GradScaler("cpu", init_scale=float(2 ** int(rng.integers(8, 17))),
                               growth_interval=2)
    x = tg.tensor(rng.standard_normal(3).astype(np.float32))
    scales = []
    for step in range(12):
        opt.zero_grad()
        loss = ((w * x).sum() - 1.0) ** 2
        if step in inf_steps:
            loss = loss * math.inf
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales


def _plugged_run(update_scale: Callable) -> Test:
    rng = unseen_rng()
    seed = int(rng.integers(2 ** 31))
    inf_steps = {int(i) for i in rng.choice(12, size=4, replace=False)}

    def run() -> None:
        with np.errstate(all="ignore"):
            engines = _scales_of_a_run(seed, inf_steps)
            with plugged_workload(PART, update_scale, "GradScaler.update ran"):
                yours = _scales_of_a_run(seed, inf_steps)
        if yours != engines:
            step = next(i for i, (a, b) in enumerate(zip(yours, engines)) if a != b)
            raise Mismatch(f"with your rule inside GradScaler, the scale after step {step} "
                           f"(overflows at steps {sorted(inf_steps)}) differs",
                           engines, yours, "GradScaler.update calls your rule once per step "
                           "with the count it returned the step before")

    return Test(f"a 12-step training run with overflows at steps {sorted(inf_steps)}, your "
                "rule plugged into amp.update_scale, against the engine's run", run)


def check_update_scale(update_scale: Callable) -> Feedback:
    """Exercise 17.3: ``update_scale(scale, growth_tracker, found_inf, growth_factor,
    backoff_factor, growth_interval) -> (new_scale, new_growth_tracker)``, PyTorch's rule:
    an overflow multiplies the scale by ``backoff_factor`` and restarts the count; the
    ``growth_interval``-th clean step in a row multiplies it by ``growth_factor`` (unless
    float32 would overflow) and restarts the count; any other step counts one more."""
    tests = [
        _case("an overflow at scale 65536", update_scale, 65536.0, 5, True, 2.0, 0.5, 2000),
        _case("a clean step, 5 clean steps before it", update_scale, 65536.0, 5, False, 2.0,
              0.5, 2000),
        _case("the 3rd clean step in a row, growth_interval 3", update_scale, 1024.0, 2, False,
              2.0, 0.5, 3),
        _case("a clean step, growth_interval 1", update_scale, 8.0, 0, False, 2.0, 0.5, 1),
        _case("growth that would pass float32's largest number", update_scale, 2.0 ** 127, 0,
              False, 2.0, 0.5, 1),
        _case("an overflow at the 3rd step, growth_interval 3", update_scale, 1024.0, 2, True,
              2.0, 0.25, 3),
        _case("a count loaded from a state dict with a longer interval (above this one): "
              "PyTorch grows only when the count equals the interval", update_scale, 512.0, 7,
              False, 2.0, 0.5, 4),
        property_test("scales, counts, factors and intervals drawn at random", _drawn,
                      lambda example: _call(update_scale, example), examples=60),
        _plugged_run(update_scale),
    ]
    return check("17.3", tests, candidate=update_scale,
                 solved="your rule backs the scale off after an overflow and grows it after "
                        "growth_interval clean steps, as PyTorch's; GradScaler ran on it.")

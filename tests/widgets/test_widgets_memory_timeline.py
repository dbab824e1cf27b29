"""MemoryTimelineView draws the engine's memory timeline: bands by category, phases, peak."""
import gc
import re
import warnings

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.memory.timeline import CATEGORIES, categorize
from teachgrad.kernels.caching_allocator import allocator_for
from teachgrad.widgets import MemoryTimelineView
from teachgrad.widgets.memory_timeline import phase_starts, stacked


@pytest.fixture(scope="module")
def recorded():
    """One Adam step of a small MLP on cuda, recorded."""
    warnings.simplefilter("ignore")
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(8, 16), tg.nn.Tanh(), tg.nn.Linear(16, 1)).to("cuda")
    optimizer = tg.optim.Adam(model.parameters())
    x, y = tg.randn(32, 8, device="cuda"), tg.randn(32, 1, device="cuda")
    gc.collect()
    with tg.cuda.memory.memory_timeline(model, optimizer) as timeline:
        timeline.mark("forward")
        loss = ((model(x) - y) ** 2).mean()
        timeline.mark("backward")
        loss.backward()
        timeline.mark("step")
        optimizer.step()
    return timeline, model, optimizer


def _at(timeline, phase, event="mark"):
    return next(s for s in timeline.samples if s.phase == phase and s.event == event)


def test_each_category_holds_what_the_engine_says(recorded):
    timeline, model, optimizer = recorded
    param_bytes = sum(-(-p.numel() * 4 // 512) * 512 for p in model.parameters())
    start, backward, step = (_at(timeline, p) for p in ("forward", "backward", "step"))
    assert start.by_category["parameters"] == param_bytes
    assert start.by_category["activations"] == 0 and start.by_category["gradients"] == 0
    # saved for backward after the forward pass: x (for the first Linear), tanh's output,
    # the difference and the square's input
    assert backward.by_category["activations"] > 0
    assert step.by_category["activations"] == 0  # backward freed them
    assert step.by_category["gradients"] == param_bytes  # one grad per parameter, same size
    last = timeline.samples[-1]
    assert last.by_category["optimizer state"] == 2 * param_bytes  # Adam's two moments


def test_the_samples_add_up_to_the_allocators_count(recorded):
    timeline, *_ = recorded
    live = allocator_for(0).live_blocks()
    kinds = categorize(live, timeline.parameters, timeline.optimizers)
    assert set(kinds.values()) <= set(CATEGORIES)
    for s in timeline.samples:
        assert s.total == sum(s.by_category.values())
    assert timeline.peak_bytes() == max(s.total for s in timeline.samples)


def test_the_bands_stack_in_category_order_and_the_top_is_the_total(recorded):
    timeline, *_ = recorded
    tops = stacked(timeline)
    assert list(tops) == list(CATEGORIES)
    for lower, upper in zip(CATEGORIES, CATEGORIES[1:]):
        assert all(a <= b for a, b in zip(tops[lower], tops[upper]))
    assert tops[CATEGORIES[-1]] == [s.total for s in timeline.samples]


def test_the_picture_has_a_band_per_category_the_phases_and_the_peak(recorded):
    timeline, *_ = recorded
    view = MemoryTimelineView(timeline)
    svg = view.to_svg()
    assert re.findall(r'data-category="([^"]+)"', svg) == list(CATEGORIES)
    assert [label for _, label in phase_starts(timeline)] == ["forward", "backward", "step"]
    for label in ("forward", "backward", "step"):
        assert f">{label}<" in svg
    index, total = view.peak()
    assert total == timeline.peak_bytes()
    assert f"peak {tg.cuda.memory.format_bytes(total)}" in svg


def test_refuses_what_is_not_a_recorded_timeline():
    with pytest.raises(TypeError, match="memory_timeline"):
        MemoryTimelineView([1, 2, 3])


def test_recording_refuses_a_bad_model_and_nesting():
    with pytest.raises(TypeError, match="nn.Module"):
        tg.cuda.memory.memory_timeline(model=3)
    with tg.cuda.memory.memory_timeline():
        with pytest.raises(RuntimeError, match="already recording"):
            with tg.cuda.memory.memory_timeline():
                pass
    with tg.cuda.memory.memory_timeline() as timeline:
        with pytest.raises(TypeError, match="label"):
            timeline.mark(3)


def test_recording_asynchronous_launches_sees_the_frees_when_the_kernels_have_run():
    warnings.simplefilter("ignore")
    x = tg.randn(64, 8, device="cuda", requires_grad=True)
    gc.collect()
    with tg.cuda.memory.memory_timeline(blocking=False) as timeline:
        timeline.mark("forward")
        loss = (x * 2.0).tanh().sum()
        timeline.mark("backward")
        loss.backward()
    # leaving the block waited for the stream: every temporary is freed by then, and what
    # is left is the input, its gradient and the loss
    last = timeline.samples[-1]
    assert last.by_category["activations"] == 0
    assert last.total - timeline.samples[0].total == 2048 + 512  # x.grad and the loss
    assert max(s.by_category["activations"] for s in timeline.samples) >= 2048

"""Timeline draws a recorded run of the async queue: host waits, device ops, idle gaps."""
import teachgrad as tg

import re
import threading

import numpy as np
import pytest
from numba import cuda

from teachgrad import streams
from teachgrad.kernels.launch import launch
from teachgrad.kernels.transfer import to_device
from teachgrad.widgets import Timeline
from teachgrad.widgets.timeline import timeline_bars

GATE = threading.Event()


@cuda.jit
def gated(x):
    if cuda.grid(1) == 0:
        GATE.wait(20.0)


def test_the_bars_are_the_recorded_ops_waits_and_gaps():
    x = tg.tensor(np.arange(6.0), device="cuda")
    GATE.clear()
    with tg.cuda.record_timeline() as rec:
        launch(gated, 1, 1, to_device(np.zeros(1)))
        y = (x * 2).sum()
        threading.Timer(0.1, GATE.set).start()
        y.item()
    view = Timeline(rec)
    assert view.lanes == ["host", f"stream {tg.cuda.default_stream().id}"]
    ops = [b for b in view.bars if b.kind not in ("wait", "idle")]
    assert len(ops) == len(rec.ops)
    for bar, op in zip(ops, rec.ops):
        assert bar.start_ms == pytest.approx((op.started - rec.began) * 1e3)
        assert bar.end_ms == pytest.approx((op.finished - rec.began) * 1e3)
        assert op.describe() in bar.label
    waits = [b for b in view.bars if b.kind == "wait"]
    assert [b.lane for b in waits] == ["host", "host"]
    assert waits[0].label.startswith("waited in Tensor.item (test_widgets_timeline.py:")
    assert waits[0].end_ms - waits[0].start_ms >= 80  # the host waited for the gated kernel
    idle = [b for b in view.bars if b.kind == "idle"]
    assert idle and idle[0].start_ms == 0.0  # the device idles until the first op arrives
    # the picture has one rect per bar, enqueue ticks, and the figures
    svg = view.to_svg()
    assert len(re.findall(r'data-kind="(?:kernel|h2d)"', svg)) == len(ops)
    assert len(re.findall(r'data-kind="enqueue"', svg)) == len(rec.ops)
    assert svg.count('data-kind="wait"') == 2 and svg.count('data-kind="idle"') == len(idle)
    assert f'data-cpu-per-wall="{rec.cpu_per_wall:.3f}"' in view.summary.value
    assert "CPU/wall" in view.summary.value and f"{len(rec.ops)} ops" in view.summary.value


def test_overlapping_host_work_shows_as_a_busy_device_and_no_host_wait():
    x = tg.tensor(np.ones(32), device="cuda")

    def work():
        y = x
        for _ in range(4):
            y = y * 1.5
        np.linalg.svd(np.random.default_rng(0).standard_normal((200, 200)))  # host work meanwhile

    view = Timeline.of(work)
    bars = timeline_bars(view.recording)
    kernels = [b for b in bars if b.kind == "kernel"]
    assert len(kernels) == 4
    assert all(a.end_ms <= b.start_ms for a, b in zip(kernels, kernels[1:]))  # in order
    assert [b.label.split(" (")[0] for b in bars if b.kind == "wait"] == ["waited in end of recording"]
    assert "stream" in view.to_svg() and "host" in view.to_svg()
    assert Timeline._repr_mimebundle_(view)["image/svg+xml"].startswith("<svg")


def test_each_stream_gets_its_own_lane():
    side = tg.cuda.Stream()
    x = tg.ones(8, device="cuda")
    with tg.cuda.record_timeline() as rec:
        y = x * 2
        side.wait_stream(tg.cuda.current_stream())
        with tg.cuda.stream(side):
            z = y + 1
    view = Timeline(rec)
    assert view.lanes == ["host", "stream 0", f"stream {side.id}"]
    side_bars = [b for b in view.bars if b.lane == f"stream {side.id}" and b.kind == "kernel"]
    assert [b.short for b in side_bars] == ["Add.forward"]
    assert z.tolist() == [3.0] * 8


def test_the_slider_zooms_in_on_a_stretch_of_time():
    x = tg.ones(16, device="cuda")
    view = Timeline.of(lambda: [x * k for k in range(1, 5)])
    kernels = [b for b in view.bars if b.kind == "kernel"]
    assert view.window.value == (0.0, view.window.max) and view.window.max >= kernels[-1].end_ms
    full = view.to_svg()
    assert full.count('data-kind="kernel"') == 4
    first = kernels[0]
    middle = (first.start_ms + first.end_ms) / 2
    view.window.value = (first.start_ms, middle)  # inside the first kernel only
    zoomed = view.to_svg()
    assert zoomed.count('data-kind="kernel"') == 1
    assert f"{first.start_ms:.1f} to {middle:.1f} ms" in zoomed
    assert view.canvas.value.count('data-kind="kernel"') == 1  # the slider redrew the canvas


def test_a_graph_replay_is_one_launch_holding_its_kernels_marked_as_replay():
    x = tg.ones(8, device="cuda")
    g = tg.cuda.CUDAGraph()
    with tg.cuda.graph(g):
        y = (x * 2).relu()
    with tg.cuda.record_timeline() as rec:
        g.replay()
    bars = timeline_bars(rec)
    (launch,) = [b for b in bars if b.kind == "graph"]
    replayed = [b for b in bars if b.kind == "replay"]
    assert len(replayed) == len(g.launches) == 2
    assert all(b.short.startswith("replay: ") and "graph 1" not in b.short for b in replayed)
    assert all(f"graph {g.id}, replay 1" in b.label for b in replayed + [launch])
    # the graph's launch holds its replayed kernels, and the host enqueued once
    assert all(launch.start_ms <= b.start_ms and b.end_ms <= launch.end_ms for b in replayed)
    enqueued = [op.enqueued for op in rec.ops]  # (the launch's time, read twice)
    assert max(enqueued) - min(enqueued) < 1e-3
    svg = Timeline(rec).to_svg()
    assert svg.count('data-kind="replay"') == 2 and svg.count('data-kind="graph"') == 1
    np.testing.assert_array_equal(y.cpu().numpy(), np.full(8, 2.0))

"""tg.profiler on the cuda device and its Chrome trace: kernels per stream, ops nested in regions.

The device is numba's CUDA simulator here: kernels run on a worker thread per stream,
and the stream timeline records when each one ran.
"""
from __future__ import annotations

import json

import pytest

import teachgrad as tg
from teachgrad.profiler import ProfilerActivity, profile, record_function

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # (the simulator's warning)


@pytest.fixture(scope="module")
def cuda_profile(tmp_path_factory):
    """One profiled program on two streams: the default one and a side stream."""
    a = tg.ones(4, device="cuda")
    side = tg.cuda.Stream()
    with profile(record_shapes=True) as prof:
        with record_function("default_stream_work"):
            b = a * 2.0
        side.wait_stream(tg.cuda.current_stream())
        with tg.cuda.stream(side):
            with record_function("side_stream_work"):
                c = b + 1.0
        tg.cuda.current_stream().wait_stream(side)
        with record_function("read_back"):
            value = c.sum().item()
    path = tmp_path_factory.mktemp("trace") / "trace.json"
    prof.export_chrome_trace(str(path))
    return prof, json.loads(path.read_text()), value, side


def test_the_program_ran(cuda_profile):
    assert cuda_profile[2] == pytest.approx(12.0)


def test_every_event_is_complete_and_well_formed(cuda_profile):
    _, trace, _, _ = cuda_profile
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    meta = [e for e in events if e["ph"] == "M"]
    assert {e["ph"] for e in events} == {"X", "M"}
    for e in complete:
        assert set(e) >= {"ph", "name", "cat", "pid", "tid", "ts", "dur"}
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["dur"] >= 0
    named = {(m["pid"], m["tid"]) for m in meta if m["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in complete} <= named  # every lane has a name
    assert len(complete) == len(cuda_profile[0].events())  # every event, once


def test_ops_are_nested_inside_their_regions_in_the_trace(cuda_profile):
    _, trace, _, _ = cuda_profile
    host = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "kernel"
            and e["cat"] != "gpu_memcpy"]
    region = next(e for e in host if e["name"] == "default_stream_work")
    inside = [e for e in host if e is not region and e["tid"] == region["tid"]
              and region["ts"] <= e["ts"] and e["ts"] + e["dur"] <= region["ts"] + region["dur"]]
    assert [e["name"] for e in inside] == ["Mul"]
    side = next(e for e in host if e["name"] == "side_stream_work")
    add = next(e for e in host if e["name"] == "Add")
    assert side["ts"] <= add["ts"] and add["ts"] + add["dur"] <= side["ts"] + side["dur"]


def test_kernels_sit_on_one_lane_per_stream(cuda_profile):
    prof, trace, _, side = cuda_profile
    device = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] in ("kernel", "gpu_memcpy")]
    assert {e["pid"] for e in device} == {0}
    lanes = {e["tid"] for e in device}
    assert lanes == {0, side.id}
    for e in device:
        assert e["args"]["stream"] == e["tid"]
    # the Add ran on the side stream, the Mul on the default one
    mul = next(e for e in prof.events() if e.name == "Mul")
    add = next(e for e in prof.events() if e.name == "Add")
    assert mul.kernels and {k.stream for k in mul.kernels} == {0}
    assert add.kernels and {k.stream for k in add.kernels} == {side.id}
    # a lane's kernels run one after the other
    for lane in lanes:
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in device if e["tid"] == lane)
        assert all(a[1] <= b[0] + 1e-3 for a, b in zip(spans, spans[1:]))


def test_device_time_is_counted_on_ops_and_on_kernel_rows(cuda_profile):
    prof = cuda_profile[0]
    rows = prof.key_averages()
    kernel_rows = [r for r in rows if r.device_type == "cuda"]
    device_events = [e for e in prof.events() if e.is_device]
    assert sum(r.count for r in kernel_rows) == len(device_events) > 0
    assert sum(r.self_cuda_time_total for r in kernel_rows) == pytest.approx(
        sum(e.duration_us for e in device_events))
    region = next(e for e in prof.events() if e.name == "default_stream_work")
    assert region.cuda_time_total == pytest.approx(sum(k.duration_us for k in region.cpu_children[0].kernels))
    text = rows.table(sort_by="cuda_time_total")
    assert "Self CUDA" in text and "CUDA total" in text and "Self CUDA time total:" in text


def test_the_read_back_wait_is_a_host_event(cuda_profile):
    prof = cuda_profile[0]
    read = next(e for e in prof.events() if e.name == "read_back")
    waits = [c for c in read.cpu_children if c.kind == "wait"]
    assert waits and all("Tensor.item" in w.name for w in waits)


def test_cpu_only_activity_records_no_device_events():
    a = tg.ones(4, device="cuda")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (a * 2.0).sum().item()
    assert prof.events() and not any(e.is_device for e in prof.events())


def test_cuda_only_activity_records_only_device_events():
    a = tg.ones(4, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        (a * 2.0).sum().item()
    assert prof.events() and all(e.is_device for e in prof.events())

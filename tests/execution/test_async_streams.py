"""Streams, events and the recorded timeline, after torch.cuda's API."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import threading

import numpy as np
import pytest
from numba import cuda

from teachgrad import streams
from teachgrad.kernels.launch import launch
from teachgrad.kernels.transfer import to_device, to_host

GATE = threading.Event()
# gated_add calls GATE.wait, a host Python object: only the simulator (which runs kernels as
# Python) can run it; numba cannot compile it for a GPU
gated = pytest.mark.skipif(not tg.cuda.is_simulated(),
                           reason="gated_add waits on a host threading.Event: only the "
                                  "simulator runs it, numba cannot compile it for a GPU")


@cuda.jit
def gated_add(x, value):
    """``x += value`` once GATE opens (the simulator runs this as Python)."""
    if cuda.threadIdx.x == 0:
        GATE.wait(20.0)
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size:
        x[i] += value


@cuda.jit
def _add(x, value):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += value


@cuda.jit
def _scale(x, factor):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= factor


def test_the_stream_context_manager_sets_and_restores_the_current_stream():
    default = tg.cuda.current_stream()
    assert default is tg.cuda.default_stream()
    side = tg.cuda.Stream()
    with tg.cuda.stream(side) as s:
        assert s is side and tg.cuda.current_stream() is side
        with tg.cuda.stream(None):
            assert tg.cuda.current_stream() is side
    assert tg.cuda.current_stream() is default


def test_stream_arguments_are_checked():
    with pytest.raises(TypeError) as error:
        with tg.cuda.stream("side"):
            pass
    assert str(error.value) == "stream() takes a teachgrad.cuda.Stream or None, got str"
    with pytest.raises(TypeError) as error:
        tg.cuda.Stream().wait_stream(3)
    assert str(error.value) == "wait_stream takes a Stream, got int"
    with pytest.raises(TypeError) as error:
        tg.cuda.Event().record("now")
    assert str(error.value) == "Event.record takes a Stream or None, got str"


def test_one_stream_runs_in_order_and_streams_are_independent():
    GATE.clear()
    x, y = to_device(np.zeros(8)), to_device(np.zeros(8))
    tg.cuda.synchronize()  # the copies are on the default stream: done before side uses y
    side = tg.cuda.Stream()
    # hold the default stream back without holding the device (the simulator runs one
    # kernel at a time, so a kernel stuck at the gate would hold up every stream)
    if tg.cuda.is_simulated():  # (on a GPU a host function on a stream runs at once, on the host)
        tg.cuda.current_stream().enqueue("wait_event", "gate", lambda handle: GATE.wait(20.0),
                                         uses_device=False)
    launch(_add, 1, 8, x, 1.0)
    launch(_scale, 1, 8, x, 10.0)  # after it, in order: (0 + 1) * 10
    with tg.cuda.stream(side):
        done = tg.cuda.Event()
        launch(_add, 1, 8, y, 5.0)
        done.record()
    done.synchronize()  # the side stream did not wait for the default one
    if tg.cuda.is_simulated():  # (only there does the gate hold the default stream back)
        assert not tg.cuda.current_stream().query()
    GATE.set()
    np.testing.assert_array_equal(to_host(y), np.full(8, 5.0))
    np.testing.assert_array_equal(to_host(x), np.full(8, 10.0))


@gated
def test_wait_stream_orders_work_across_streams():
    GATE.clear()
    x = to_device(np.ones(8))
    side = tg.cuda.Stream()
    launch(gated_add, 1, 8, x, 1.0)  # x = 2, once the gate opens
    side.wait_stream(tg.cuda.current_stream())
    with tg.cuda.stream(side):
        launch(_scale, 1, 8, x, 3.0)  # must see x = 2: 6, not 3 + 1 = 4
    threading.Timer(0.1, GATE.set).start()
    side.synchronize()
    np.testing.assert_array_equal(to_host(x), np.full(8, 6.0))


@gated
def test_events_time_the_device_and_query_without_waiting():
    GATE.clear()
    x = to_device(np.zeros(8))
    start, end = tg.cuda.Event(enable_timing=True), tg.cuda.Event(enable_timing=True)
    start.record()
    launch(gated_add, 1, 8, x, 1.0)
    end.record()
    assert start.query() in (True, False) and not end.query()
    threading.Timer(0.2, GATE.set).start()
    end.synchronize()
    assert end.query()
    assert 150 <= start.elapsed_time(end) < 20_000  # ms: the gate held the device ~200 ms


def test_event_errors_name_the_fix():
    with pytest.raises(RuntimeError) as error:
        tg.cuda.Event().synchronize()
    assert str(error.value) == ("Event.synchronize: this event was never recorded. "
                                "Fix: call event.record() (on a stream) first.")
    a, b = tg.cuda.Event().record(), tg.cuda.Event().record()
    b.synchronize()
    with pytest.raises(RuntimeError) as error:
        a.elapsed_time(b)
    assert str(error.value) == "elapsed_time needs both events made with Event(enable_timing=True)"
    assert tg.cuda.Event().query()  # never recorded: nothing to wait for, as in PyTorch


def test_the_timeline_records_ops_waits_and_cpu_time():
    x = tg.tensor(np.arange(6.0), device="cuda")
    with tg.cuda.record_timeline() as rec:
        y = (x * 2 + 1).sum()
        value = y.item()
        print_line = repr(y)
    assert value == 36.0 and "36." in print_line
    kernels = [op for op in rec.ops if op.kind == "kernel"]
    assert [op.op for op in kernels] == ["Mul.forward", "Add.forward", "Sum.forward"]
    assert {op.stream for op in kernels} == {tg.cuda.default_stream().id}
    assert all(op.site.startswith("test_async_streams.py:") and op.status == "done"
               for op in kernels)
    for before, after in zip(kernels, kernels[1:]):  # one stream: in order, one at a time
        assert before.enqueued <= after.enqueued and before.finished <= after.started
    assert all(op.enqueued <= op.started <= op.finished for op in kernels)
    assert [w.reason for w in rec.waits] == ["Tensor.item", "Tensor.__repr__", "end of recording"]
    summary = rec.summary()
    assert summary["ops"] == len(rec.ops) and summary["wall_seconds"] > 0
    assert summary["device_busy_seconds"] == pytest.approx(
        sum(op.finished - op.started for op in rec.ops))
    assert summary["cpu_per_wall"] == pytest.approx(rec.cpu_seconds / rec.wall_seconds)
    gaps = rec.idle_gaps(kernels[0].stream)
    assert gaps[0][0] == rec.began and gaps[0][1] == pytest.approx(rec.ops[0].started)


@gated
def test_host_to_device_copies_are_ordered_on_the_stream():
    GATE.clear()
    with tg.cuda.record_timeline() as rec:
        launch(gated_add, 1, 1, to_device(np.zeros(1)), 0.0)
        x = tg.tensor([1.0, 2.0], dtype=tg.float64, device="cuda")  # the copy queues behind the gated kernel
        threading.Timer(0.05, GATE.set).start()
        assert x.tolist() == [1.0, 2.0]
    copies = [op for op in rec.ops if op.kind == "h2d"]
    assert copies[-1].name == "copy 16 bytes to the device"
    assert copies[-1].started >= rec.ops[1].finished


def test_the_default_stream_is_stream_zero_and_event_wait_checks_its_argument():
    assert tg.cuda.default_stream().id == 0 and tg.cuda.Stream().id > 0
    with pytest.raises(TypeError) as error:
        tg.cuda.Event().record().wait("default")
    assert str(error.value) == "Event.wait takes a Stream or None, got str"


def test_every_synchronising_call_is_recorded_with_its_name():
    x = tg.tensor([1.0, 2.0], device="cuda")
    with tg.cuda.record_timeline(wait_at_end=False) as rec:
        (x * 2).sum().item()
        (x * 2).tolist()
        (x * 2).cpu()
        repr(x * 2)
        tg.cuda.synchronize()
        tg.cuda.Event().record().synchronize()
    assert [w.reason for w in rec.waits] == [
        "Tensor.item", "Tensor.tolist", "Tensor.cpu", "Tensor.__repr__", "synchronize",
        "Event.synchronize"]
    assert all(w.site.startswith("test_async_streams.py:") for w in rec.waits)


def test_gpu_op_times_are_placed_on_the_host_clock_through_the_anchor(monkeypatch):
    """The GPU path's arithmetic, with stand-in CUDA events (there is no GPU here)."""
    from numba import cuda as numba_cuda

    from teachgrad.streams import gpu_times, records

    device_clock = iter([10.0, 12.0, 15.0])  # ms on the device: anchor, start, end

    class StandInEvent:
        def __init__(self, timing):
            self.ms = None

        def record(self, handle):
            self.ms = next(device_clock)

    monkeypatch.setattr(numba_cuda, "event", StandInEvent, raising=False)
    monkeypatch.setattr(numba_cuda, "event_elapsed_time", lambda a, b: b.ms - a.ms, raising=False)
    ran = []
    op = records.OpRecord("kernel", "k", None, "-", 0, 0.0)
    with records.collect(False, gpu_times.resolve) as rec:
        gpu_times.start_recording("stream")
        anchor_host = gpu_times._anchor[1]
        gpu_times.launch_timed(op, "stream", ran.append)
    assert ran == ["stream"] and rec.simulated is False
    assert op.started == pytest.approx(anchor_host + 0.002)
    assert op.finished == pytest.approx(anchor_host + 0.005)
    gpu_times.launch_timed(op, "stream", ran.append)  # no recording open: no events
    assert ran == ["stream", "stream"]

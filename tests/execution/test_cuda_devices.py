"""Several cuda devices (the simulator offers two by default): device indexes, the current
device, per-device streams, copies between devices, and nn.DataParallel."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import teachgrad as tg


def test_device_objects_compare_by_type_and_index_as_in_pytorch():
    assert tg.device("cuda") != tg.device("cuda:0")  # as torch.device: no index is not index 0
    assert tg.device("cuda:1") == tg.device("cuda", 1) and tg.device("cuda:1") != tg.device("cuda:0")
    assert len({tg.device("cuda"), tg.device("cuda:0"), tg.device("cuda:1")}) == 3
    assert repr(tg.device("cuda", 1)) == "device(type='cuda', index=1)"


def test_cuda_means_the_current_device_for_a_tensor():
    assert tg.ones(2, device="cuda").device == tg.device("cuda:0")
    with tg.cuda.device(1):
        t = tg.ones(2, device="cuda")
        assert tg.cuda.current_device() == 1
    assert t.device == tg.device("cuda:1") and repr(t) == "tensor([1., 1.], device='cuda:1')"
    assert tg.cuda.current_device() == 0


def test_set_device_and_the_context_restore_the_previous_device_even_on_error():
    tg.cuda.set_device(1)
    try:
        assert tg.cuda.current_device() == 1
        with pytest.raises(ValueError):
            with tg.cuda.device(0):
                assert tg.cuda.current_device() == 0
                raise ValueError("inside")
        assert tg.cuda.current_device() == 1
    finally:
        tg.cuda.set_device(0)


@pytest.mark.parametrize("bad", [2, -1, "cuda:7"])
def test_bad_indexes_are_refused_before_anything_changes(bad):
    tg.cuda.reset_transfer_stats()
    with pytest.raises((RuntimeError, TypeError), match="invalid"):
        tg.cuda.set_device(bad)
    with pytest.raises((RuntimeError, TypeError), match="invalid"):
        tg.cuda.device(bad)
    assert tg.cuda.current_device() == 0
    if isinstance(bad, str):
        with pytest.raises(RuntimeError, match="invalid device cuda:7"):
            tg.tensor([1.0]).to(bad)
        assert tg.cuda.transfer_stats()["host_to_device"] == 0


def test_ops_run_on_their_tensors_device_and_mixing_devices_is_refused():
    a = tg.tensor([1.0, 2.0], device="cuda:1")
    with tg.streams.recording() as rec:
        b = a * 3 + 1
    assert b.device == tg.device("cuda:1") and b.tolist() == [4.0, 7.0]
    assert {op.device for op in rec.ops if op.kind == "kernel"} == {1}
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, "
                       "but found at least two devices, cuda:1 and cuda:0"):
        a + tg.ones(2, device="cuda:0")


def test_gradients_on_device_1_match_numpy():
    x = tg.tensor([1.0, -2.0, 3.0], device="cuda:1", requires_grad=True)
    (x * x * x).sum().backward()
    assert x.grad.device == tg.device("cuda:1")
    np.testing.assert_allclose(x.grad.cpu().numpy(), 3 * np.array([1.0, -2.0, 3.0]) ** 2)


def test_a_copy_between_devices_is_counted_and_differentiable():
    x = tg.tensor([1.0, 2.0, 3.0], device="cuda:0", requires_grad=True)
    tg.cuda.reset_transfer_stats()
    y = x.to("cuda:1")
    stats = tg.cuda.transfer_stats()
    assert (stats["device_to_device"], stats["bytes_d2d"], stats["host_to_device"],
            stats["device_to_host"]) == (1, 12, 0, 0)
    (y * 2).sum().backward()
    assert y.device == tg.device("cuda:1") and x.grad.tolist() == [2.0, 2.0, 2.0]
    assert x.cuda(1).device == tg.device("cuda:1")


def test_each_device_has_its_own_default_and_current_stream():
    s0, s1 = tg.cuda.default_stream(0), tg.cuda.default_stream(1)
    assert s0 is not s1 and (s0.device, s1.device) == (0, 1)
    side = tg.cuda.Stream(device=1)
    with tg.cuda.stream(side):
        assert tg.cuda.current_device() == 1  # the stream's device becomes current
        assert tg.cuda.current_stream() is side and tg.cuda.current_stream(0) is s0
    assert tg.cuda.current_stream(1) is s1 and tg.cuda.current_device() == 0


def test_the_host_queues_two_devices_and_waits_for_one_only():
    a = tg.ones(4, device="cuda:0")
    b = tg.ones(4, device="cuda:1")
    tg.cuda.synchronize()
    gate = threading.Event()  # cuda:0's queue is held behind it until the test opens it
    with tg.streams.recording(wait_at_end=False) as rec:
        tg.cuda.default_stream(0).enqueue("wait_event", "gate", lambda _h: gate.wait(10),
                                          uses_device=False)
        a2 = a + 1
        b2 = b * 2
        tg.cuda.synchronize(1)  # waits for cuda:1 only
        zero_still_queued = [op.status for op in rec.ops if op.device == 0]
        gate.set()
    assert "queued" in zero_still_queued, "synchronize(1) must not wait for cuda:0"
    one = [op for op in rec.ops if op.device == 1]
    assert one and all(op.status == "done" for op in one)
    tg.cuda.synchronize()
    assert a2.tolist() == [2.0] * 4 and b2.tolist() == [2.0] * 4


def test_the_timeline_draws_one_lane_per_device_and_stream():
    from teachgrad.widgets.timeline import Timeline

    with tg.streams.recording() as rec:
        tg.ones(2, device="cuda:0") + 1
        tg.ones(2, device="cuda:1") + 1
    lanes = Timeline(rec).lanes
    assert lanes[0] == "host"
    assert [lane.split()[0] for lane in lanes[1:]] == ["cuda:0", "cuda:1"]


def test_a_tensor_saved_from_cuda_1_loads_back_there_or_where_map_location_says():
    import io

    t = tg.tensor([1.0, 2.0], device="cuda:1")
    buffer = io.BytesIO()
    tg.save({"t": t}, buffer)
    buffer.seek(0)
    back = tg.load(buffer)["t"]
    assert back.device == tg.device("cuda:1") and back.tolist() == [1.0, 2.0]
    buffer.seek(0)
    assert tg.load(buffer, map_location="cpu")["t"].device == tg.device("cpu")


@pytest.mark.parametrize("text, ok", [("cpu", True), ("cuda", True), ("cuda:0", True),
                                      ("cuda:12", True), ("cuda:", False), ("cuda:-1", False),
                                      ("cuda:1.5", False), ("cpu:0", False), ("gpu", False),
                                      ("cuda:١", False), (3, False)])
def test_device_names_in_files_are_checked_by_form(text, ok):
    from teachgrad.device import is_device_name

    assert is_device_name(text) is ok


def test_a_compiled_function_runs_on_its_inputs_device_and_recompiles_for_another():
    compiled = tg.compile(lambda x: (x * 2).relu() + 1)
    on_0 = compiled(tg.tensor([-1.0, 2.0], device="cuda:0"))
    on_1 = compiled(tg.tensor([-1.0, 2.0], device="cuda:1"))
    assert (on_0.device, on_1.device) == (tg.device("cuda:0"), tg.device("cuda:1"))
    assert on_0.tolist() == on_1.tolist() == [1.0, 5.0]
    assert compiled.compiles == 2  # the device index is part of the input signature
    assert (on_1 + tg.ones(2, device="cuda:1")).tolist() == [2.0, 6.0]

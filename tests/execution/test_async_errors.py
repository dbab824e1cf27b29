"""A kernel that fails on the device is reported at the next wait, naming the op and the line.

In the simulator a failing kernel raises a Python exception (an index past the end raises
IndexError), which the stream keeps and reports as a KernelError naming the op. A real GPU
checks no bounds and cannot say which kernel failed; a fault on it (an address outside
any allocation) is reported as a DeviceFault naming the ops in flight, and leaves the
process's CUDA context unusable. Tests marked ``simulator_semantics`` check the former and
run wherever the simulator does (the test suite always); the rest hold on both.
"""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
from numba import cuda
from numba.cuda.cudadrv.driver import CudaAPIError

from teachgrad import _cuda_setup, streams
from teachgrad.kernels.launch import launch
from teachgrad.kernels.transfer import to_device
from teachgrad.streams.records import OpRecord
from teachgrad.streams.stream import Stream, _Item

simulator_semantics = pytest.mark.skipif(
    not tg.cuda.is_simulated(),
    reason="a GPU checks no bounds (this kernel's read past the end does not fail there) and "
           "a fault on it cannot be survived in-process: test_a_fault_on_the_device covers it")


@cuda.jit
def read_past_the_end(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i + 100]  # out of bounds: the simulator raises IndexError


class Broken(tg.autograd.Function):
    """An op whose kernel fails on the device."""

    @staticmethod
    def forward(ctx, x):
        out = tg.zeros(tuple(x.shape), device="cuda")
        launch(read_past_the_end, 1, 4, out._array.buffer, x._array.buffer)
        return out._array

    @staticmethod
    def backward(ctx, grad):
        return grad


def _line_of(text: str) -> int:
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


@simulator_semantics
def test_the_error_surfaces_at_the_next_sync_naming_op_and_site():
    x = tg.ones(4, device="cuda")
    y = Broken.apply(x)  # returns: the kernel has not run yet
    z = y * 2  # queued after the failing kernel: skipped
    with pytest.raises(streams.KernelError) as error:
        z.item() if z.numel() == 1 else z.sum().item()
    site = f"test_async_errors.py:{_line_of('launch(read_past_the_end, 1, 4')} in forward"
    message = str(error.value)
    assert message.startswith(f"kernel read_past_the_end (Broken.forward), enqueued at {site}, "
                              "failed on the device with IndexError")
    assert "The 2 op(s) queued after it on this stream were skipped." in message
    assert message.endswith("set TEACHGRAD_LAUNCH_BLOCKING=1 to stop at the failing launch itself.")
    assert isinstance(error.value.__cause__, IndexError)
    assert error.value.record.status == "failed" and error.value.skipped == 2
    # reported once; the stream works again
    np.testing.assert_array_equal((x + 1).cpu().numpy(), np.full(4, 2.0, np.float32))


@simulator_semantics
def test_a_raw_launch_names_the_callers_line():
    out, x = to_device(np.zeros(4)), to_device(np.zeros(4))
    launch(read_past_the_end, 1, 4, out, x)
    line = _line_of("launch(read_past_the_end, 1, 4, out, x)")
    with pytest.raises(streams.KernelError) as error:
        tg.cuda.synchronize()
    assert str(error.value).startswith(
        f"kernel read_past_the_end, enqueued at test_async_errors.py:{line} in "
        "test_a_raw_launch_names_the_callers_line, failed on the device with IndexError")
    tg.cuda.synchronize()  # nothing left to report


@simulator_semantics
def test_event_synchronize_reports_the_error_too():
    out, x = to_device(np.zeros(4)), to_device(np.zeros(4))
    launch(read_past_the_end, 1, 4, out, x)
    done = tg.cuda.Event().record()
    with pytest.raises(streams.KernelError):
        done.synchronize()
    assert done.query()


@simulator_semantics
def test_with_launch_blocking_the_launch_itself_raises():
    out, x = to_device(np.zeros(4)), to_device(np.zeros(4))
    with streams.blocking_launches():
        with pytest.raises(streams.KernelError) as error:
            launch(read_past_the_end, 1, 4, out, x)
    assert "failed on the device with IndexError" in str(error.value)
    assert "were skipped" not in str(error.value)


def test_a_bad_launch_configuration_is_still_refused_at_once():
    x = to_device(np.zeros(4))
    with pytest.raises(ValueError, match="over the limit of 1024 threads per block"):
        launch(read_past_the_end, 1, 2048, x, x)
    tg.cuda.synchronize()


def _run(code: str, **env) -> subprocess.CompletedProcess:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environ = {**os.environ, "PYTHONPATH": root, **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environ,
                          capture_output=True, text=True, timeout=120)


def test_no_deadlock_at_exit_with_work_still_queued():
    result = _run("""
        import teachgrad as tg
        x = tg.ones(64, device="cuda")
        for _ in range(30):
            x = x * 1.01 + 0.5      # queued; the script ends without waiting
        print("enqueued", tg.cuda.current_stream().pending() > 0)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "enqueued True"


@pytest.mark.skipif(not tg.cuda.is_simulated(),
                    reason="the kernel waits on a host object, which only the simulator can")
def test_no_deadlock_at_exit_when_a_kernel_never_finishes():
    result = _run("""
        import threading
        import numpy as np
        import teachgrad as tg
        from numba import cuda
        from teachgrad.kernels.launch import launch
        from teachgrad.kernels.transfer import to_device
        NEVER = threading.Event()

        @cuda.jit
        def stuck(x):
            NEVER.wait()

        launch(stuck, 1, 1, to_device(np.zeros(1)))
        print("launched")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "launched"


def test_the_environment_variable_turns_blocking_on():
    result = _run("""
        import teachgrad as tg
        from teachgrad import streams
        with streams.recording(wait_at_end=False) as rec:
            y = tg.ones(4, device="cuda") * 3
        print(streams.launch_blocking(), [op.status for op in rec.ops])
    """, TEACHGRAD_LAUNCH_BLOCKING="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True ['done', 'done']"


def test_a_forked_child_starts_its_streams_afresh():
    result = _run("""
        import os
        import teachgrad as tg
        x = tg.ones(8, device="cuda")
        y = (x * 2).sum()                   # the parent's worker thread is running
        pid = os.fork()
        if pid == 0:                        # the child has no worker thread: it must make one
            try:
                z = (tg.ones(4, device="cuda") * 3).sum().item()
            except RuntimeError as error:   # on a GPU: CUDA does not survive a fork
                os._exit(2 if "child process made by fork" in str(error) else 3)
            os._exit(0 if z == 12.0 else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), y.item(), tg.cuda.is_simulated())
    """)
    assert result.returncode == 0, result.stderr
    # the simulator's child computes; a GPU process's child is told to use 'spawn'
    assert result.stdout.strip() in ("0 16.0 True", "2 16.0 False")


def test_a_forked_child_of_a_gpu_process_is_told_to_spawn(monkeypatch):
    """(The hook ``fork`` runs in the child, called here in a process set up as a GPU's.)"""
    monkeypatch.setattr(_cuda_setup, "_forked_from_gpu_process", False)
    _cuda_setup._after_fork_in_child()
    if tg.cuda.is_simulated():  # the simulator survives a fork: nothing to refuse
        assert not _cuda_setup._forked_from_gpu_process
        _cuda_setup.check_cuda()
    monkeypatch.setattr(_cuda_setup, "SETUP", _cuda_setup.CudaSetup("auto", "gpu", "test", 1))
    _cuda_setup._after_fork_in_child()
    with pytest.raises(RuntimeError, match=r"cuda cannot be used in a child process made by fork "
                                           r".*multiprocessing.get_context\('spawn'\)"):
        _cuda_setup.check_cuda()


# -- a real GPU's errors --------------------------------------------------------------------------
# The code that meets them runs only on a GPU; here it is driven with a stand-in stream
# handle that fails as numba's does (CudaAPIError with the driver's code).

def _record(name: str) -> OpRecord:
    return OpRecord("kernel", name, "Mul.forward", f"train.py:{len(name)} in step", 3, 0.0)


class _DriverError(CudaAPIError):
    """numba's CudaAPIError as a GPU raises it (the simulator's stand-in has no ``code``)."""

    def __init__(self, code: int, msg: str) -> None:
        super().__init__(code, msg)
        self.code, self.msg = code, msg

    def __str__(self) -> str:
        return f"[{self.code}] {self.msg}"


class _FailingHandle:
    def __init__(self, code: int, message: str) -> None:
        self.error = _DriverError(code, message)

    def synchronize(self) -> None:
        raise self.error


def test_a_gpu_fault_at_a_wait_names_the_ops_in_flight_and_says_to_restart():
    ops = [_record("first"), _record("second_kernel")]
    fake = SimpleNamespace(id=3, _handle=_FailingHandle(700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
                           _in_flight=list(ops))
    with pytest.raises(tg.cuda.DeviceFault) as caught:
        Stream._sync_gpu(fake)
    error = caught.value
    assert isinstance(error, tg.cuda.KernelError) and error.sticky
    assert isinstance(error.__cause__, CudaAPIError) and error.in_flight == ops
    message = str(error)
    assert message.startswith("work on cuda stream 3 failed on the GPU ([700] "
                              "CUDA_ERROR_ILLEGAL_ADDRESS). Ops in flight, one of which failed: "
                              f"{ops[0].describe()}; {ops[1].describe()}. ")
    assert "restart Python (in Jupyter: restart the kernel)" in message
    assert "A GPU does not check array bounds" in message
    assert message.endswith("Rerun with TEACHGRAD_LAUNCH_BLOCKING=1 to stop at the failing "
                            "launch itself.")
    assert fake._in_flight == []  # reported once


def test_a_gpu_error_at_a_launch_fails_that_launch():
    """After a fault every launch fails at once; a launch refused for its resources is not
    a fault (the context lives on), so the message does not say to restart."""
    earlier = _record("earlier")
    for code, sticky in ((700, True), (701, False)):
        record = _record("this_one")
        fake = SimpleNamespace(id=5, _handle=object(), _in_flight=[earlier])

        def run(handle, code=code):
            raise _DriverError(code, "CUDA_ERROR_X")

        with pytest.raises(tg.cuda.DeviceFault) as caught:
            Stream._launch_on_gpu(fake, _Item(record, run))
        assert record.status == "failed" and caught.value.sticky is sticky
        assert caught.value.record is record and caught.value.in_flight == [earlier, record]
        assert ("restart Python" in str(caught.value)) is sticky
        assert fake._in_flight == []


def test_a_fault_on_the_device():
    """A read far outside every allocation: the simulator raises IndexError, which comes back
    as a KernelError naming the kernel; a GPU faults, which comes back as a DeviceFault
    saying the process must restart. (A fresh process: on a GPU the fault is for good.)"""
    result = _run("""
        import numpy as np
        import teachgrad as tg
        from numba import cuda
        from teachgrad.kernels.launch import launch
        from teachgrad.kernels.transfer import to_device

        @cuda.jit
        def read_far_away(out, x):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = x[i + (1 << 40)]

        out, x = to_device(np.zeros(4)), to_device(np.zeros(4))
        launch(read_far_away, 1, 4, out, x)
        try:
            tg.cuda.synchronize()
        except tg.cuda.KernelError as error:
            print(tg.cuda.is_simulated(), type(error).__name__, type(error.__cause__).__name__,
                  getattr(error, "sticky", None))
            print(error)
    """)
    first, _, message = result.stdout.partition("\n")
    if first.startswith("True"):
        assert first == "True KernelError IndexError None", result.stdout + result.stderr
        assert message.startswith("kernel read_far_away, enqueued at <string>:")
    else:
        assert first == "False DeviceFault CudaAPIError True", result.stdout + result.stderr
        assert "read_far_away" in message and "restart Python" in message

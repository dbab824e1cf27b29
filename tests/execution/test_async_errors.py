"""A kernel that fails on the device is reported at the next wait, naming the op and the line."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda

from teachgrad import streams
from teachgrad.kernels.launch import launch
from teachgrad.kernels.transfer import to_device


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


def test_event_synchronize_reports_the_error_too():
    out, x = to_device(np.zeros(4)), to_device(np.zeros(4))
    launch(read_past_the_end, 1, 4, out, x)
    done = tg.cuda.Event().record()
    with pytest.raises(streams.KernelError):
        done.synchronize()
    assert done.query()


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
            z = (tg.ones(4, device="cuda") * 3).sum().item()
            os._exit(0 if z == 12.0 else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), y.item())
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0 16.0"

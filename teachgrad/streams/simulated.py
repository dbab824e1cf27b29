"""What the simulator needs so that a worker thread can play the device.

* The switch interval. The worker thread needs the GIL to pick up the next op;
  at Python's default of 5 ms the host thread could keep it that long after
  every enqueue. While any stream has work the interval is lowered to
  :data:`SIMULATOR_SWITCH_INTERVAL` (the simulator's barrier polls, and likes
  it short too), and restored when every queue is empty.
* One kernel at a time, from any thread: :func:`device_lock` (see
  ``teachgrad.kernels._simulator``).
* Host reads and direct launches wait: on a GPU, ``copy_to_host()`` and a kernel
  called directly, both on the default stream, wait for the work queued before
  them; in the simulator they would run at once. :func:`device_lock` also
  restores the GPU's behaviour there.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import threading
from typing import Callable, Iterator

#: Python's thread switch interval while a simulated stream has work.
SIMULATOR_SWITCH_INTERVAL = 5e-5

_switch_lock = threading.Lock()
_busy_streams = 0
_saved_interval = sys.getswitchinterval()

on_worker = threading.local()  #: ``.active`` is True on a stream's worker thread


def set_busy(delta: int) -> None:
    """One more (+1) or one fewer (-1) stream with work: lower or restore the switch interval."""
    global _busy_streams, _saved_interval
    with _switch_lock:
        if delta > 0 and _busy_streams == 0:
            _saved_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(_saved_interval, SIMULATOR_SWITCH_INTERVAL))
        _busy_streams += delta
        if _busy_streams == 0:
            sys.setswitchinterval(_saved_interval)


def reset_after_fork() -> None:
    """In a forked child: no stream is busy, and no kernel holds the device."""
    global _busy_streams, _switch_lock
    _switch_lock = threading.Lock()
    if _busy_streams:
        sys.setswitchinterval(_saved_interval)
    _busy_streams = 0
    from ..kernels import _simulator
    from . import records

    _simulator.DEVICE_LOCK, _simulator._lock = threading.RLock(), threading.Lock()
    if "numba.cuda.simulator.kernel" in sys.modules:  # a kernel the parent was running
        sys.modules["numba.cuda.simulator.kernel"]._kernel_context = None
    records._lock = threading.Lock()  # another thread may have held these at the fork


@contextlib.contextmanager
def low_switch_interval() -> Iterator[None]:
    """The lowered switch interval for a kernel run on the host thread (blocking launches)."""
    set_busy(+1)
    try:
        yield
    finally:
        set_busy(-1)


def device_lock(wait_for_streams: Callable[[], None]):
    """The simulated device's lock: one kernel runs at a time, whichever stream sent it.

    ``wait_for_streams`` is what a host read or a direct launch waits on: the streams'
    ``synchronize_if_pending``, passed in by :mod:`teachgrad.streams.stream`, which is
    built on this module.
    """
    from ..kernels._simulator import DEVICE_LOCK, patch_simulator

    patch_simulator()  # before any kernel runs off the main thread
    _wait_before_host_reads(wait_for_streams)
    return DEVICE_LOCK


def _wait_unless_on_device(wait_for_streams: Callable[[], None]) -> None:
    """Wait for the streams, unless this thread is a worker or holds the device: they
    would wait for themselves (a kernel's write-back, a blocking launch)."""
    from ..kernels._simulator import holds_device

    if not getattr(on_worker, "active", False) and not holds_device():
        wait_for_streams()


def _wait_before_host_reads(wait_for_streams: Callable[[], None]) -> None:
    """Make a simulated device array's ``copy_to_host`` wait for the streams first."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    original = FakeCUDAArray.copy_to_host
    if getattr(original, "waits_for_streams", False):
        return
    wait = functools.partial(_wait_unless_on_device, wait_for_streams)

    def copy_to_host(self, *args, **kwargs):
        wait()  # (to_host has waited already: nothing is recorded twice)
        return original(self, *args, **kwargs)

    copy_to_host.waits_for_streams = True
    FakeCUDAArray.copy_to_host = copy_to_host
    from ..kernels import _simulator

    _simulator.before_direct_call = wait  # a kernel called directly

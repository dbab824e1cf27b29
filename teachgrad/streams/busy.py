"""A kernel that keeps the device busy for a set time: a slow kernel, on purpose, for lessons.

Async dispatch is easiest to see when a kernel takes long enough to watch.
``busy(0.2)`` enqueues a one-thread kernel that occupies the device for about
0.2 s; the host gets control back at once. In the simulator the kernel's thread
sleeps (the simulator runs kernels as Python); on a GPU it calls
``cuda.nanosleep`` in a loop (compute capability 7.0 or newer; not tested
here, where there is no GPU).
"""
from __future__ import annotations

import functools
import time

from .records import OpRecord


@functools.lru_cache(maxsize=1)
def _busy_kernel():
    from numba import cuda

    from .. import _cuda_setup

    if _cuda_setup.is_simulated():
        @cuda.jit
        def busy_kernel(seconds):
            time.sleep(seconds)  # the simulator runs this line as Python
    else:
        @cuda.jit
        def busy_kernel(seconds):
            for _ in range(int(seconds * 1e3)):  # 1000 naps of 1 microsecond per ms
                cuda.nanosleep(1000)
    return busy_kernel


def busy(seconds: float) -> OpRecord:
    """Enqueue a kernel that keeps the current stream's device busy for ``seconds``."""
    if not isinstance(seconds, (int, float)) or not 0 <= seconds <= 60:
        raise ValueError(f"busy(seconds) takes a number of seconds from 0 to 60, got {seconds!r}")
    from ..kernels.launch import launch
    from .stream import current_stream

    launch(_busy_kernel(), 1, 1, float(seconds))
    return current_stream().last_record()

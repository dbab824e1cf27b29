"""Asynchronous dispatch: the host enqueues device work on a stream and runs ahead.

This is how PyTorch runs ``cuda`` tensors, and how teachgrad does too. A
kernel launch puts the kernel on the *current stream* and returns at once;
the device runs the stream's queue in order. The host waits only when it must
read a result: ``.item()``, ``.numpy()``/``.cpu()``/``.tolist()``, printing a
tensor, ``tg.cuda.synchronize()``, ``Event.synchronize()``. ``cpu`` tensors
stay synchronous.

What it buys (the four benefits chapter 10 measures): launches do not block;
host work (preparing the next batch) overlaps device work; the host runs
ahead, so the cost of launching hides behind the kernels already queued; and
one ``.item()`` in the wrong place throws all of that away.

The one seam into the engine is :func:`enqueue`: ``teachgrad.kernels.launch``
and the host-to-device copy call it, and the device-to-host copy calls
:func:`synchronize` first. Everything else lives here::

    stream.py   Stream (a queue + a worker thread in the simulator, a CUDA stream on a GPU),
                current_stream, stream(s), synchronize, launch blocking, KernelError
                (DeviceFault: a real GPU's error, which cannot name the failing op)
    event.py    Event: record / query / synchronize / wait / elapsed_time
    records.py  OpRecord, HostWait, Recording: the timeline the Timeline widget draws
    sites.py    which op and which line of the learner's code an item came from
    busy.py     busy(seconds): a kernel slowed on purpose, to watch the queue in lessons
    gpu_times.py  per-op device times from CUDA events on a GPU (the simulator needs none)
    simulated.py  what a worker thread needs to play the device in numba's simulator
    graphs.py   CUDA graphs: CUDAGraph, graph(g) capture, replay (graphs_gpu.py: on a GPU;
                graphed.py: make_graphed_callables)

Recording a timeline::

    with teachgrad.streams.recording() as rec:
        ...                        # cuda work
    rec.ops, rec.waits, rec.summary()
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from .busy import busy
from .event import Event
from .records import HostWait, OpRecord, Recording
from .stream import (
    DeviceFault, KernelError, Stream, current_stream, default_stream, enqueue,
    launch_blocking, set_launch_blocking, stream, synchronize,
)

__all__ = [
    "busy", "DeviceFault", "Event", "HostWait", "KernelError", "OpRecord", "Recording", "Stream",
    "current_stream", "default_stream", "enqueue", "launch_blocking", "recording",
    "set_launch_blocking", "stream", "synchronize", "blocking_launches",
]


@contextlib.contextmanager
def recording(wait_at_end: bool = True) -> Iterator[Recording]:
    """Record every op enqueued and every host wait inside the block.

    With ``wait_at_end`` (the default) the block ends with a ``synchronize()``,
    so every op in the recording has finished; that last wait is recorded too.
    """
    from .. import _cuda_setup
    from . import records
    from .stream import wait_for_all_streams

    from . import gpu_times

    simulated = _cuda_setup.is_simulated()

    def finish(rec: Recording) -> None:
        if wait_at_end:
            wait_for_all_streams("end of recording")
            if not simulated:
                gpu_times.resolve(rec)  # CUDA events -> the host clock

    with records.collect(simulated, finish) as rec:
        if not simulated:
            gpu_times.start_recording(default_stream()._handle)
        yield rec


@contextlib.contextmanager
def blocking_launches(on: bool = True) -> Iterator[None]:
    """Inside the block, every launch waits for its kernel (or, with ``on=False``, none does)."""
    previous = launch_blocking()
    set_launch_blocking(on)
    try:
        yield
    finally:
        set_launch_blocking(previous)

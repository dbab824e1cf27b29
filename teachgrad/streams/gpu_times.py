"""Per-op device times on a real GPU, from CUDA events (not run here: there is no GPU).

In the simulator the worker thread reads the host clock when an op starts and
ends. On a GPU the host never sees that moment, so while a recording is open
each launch is bracketed by two timing events, and when the recording ends
(after its synchronize) their times are placed on the host clock through an
*anchor* event recorded when the recording began::

    op.started = anchor_host_time + elapsed(anchor, start_event)

This is exact when the queue was empty at the start of the recording (the
device reached the anchor at once); otherwise the times run late by however
long the device took to reach the anchor.
"""
from __future__ import annotations

from typing import Any, Callable

from .records import OpRecord, Recording, is_recording, now

_anchor: tuple[Any, float] | None = None  # (CUDA event, host time) of the open recording
_pending: list[tuple[OpRecord, Any, Any]] = []  # ops whose events are not read yet


def start_recording(handle: Any) -> None:
    """Record the anchor event on the stream ``handle`` as a recording opens."""
    global _anchor
    from numba import cuda

    event = cuda.event(timing=True)
    event.record(handle)
    _anchor = (event, now())
    _pending.clear()


def launch_timed(record: OpRecord, handle: Any, run: Callable[[Any], None]) -> None:
    """Run ``run(handle)``, between two timing events while a recording is open."""
    if not is_recording() or _anchor is None:
        run(handle)
        return
    from numba import cuda

    start, end = cuda.event(timing=True), cuda.event(timing=True)
    start.record(handle)
    run(handle)
    end.record(handle)
    _pending.append((record, start, end))


def resolve(rec: Recording) -> None:
    """After a synchronize: put the events' device times on the host clock."""
    global _anchor
    if _anchor is None:
        return
    from numba import cuda

    anchor, host_time = _anchor
    for record, start, end in _pending:
        record.started = host_time + cuda.event_elapsed_time(anchor, start) / 1e3
        record.finished = host_time + cuda.event_elapsed_time(anchor, end) / 1e3
    _pending.clear()
    _anchor = None

"""Events: markers put on a stream, to wait for and to time with, as ``torch.cuda.Event``.

``e.record(s)`` enqueues a marker on stream ``s``; the marker "happens" when
the device reaches it, i.e. once everything enqueued on ``s`` before it has run.
Then ``e.query()`` turns True, ``e.synchronize()`` stops waiting, and
``start.elapsed_time(end)`` is the device time between two markers, in ms.

Which clock: in the simulator the worker thread reads the host clock
(``time.perf_counter``) when it reaches the marker; on a GPU the marker is a
CUDA event and ``elapsed_time`` is CUDA's own, measured on the device.
"""
from __future__ import annotations

import threading
from typing import Any

from . import sites, stream as _stream_module
from .records import now
from .stream import Stream, _Item, current_stream, refuse_while_capturing


class _Mark:
    """One recording of an event: done when the stream reaches it."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.reached = threading.Event()
        self.time: float | None = None
        self.cuda_event: Any = None
        self.record: Any = None  # the marker's OpRecord on the queue (simulator)
        self.polled_since: float | None = None  # the first query() that said "not yet"


class Event:
    """A marker on a stream, as ``torch.cuda.Event(enable_timing=False, blocking=False)``."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        if interprocess:
            raise ValueError("interprocess events are not supported by teachgrad; "
                             "leave interprocess=False")
        self.enable_timing, self.blocking = bool(enable_timing), bool(blocking)
        self._mark: _Mark | None = None

    def __repr__(self) -> str:
        state = "not recorded" if self._mark is None else ("done" if self._happened() else "pending")
        return f"<teachgrad.cuda.Event {state}>"

    def record(self, stream: Stream | None = None) -> "Event":
        """Put a marker on ``stream`` (the current stream if None); returns the event."""
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"Event.record takes a Stream or None, got {type(stream).__name__}")
        stream = stream or current_stream()
        mark = _Mark(stream)
        if stream._handle is not None:  # a GPU: CUDA records the time on the device
            from numba import cuda

            mark.cuda_event = cuda.event(timing=self.enable_timing)
            mark.cuda_event.record(stream._handle)
            mark.reached.set()  # queries go to the CUDA event
        self._mark = mark

        def reach(_handle: Any) -> None:
            mark.time = now()
            mark.reached.set()

        if stream._handle is None:
            mark.record = stream.enqueue("event", "record", reach, uses_device=False,
                                         site=sites.enqueue_site(2))
        return self

    def _recorded(self, what: str) -> _Mark:
        if self._mark is None:
            raise RuntimeError(f"Event.{what}: this event was never recorded. "
                               "Fix: call event.record() (on a stream) first.")
        return self._mark

    def query(self) -> bool:
        """True once the stream has reached the marker (never waits). True if never recorded.

        A loop of queries is a host wait all the same: from the first ``False`` to the
        ``True`` it is recorded as one (reason ``Event.query``) in an open timeline.
        """
        mark = self._mark
        if mark is None:
            return True
        done = self._happened()
        if not done and mark.polled_since is None:
            mark.polled_since = now()
        elif done and mark.polled_since is not None:
            from .records import HostWait, note_wait

            reason, site = sites.wait_reason(1)
            note_wait(HostWait(reason, site, mark.polled_since, now(), target=mark.record))
            mark.polled_since = None
        return done

    def _happened(self) -> bool:
        """query() without recording anything (for repr and elapsed_time)."""
        mark = self._mark
        if mark is None:
            return True
        return bool(mark.cuda_event.query()) if mark.cuda_event is not None else mark.reached.is_set()

    def synchronize(self) -> None:
        """Wait until the stream has reached the marker; raise its deferred error, if any."""
        mark = self._recorded("synchronize")
        from .records import HostWait, note_wait

        reason, site = sites.wait_reason(1)  # from here: names Event.synchronize
        refuse_while_capturing(reason, site)
        began = now()
        if mark.cuda_event is not None:
            mark.cuda_event.synchronize()
        else:
            mark.reached.wait()
        note_wait(HostWait(reason, site, began, now(), target=mark.record))
        mark.stream.raise_deferred()

    def wait(self, stream: Stream | None = None) -> None:
        """Make work enqueued on ``stream`` from now on wait until this event has happened."""
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"Event.wait takes a Stream or None, got {type(stream).__name__}")
        stream = stream or current_stream()
        mark = self._mark
        if mark is None:
            return  # as in PyTorch: waiting on an unrecorded event does nothing
        if stream._handle is not None:
            mark.cuda_event.wait(stream._handle)
            return
        stream.enqueue("wait_event", f"wait for stream {mark.stream.id}",
                       lambda _handle: mark.reached.wait(), uses_device=False,
                       site=sites.enqueue_site(2))

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds between this event and ``end_event`` (both recorded and reached)."""
        if not isinstance(end_event, Event):
            raise TypeError(f"elapsed_time takes an Event, got {type(end_event).__name__}")
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("elapsed_time needs both events made with "
                               "Event(enable_timing=True)")
        start, end = self._recorded("elapsed_time"), end_event._recorded("elapsed_time")
        if not (self._happened() and end_event._happened()):
            raise RuntimeError("elapsed_time: an event has not happened yet. "
                               "Fix: call end_event.synchronize() first.")
        if start.cuda_event is not None:
            from numba import cuda

            return float(cuda.event_elapsed_time(start.cuda_event, end.cuda_event))
        return (end.time - start.time) * 1e3


# stream.py's wait_stream and record_event make events, but that module is imported first
# (this one is built on it), so the class is handed over here, once.
_stream_module.Event = Event

"""A stream: an in-order queue of device work that the host fills and does not wait for.

The host *enqueues* a kernel and returns at once; the device runs the queue
in order, one item after the other. On a real GPU the queue is a CUDA stream
(a numba-cuda ``stream``) and the hardware runs it. numba's CUDA simulator
runs every launch to the end before returning, so here each stream has a
**worker thread** that plays the device: it takes items off the queue in
order and runs them, while the host thread goes on. Only one simulated
kernel runs at a time (one lock, the "device"), as on a small GPU.

Errors are **deferred**, as on a GPU: a kernel that fails in the worker does
not stop the host. The stream remembers the failure, skips the work queued
after it (its inputs may be garbage), and the next call that waits for the
stream raises :class:`KernelError` naming the op and where it was enqueued.

Every stream belongs to one ``cuda`` device (``cuda:N``; see ``teachgrad.cuda_devices``):
each device has its own default stream and, per host thread, its own current stream, so
the host can queue work on two devices and wait for one (``synchronize(device)``).

``TEACHGRAD_LAUNCH_BLOCKING=1`` (or :func:`set_launch_blocking`) makes every
launch wait until its kernel has run, like ``CUDA_LAUNCH_BLOCKING=1``: slower,
but an error then points at the very launch that failed.
"""
from __future__ import annotations

import atexit
import collections
import contextlib
import itertools
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .. import cuda_devices
from . import records, sites
from .simulated import device_lock as _device_lock, low_switch_interval, on_worker, set_busy
from .records import HostWait, OpRecord

#: ``teachgrad.streams.event.Event``, set by that module as soon as the class exists (events
#: are built on streams, so this module cannot import it): ``wait_stream`` and
#: ``record_event`` make events.
Event: Any = None


class KernelError(RuntimeError):
    """A kernel enqueued earlier failed; raised at the next call that waits for it."""

    def __init__(self, record: OpRecord, skipped: int, cause: BaseException) -> None:
        later = f" The {skipped} op(s) queued after it on this stream were skipped." if skipped else ""
        super().__init__(
            f"{record.describe()}, failed on the device with {type(cause).__name__}: {cause}.{later} "
            "Errors in cuda kernels are reported at the next call that waits for the device "
            "(.item(), .numpy(), .cpu(), printing, synchronize()); set "
            "TEACHGRAD_LAUNCH_BLOCKING=1 to stop at the failing launch itself."
        )
        self.record, self.skipped = record, skipped


#: CUDA driver errors that leave the context unusable (a fault on the device): an illegal
#: address, a launch timeout, a device-side assert, a hardware stack error, an illegal
#: instruction, a misaligned address, an invalid address space or PC, a failed launch.
STICKY_ERRORS = frozenset({700, 702, 710, 714, 715, 716, 717, 718, 719})


class DeviceFault(KernelError):
    """A real GPU reported an error for work on a stream, at a wait or at a launch.

    The driver does not say which kernel failed, so the ops in flight are named; after
    a fault on the device (:data:`STICKY_ERRORS`) nothing in this process can use the
    GPU again. ``__cause__`` is numba's ``CudaAPIError``.
    """

    def __init__(self, stream_id: int, in_flight: list[OpRecord], cause: BaseException) -> None:
        code = getattr(cause, "code", None)
        self.sticky = code in STICKY_ERRORS
        ops = "; ".join(r.describe() for r in in_flight[-5:]) or "none"
        RuntimeError.__init__(
            self,
            f"work on cuda stream {stream_id} failed on the GPU ({cause}). Ops in flight, "
            f"one of which failed: {ops}. "
            + ("A fault on the device leaves this process's CUDA context unusable: every "
               "later cuda operation fails as well, so restart Python (in Jupyter: restart "
               "the kernel). A GPU does not check array bounds, so an index past the end "
               "reads or writes whatever memory is there, and faults only outside any "
               "allocation (the simulator raises IndexError for every one). "
               if self.sticky else "")
            + "Rerun with TEACHGRAD_LAUNCH_BLOCKING=1 to stop at the failing launch itself.")
        self.record = in_flight[-1] if in_flight else None
        self.skipped = 0
        self.in_flight = list(in_flight)


def _env_blocking() -> bool:
    return os.environ.get("TEACHGRAD_LAUNCH_BLOCKING", "0").strip() not in ("", "0")


_blocking = _env_blocking()


def launch_blocking() -> bool:
    """Whether every launch waits for its kernel (``TEACHGRAD_LAUNCH_BLOCKING=1``)."""
    return _blocking


def set_launch_blocking(on: bool) -> None:
    """Make every launch synchronous (``True``) or asynchronous again (``False``).

    Work already queued is finished first, so nothing runs out of order.
    """
    global _blocking
    if not isinstance(on, bool):
        raise TypeError(f"set_launch_blocking takes True or False, got {on!r}")
    synchronize()
    _blocking = on


def _simulated() -> bool:
    from .. import _cuda_setup

    return _cuda_setup.is_simulated()


@dataclass
class _Item:
    record: OpRecord
    run: Callable[[Any], None]  # given the CUDA stream handle (None in the simulator)
    uses_device: bool = True  # event markers and waits do not take the device


_STOP = object()
_ids = itertools.count()


class Stream:
    """An in-order queue of device work, as ``torch.cuda.Stream``.

    Work on one stream runs in the order it was enqueued. Work on different
    streams may run in any order relative to each other: order it with
    :meth:`wait_stream` or :meth:`wait_event`, as in PyTorch.

    A stream belongs to one device (``device``: the current one by default),
    as in PyTorch: ``Stream(device=1)`` queues work for ``cuda:1``.
    """

    _capture: Any = None  #: the CUDA graph capturing this stream's launches (see graphs.py)

    def __init__(self, device: Any = None, priority: int = 0, *,
                 _is_default: bool = False) -> None:
        if not isinstance(priority, int):
            raise TypeError(f"priority must be an int, got {priority!r}")
        from .. import _cuda_setup

        _cuda_setup.check_cuda()  # (tensors warn about the simulator, kernel launches do not)
        index = device_index(device)
        if not _is_default:
            default_stream(index)  # made first, so that cuda:0's default stream is stream 0
        cuda_devices.fix_count()
        self.id = next(_ids)
        self.device = index  #: the index of the cuda device this stream feeds
        self.priority = priority
        self._cv = threading.Condition()
        self._queue: collections.deque = collections.deque()
        self._failure: tuple[OpRecord, BaseException] | None = None
        self._skipped = 0
        self._worker: threading.Thread | None = None
        if _simulated():
            self._handle = None
        else:
            with cuda_devices.using(index):  # numba's context of that GPU
                self._handle = self._gpu_stream(_is_default)
        if self._handle is None:
            # patches the simulator for threads now, not mid-launch
            _device_lock(synchronize_if_pending)
        self._in_flight: list[OpRecord] = []  # GPU: launched since the last synchronize
        self._last: OpRecord | None = None
        _all_streams.append(self)

    @staticmethod
    def _gpu_stream(is_default: bool):
        from numba import cuda

        return cuda.default_stream() if is_default else cuda.stream()

    def __repr__(self) -> str:
        where = "simulator worker thread" if self._handle is None else "CUDA stream"
        return (f"<teachgrad.cuda.Stream {self.id} on cuda:{self.device} ({where}), "
                f"{self.pending()} op(s) pending>")

    # -- enqueueing ------------------------------------------------------------------
    def enqueue(self, kind: str, name: str, run: Callable[[Any], None],
                uses_device: bool = True, site: tuple[str, str | None] | None = None) -> OpRecord:
        """Put ``run`` on this stream; return its record at once (blocking mode: after it ran)."""
        where, op = site or sites.enqueue_site(2)
        record = OpRecord(kind, name, op, where, self.id, records.now(), device=self.device)
        self._last = record
        records.note_op(record)
        if self._capture is not None:  # a CUDA graph records it instead: nothing runs now
            return self._capture.take(self, record, run, uses_device)
        item = _Item(record, run, uses_device)
        if self._handle is not None:
            self._launch_on_gpu(item)
        elif _blocking:
            self._wait_for_queue()
            self._run(item, raise_now=True)
        else:
            self._put(item)
        return record

    def last_record(self) -> OpRecord | None:
        """The record of the item enqueued last on this stream (None before the first)."""
        return self._last

    def _put(self, item: Any) -> None:
        with self._cv:
            if self._worker is None:
                self._worker = threading.Thread(target=self._work_loop, daemon=True,
                                                name=f"teachgrad-stream-{self.id}")
                self._worker.start()
            if not self._queue:
                set_busy(+1)
            self._queue.append(item)
            self._cv.notify_all()

    def _launch_on_gpu(self, item: _Item) -> None:
        from numba.cuda.cudadrv.driver import CudaAPIError

        from . import gpu_times

        item.record.status = "running"
        try:
            gpu_times.launch_timed(item.record, self._handle, item.run)
        except CudaAPIError as error:  # (after a fault, every launch fails at once)
            item.record.status = "failed"
            in_flight, self._in_flight = [*self._in_flight, item.record], []
            raise DeviceFault(self.id, in_flight, error) from error
        self._in_flight.append(item.record)
        if _blocking:
            self.synchronize()

    # -- the device side (simulator) ---------------------------------------------------
    def _work_loop(self) -> None:
        on_worker.active = True
        while True:
            with self._cv:
                while not self._queue:
                    self._cv.wait()
                item = self._queue[0]  # stays queued until done: pending() counts it
            if item is _STOP:
                return
            self._run(item, raise_now=False)
            item = None  # its arrays may die now (memory counters see them freed at sync)
            with self._cv:
                self._queue.popleft()
                if not self._queue:
                    set_busy(-1)
                self._cv.notify_all()

    def _run(self, item: _Item, raise_now: bool) -> None:
        record = item.record
        if self._failure is not None and item.uses_device:
            record.status = "skipped"
            self._skipped += 1
            return
        lock = (_device_lock(synchronize_if_pending) if item.uses_device
                else contextlib.nullcontext())
        with lock, (low_switch_interval() if raise_now else contextlib.nullcontext()):
            cpu0 = time.thread_time()
            record.started, record.status = records.now(), "running"
            try:
                item.run(None)
                record.status = "done"
            except BaseException as error:  # reported at the next synchronize
                record.status = "failed"
                if raise_now:
                    raise KernelError(record, 0, error) from error
                self._failure = (record, error)
            finally:
                record.finished = records.now()
                record.device_cpu = time.thread_time() - cpu0

    # -- waiting -----------------------------------------------------------------------
    def pending(self) -> int:
        """Items enqueued on this stream and not finished yet."""
        if self._handle is not None:
            return 0 if self._handle_done() else len(self._in_flight)
        with self._cv:
            return len(self._queue)

    def _handle_done(self) -> bool:
        from numba import cuda

        event = cuda.event(timing=False)
        event.record(self._handle)
        return bool(event.query())

    def query(self) -> bool:
        """True when everything enqueued on this stream has run (never waits)."""
        return self.pending() == 0

    def _wait_for_queue(self) -> None:
        if self._handle is not None:
            self._sync_gpu()
            return
        with self._cv:
            self._cv.wait_for(lambda: not self._queue)

    def synchronize(self) -> None:
        """Wait for everything enqueued on this stream; raise a deferred error if one failed.

        The wait is recorded (``Stream.synchronize`` in a timeline), like every other
        host wait.
        """
        reason, site = sites.wait_reason(1)
        refuse_while_capturing(reason, site)
        began = records.now()
        try:
            self._wait_for_queue()
        finally:
            records.note_wait(HostWait(reason, site, began, records.now()))
        self.raise_deferred()

    def raise_deferred(self) -> None:
        """Raise (once) the :class:`KernelError` of a kernel that failed on this stream."""
        if self._failure is None:
            return
        (record, cause), skipped = self._failure, self._skipped
        self._failure, self._skipped = None, 0
        raise KernelError(record, skipped, cause) from cause

    def _sync_gpu(self) -> None:
        from numba.cuda.cudadrv.driver import CudaAPIError

        try:
            self._handle.synchronize()
        except CudaAPIError as error:  # the GPU cannot say which op: name all in flight
            in_flight, self._in_flight = self._in_flight, []
            raise DeviceFault(self.id, in_flight, error) from error
        for record in self._in_flight:
            record.status = "done"
        self._in_flight.clear()

    # -- ordering between streams (PyTorch's API) ------------------------------------------
    def wait_event(self, event) -> None:
        """Work enqueued on this stream from now on waits until ``event`` has happened."""
        event.wait(self)

    def wait_stream(self, stream: "Stream") -> None:
        """Work enqueued on this stream from now on waits for all work queued on ``stream``."""
        if not isinstance(stream, Stream):
            raise TypeError(f"wait_stream takes a Stream, got {type(stream).__name__}")
        self.wait_event(Event().record(stream))

    def record_event(self, event=None):
        """Record ``event`` (a new one if None) on this stream and return it."""
        return (event or Event()).record(self)

    def _stop(self) -> None:
        if self._worker is not None and self._worker.is_alive():
            self._put(_STOP)
            self._worker.join(timeout=5.0)


# -- the current stream (per host thread and device, as in PyTorch) --------------------------

_all_streams: list[Stream] = []
_default: dict[int, Stream] = {}  # one default stream per device index
_local = threading.local()  # .streams: {device index: the stream a with stream(s) chose}


def device_index(device: Any = None) -> int:
    """A checked cuda device index from an int, ``"cuda:1"``, a device, or None (current)."""
    if device is None:
        return cuda_devices.current_index()
    if isinstance(device, int) and not isinstance(device, bool):
        return cuda_devices.check_index(device)
    from ..device import Device, as_device

    if not isinstance(device, (str, Device)):
        raise TypeError(f"expected a cuda device (an int, 'cuda:N' or a device), got {device!r}")
    found = as_device(device)
    if found.type != "cuda":
        raise ValueError(f"expected a cuda device, got {found}")
    return found.index


def default_stream(device: Any = None) -> Stream:
    """The stream a device's launches use unless a ``with stream(s):`` block says otherwise."""
    index = device_index(device)
    if index not in _default:
        _default[index] = Stream(index, _is_default=True)
    return _default[index]


def current_stream(device: Any = None) -> Stream:
    """The stream launches for ``device`` (default: the current device) go to now."""
    index = device_index(device)
    chosen = getattr(_local, "streams", None)
    return (chosen and chosen.get(index)) or default_stream(index)


@contextlib.contextmanager
def stream(s: Stream | None) -> Iterator[Stream | None]:
    """``with stream(s):`` sends the launches inside to ``s`` (``None``: no change).

    As in PyTorch, ``s``'s device becomes the current device inside the block.
    """
    if s is None:
        yield s
        return
    if not isinstance(s, Stream):
        raise TypeError(f"stream() takes a teachgrad.cuda.Stream or None, got {type(s).__name__}")
    if getattr(_local, "streams", None) is None:
        _local.streams = {}
    previous = _local.streams.get(s.device)
    _local.streams[s.device] = s
    try:
        with cuda_devices.using(s.device):
            yield s
    finally:
        _local.streams[s.device] = previous


def synchronize(device: Any = None) -> None:
    """Wait until every stream (of ``device`` only, if given) has run everything enqueued;
    raise the first deferred error."""
    wait_for_all_streams(device=None if device is None else device_index(device))


def wait_for_all_streams(reason: str | None = None, device: int | None = None) -> None:
    """:func:`synchronize`, recorded as a wait for ``reason`` (default: the caller's name);
    with ``device``, only that device's streams."""
    if not _all_streams:
        return
    found, site = sites.wait_reason(3 if reason is None else 2)
    refuse_while_capturing(reason or found, site)
    waited_for = [s for s in list(_all_streams) if device is None or s.device == device]
    began = records.now()
    try:
        for s in waited_for:
            s._wait_for_queue()
    finally:
        records.note_wait(HostWait(reason or found, site, began, records.now()))
    for s in waited_for:
        s.raise_deferred()


#: the streams capturing a CUDA graph now (``graphs.py`` fills it): host waits are refused
capturing: list[Stream] = []


def refuse_while_capturing(reason: str, site: str) -> None:
    """A host wait while a graph captures is an error (``CUDAGraph.refuse_host_wait`` says why)."""
    for s in list(capturing):
        graph = s._capture
        if graph is not None:
            graph.refuse_host_wait(reason, site)


def synchronize_if_pending() -> None:
    """:func:`synchronize`, but only when some stream has work or an error to report."""
    if any(s.pending() or s._failure is not None for s in list(_all_streams)):
        synchronize()


def enqueue(kind: str, name: str, run: Callable[[Any], None]) -> OpRecord:
    """Enqueue device work on the current stream (what kernel launches and copies call)."""
    return current_stream().enqueue(kind, name, run, site=sites.enqueue_site(2))


def _stop_workers() -> None:
    """At exit: let each worker finish its queue, but never hang the interpreter."""
    for s in list(_all_streams):
        s._stop()


def _after_fork_in_child() -> None:
    """A forked child has no worker threads: start every stream afresh (its queue is the parent's)."""
    from . import simulated

    simulated.reset_after_fork()
    for s in _all_streams:
        s._cv = threading.Condition()
        s._queue = collections.deque()
        s._worker, s._failure, s._skipped = None, None, 0


atexit.register(_stop_workers)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

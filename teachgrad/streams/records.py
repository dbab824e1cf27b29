"""What the queue remembers: one record per enqueued op, one per host wait.

Every item a stream runs (a kernel, a host-to-device copy, an event marker)
gets an :class:`OpRecord` when the host enqueues it. The host fills in
``enqueued``; whoever runs it (the stream's worker thread in the simulator)
fills in ``started`` and ``finished``. Every time the host has to stop and
wait for the device (``.item()``, ``.numpy()``, printing, ``synchronize()``)
a :class:`HostWait` says where, for how long, and for which event marker
(none when it waited for whole streams). An ``Event.query()`` loop is a wait too:
the polls from the first ``False`` to the ``True`` are recorded as one.

Times are seconds on one clock, :func:`now` (``time.perf_counter``), shared
by the host thread and the worker threads: in the simulator that *is* the
device's clock. On a real GPU they come from CUDA events around each launch,
placed on the host clock when a recording ends (:mod:`.gpu_times`; that code
has not run here, where there is no GPU).

:func:`recording` collects these while a block of code runs, together with
the wall time and the CPU time of the whole process: CPU/wall above 1 means
two cores were busy at once, i.e. host and device really overlapped.
"""
from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

now = time.perf_counter


@dataclass
class OpRecord:
    """One item on a stream: what it was, who asked for it, and when it ran."""

    kind: str  #: "kernel", "h2d" (host-to-device copy), "event" or "wait_event"
    name: str  #: the kernel's name, e.g. "grid_stride_binary"
    op: str | None  #: the autograd op that launched it, e.g. "Mul.forward" (None outside one)
    site: str  #: where in the user's code it was enqueued, "file.py:12 in step"
    stream: int  #: the stream's id (0 is the default stream)
    enqueued: float  #: host clock when the host put it on the queue
    started: float | None = None  #: device clock when it began (None: not yet)
    finished: float | None = None  #: device clock when it ended (None: not yet)
    status: str = "queued"  #: "queued", "running", "done", "failed" or "skipped"
    device_cpu: float = 0.0  #: CPU seconds the worker thread spent on it (simulator)
    replay: str | None = None  #: "graph 1, replay 3" when a CUDA graph's replay launched it
    device: int = 0  #: the index of the cuda device whose stream ran it (cuda:0, cuda:1, ...)

    def describe(self) -> str:
        """``kernel grid_stride_binary (Mul.forward), enqueued at step.py:12 in step``."""
        what = f"{self.kind} {self.name}" + (f" ({self.op})" if self.op else "")
        return f"{what}, enqueued at {self.site}"


@dataclass
class HostWait:
    """The host blocked until the device caught up."""

    reason: str  #: what made it wait, e.g. "Tensor.item" or "synchronize"
    site: str  #: where in the user's code
    began: float
    ended: float
    #: the event marker waited for (``Event.synchronize``, an ``Event.query()`` loop);
    #: None when the host waited for a whole stream or for every stream
    target: OpRecord | None = None


@dataclass
class Recording:
    """Everything the queue did while a :func:`recording` block ran."""

    ops: list[OpRecord] = field(default_factory=list)
    waits: list[HostWait] = field(default_factory=list)
    began: float = 0.0  #: host clock at the start of the block
    ended: float | None = None  #: host clock at its end
    cpu_seconds: float = 0.0  #: CPU time of the whole process (all threads) during the block
    host_cpu_seconds: float = 0.0  #: CPU time of the host thread alone
    simulated: bool = True  #: True: device times read the host clock; False: CUDA events

    @property
    def wall_seconds(self) -> float:
        return (self.ended if self.ended is not None else now()) - self.began

    @property
    def cpu_per_wall(self) -> float:
        """Busy cores on average: about 1 when nothing overlapped, up to 2 on two cores."""
        return self.cpu_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def streams(self) -> list[int]:
        return sorted({op.stream for op in self.ops})

    @property
    def devices(self) -> list[int]:
        """The cuda device indexes the recorded ops ran on."""
        return sorted({op.device for op in self.ops})

    def device_of(self, stream: int) -> int:
        """The device a recorded stream belongs to (stream ids are unique across devices)."""
        return next(op.device for op in self.ops if op.stream == stream)

    def device_busy_seconds(self, stream: int | None = None) -> float:
        """Seconds the device spent running ops (of one stream, or of all)."""
        # a simulated graph replay is recorded whole and launch by launch: count it once
        shown = {op.replay for op in self.ops if op.replay is not None and op.kind != "graph"}
        return sum(op.finished - op.started for op in self.ops
                   if op.finished is not None and op.started is not None
                   and (stream is None or op.stream == stream)
                   and not (op.kind == "graph" and op.replay in shown))

    def host_wait_seconds(self) -> float:
        return sum(w.ended - w.began for w in self.waits)

    def idle_gaps(self, stream: int, min_seconds: float = 0.0) -> list[tuple[float, float]]:
        """``(start, end)`` of the stretches where ``stream`` had nothing to run."""
        spans = sorted((op.started, op.finished) for op in self.ops
                       if op.stream == stream and op.started is not None and op.finished is not None)
        gaps, cursor = [], self.began
        for start, end in spans:
            if start - cursor > min_seconds:
                gaps.append((cursor, start))
            cursor = max(cursor, end)
        end_of_block = self.ended if self.ended is not None else cursor
        if end_of_block - cursor > min_seconds:
            gaps.append((cursor, end_of_block))
        return gaps

    def summary(self) -> dict[str, float]:
        """The figures a learner reads first, in seconds (and the CPU/wall ratio)."""
        return {
            "wall_seconds": self.wall_seconds,
            "cpu_seconds": self.cpu_seconds,
            "cpu_per_wall": self.cpu_per_wall,
            "device_busy_seconds": self.device_busy_seconds(),
            "host_wait_seconds": self.host_wait_seconds(),
            "ops": float(len(self.ops)),
        }


# -- collecting --------------------------------------------------------------------

_lock = threading.Lock()
_active: list[Recording] = []  # recordings open now (they may nest)


def note_op(record: OpRecord) -> None:
    """Add a freshly enqueued op to every open recording."""
    if _active:
        with _lock:
            for rec in _active:
                rec.ops.append(record)


def note_wait(wait: HostWait) -> None:
    if _active:
        with _lock:
            for rec in _active:
                rec.waits.append(wait)


def is_recording() -> bool:
    return bool(_active)


@contextlib.contextmanager
def collect(simulated: bool, finish) -> Iterator[Recording]:
    """Open a :class:`Recording`; ``finish()`` runs before it closes (e.g. a synchronize)."""
    rec = Recording(began=now(), simulated=simulated)
    cpu0, host0 = time.process_time(), time.thread_time()
    with _lock:
        _active.append(rec)
    try:
        yield rec
    finally:
        try:
            finish(rec)
        finally:
            rec.ended = now()
            rec.cpu_seconds = time.process_time() - cpu0
            rec.host_cpu_seconds = time.thread_time() - host0
            with _lock:
                _active.remove(rec)

"""What a profile holds: one :class:`FunctionEvent` per op, region, host wait or kernel.

A host event (an op's ``Function.apply``, a backward node, a ``record_function``
region, a host wait) has a start and an end on the host clock and, after
:func:`nest`, a parent: the innermost host event of the same thread that contains
it. Its **self** time is its total time minus its children's totals: the time spent
in that op and nowhere deeper. A device event (a kernel, a host-to-device copy) ran on
a stream; it belongs to the host event that was running when the host enqueued it,
and its time counts as that event's *self CUDA* time.

Times are microseconds from the start of the profile, as in PyTorch's tables.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class FunctionEvent:
    """One timed thing the profiler saw (``torch.autograd.profiler_util.FunctionEvent``)."""

    id: int
    name: str
    thread: int  #: the host thread's id (device events: the stream's id)
    start_us: float
    end_us: float
    kind: str = "op"  #: "op", "backward", "region", "wait", "kernel" or "memcpy"
    device_type: str = "cpu"  #: "cpu" for host events, "cuda" for kernels and copies
    stream: int | None = None  #: the stream a device event ran on
    input_shapes: list = field(default_factory=list)  #: one list per argument ([] if none)
    stack: list = field(default_factory=list)  #: the user's line that led here (with_stack)
    cpu_parent: FunctionEvent | None = None
    cpu_children: list = field(default_factory=list)
    kernels: list = field(default_factory=list)  #: device events this event enqueued itself

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us

    @property
    def is_device(self) -> bool:
        return self.device_type != "cpu"

    @property
    def cpu_time_total(self) -> float:
        return 0.0 if self.is_device else self.duration_us

    @property
    def self_cpu_time_total(self) -> float:
        if self.is_device:
            return 0.0
        return self.duration_us - sum(c.duration_us for c in self.cpu_children)

    @property
    def self_cuda_time_total(self) -> float:
        if self.is_device:
            return self.duration_us
        return sum(k.duration_us for k in self.kernels)

    @property
    def cuda_time_total(self) -> float:
        """Device time of the kernels this event enqueued, itself or through its children."""
        if self.is_device:
            return self.duration_us
        return self.self_cuda_time_total + sum(c.cuda_time_total for c in self.cpu_children)

    def __repr__(self) -> str:
        return (f"<FunctionEvent {self.name!r} {self.kind} thread={self.thread} "
                f"start={self.start_us:.3f}us dur={self.duration_us:.3f}us>")


def nest(events: list[FunctionEvent]) -> None:
    """Give every host event its parent: the innermost one of its thread that contains it.

    Events are sorted by start (ties: the longer one first, then the one made first), and
    a stack of open events per thread is kept: an event closes once the next one starts
    at or after its end.
    """
    host = sorted((e for e in events if not e.is_device),
                  key=lambda e: (e.thread, e.start_us, -e.end_us, e.id))
    open_events: list[FunctionEvent] = []
    for event in host:
        while open_events and (open_events[-1].thread != event.thread
                               or open_events[-1].end_us <= event.start_us):
            open_events.pop()
        if open_events and event.end_us <= open_events[-1].end_us:
            event.cpu_parent = open_events[-1]
            open_events[-1].cpu_children.append(event)
        open_events.append(event)


def attach_kernels(events: list[FunctionEvent], enqueued_at: dict[int, tuple[int, float]]) -> None:
    """Give each device event to the innermost host event that was running when it was enqueued.

    ``enqueued_at`` maps a device event's id to ``(host thread, enqueue time in us)``.
    """
    by_thread: dict[int, list[FunctionEvent]] = {}
    for e in events:
        if not e.is_device:
            by_thread.setdefault(e.thread, []).append(e)
    for device_event in (e for e in events if e.is_device):
        thread, when = enqueued_at[device_event.id]
        around = [e for e in by_thread.get(thread, ()) if e.start_us <= when <= e.end_us]
        if around:  # the innermost: the one that started last
            max(around, key=lambda e: (e.start_us, -e.end_us, e.id)).kernels.append(device_event)

"""``tg.profiler.profile``: record ops, regions, kernels and copies; summarise and export.

    with tg.profiler.profile(record_shapes=True) as prof:
        with tg.profiler.record_function("step"):
            loss = model(x).sum(); loss.backward()
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")

With a ``schedule`` the loop calls ``prof.step()`` after each step and only the
active steps are kept; ``on_trace_ready(prof)`` runs at the end of each active cycle
(and, as in PyTorch, when the profile stops in the middle of one).
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable

from . import recorder
from .averages import EventList, KeyAverages
from .events import FunctionEvent, attach_kernels, nest
from .schedule import ProfilerAction, ProfilerActivity, record_always

_A = ProfilerAction
#: What to do when the action changes from one step to the next (PyTorch's table).
_TRANSITIONS: dict[tuple, tuple[str, ...]] = {
    (_A.NONE, _A.WARMUP): ("prepare",),
    (_A.NONE, _A.RECORD): ("prepare", "start"),
    (_A.NONE, _A.RECORD_AND_SAVE): ("prepare", "start"),
    (_A.WARMUP, _A.NONE): ("start", "stop"),
    (_A.WARMUP, _A.RECORD): ("start",),
    (_A.WARMUP, _A.RECORD_AND_SAVE): ("start",),
    (_A.RECORD, _A.NONE): ("stop",),
    (_A.RECORD, _A.WARMUP): ("stop",),
    (_A.RECORD_AND_SAVE, _A.NONE): ("stop", "ready"),
    (_A.RECORD_AND_SAVE, _A.WARMUP): ("stop", "ready", "prepare"),
    (_A.RECORD_AND_SAVE, _A.RECORD): ("stop", "ready", "prepare", "start"),
    (_A.RECORD_AND_SAVE, _A.RECORD_AND_SAVE): ("stop", "ready", "prepare", "start"),
    (_A.WARMUP, None): ("start", "stop"),
    (_A.RECORD, None): ("stop", "ready"),
    (_A.RECORD_AND_SAVE, None): ("stop", "ready"),
}


def _activities(activities: Iterable | None) -> frozenset:
    if activities is None:
        return frozenset(ProfilerActivity)
    try:
        chosen = list(activities)
    except TypeError:
        raise TypeError(f"activities must be a list of ProfilerActivity, got {activities!r}") from None
    for a in chosen:
        if not isinstance(a, ProfilerActivity):
            raise TypeError(f"activities: {a!r} is not a ProfilerActivity. Use "
                            "[ProfilerActivity.CPU] and/or ProfilerActivity.CUDA")
    if not chosen:
        raise ValueError("activities is empty: record at least ProfilerActivity.CPU")
    return frozenset(chosen)


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"profile({name}=...) takes True or False, got {value!r}")
    return value


class profile:
    """A profiler over the engine's seams, with ``torch.profiler.profile``'s API."""

    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[["profile"], Any] | None = None,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False) -> None:
        self.activities = _activities(activities)
        if schedule is not None and not callable(schedule):
            raise TypeError(f"schedule must be a function of the step number (e.g. "
                            f"tg.profiler.schedule(wait=1, warmup=1, active=2)), got {schedule!r}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(f"on_trace_ready must be callable (it gets the profile), got {on_trace_ready!r}")
        self.record_shapes = _flag("record_shapes", record_shapes)
        self.with_stack = _flag("with_stack", with_stack)
        if _flag("profile_memory", profile_memory):
            raise ValueError("profile_memory=True: this profiler records time, not memory. "
                             "Leave profile_memory=False")
        self.schedule = schedule or record_always
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(0)
        self._collector: recorder.Collector | None = None
        self._device: contextlib.ExitStack | None = None
        self._device_rec = None
        self._step_region: recorder.record_function | None = None
        self._events = EventList()
        self._running = False

    # -- the lifecycle -------------------------------------------------------------------
    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._running:
            raise RuntimeError("this profile is already running: call stop() first")
        if recorder.active is not None:
            raise RuntimeError("another profile is recording: teachgrad records one at a time. "
                               "Stop it first (leave its with-block)")
        self._running = True
        self._transit(_A.NONE, self.current_action)
        self._enter_step_region()

    def stop(self) -> None:
        if not self._running:
            raise RuntimeError("this profile is not running: nothing to stop")
        self._exit_step_region()
        self._running = False
        self._transit(self.current_action, None)

    def step(self) -> None:
        """Say that a training step ended: the schedule decides what the next one does."""
        if not self._running:
            raise RuntimeError("prof.step() outside the profile: call it inside the with-block")
        self._exit_step_region()
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        if not isinstance(self.current_action, ProfilerAction):
            raise TypeError(f"the schedule returned {self.current_action!r}, not a ProfilerAction")
        self._transit(previous, self.current_action)
        self._enter_step_region()

    def _enter_step_region(self) -> None:
        if self.record_steps:
            self._step_region = recorder.record_function(f"ProfilerStep#{self.step_num}")
            self._step_region.__enter__()

    def _exit_step_region(self) -> None:
        if self._step_region is not None:
            self._step_region.__exit__(None, None, None)
            self._step_region = None

    def _transit(self, previous: ProfilerAction, current: ProfilerAction | None) -> None:
        for action in _TRANSITIONS.get((previous, current), ()):
            getattr(self, f"_{action}_trace")()

    # -- what each transition does -----------------------------------------------------------
    def _prepare_trace(self) -> None:
        """Switch the seams on (warm-up: what is recorded now is dropped at start)."""
        self._collector = recorder.Collector(self.record_shapes, self.with_stack)
        self._collector.install()
        if ProfilerActivity.CUDA in self.activities:
            from ..streams import recording

            self._device = contextlib.ExitStack()
            self._device_rec = self._device.enter_context(recording())

    def _start_trace(self) -> None:
        self._collector.clear()
        if self._device_rec is not None:
            self._device_rec.ops.clear()
            self._device_rec.waits.clear()

    def _stop_trace(self) -> None:
        collector, self._collector = self._collector, None
        if self._device is not None:
            self._device.close()  # waits for the device: every kernel has its end time
        collector.uninstall()
        self._events = _gather(collector, self._device_rec, self.activities)
        self._device = self._device_rec = None

    def _ready_trace(self) -> None:
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # -- results ----------------------------------------------------------------------------
    def events(self) -> EventList:
        """Every event of the last finished trace (ops, regions, waits, kernels, copies)."""
        return self._events

    def key_averages(self, group_by_input_shape: bool = False) -> KeyAverages:
        if group_by_input_shape and not self.record_shapes:
            raise ValueError("key_averages(group_by_input_shape=True) needs the shapes: "
                             "profile with record_shapes=True")
        return self._events.key_averages(group_by_input_shape)

    def export_chrome_trace(self, path: str) -> None:
        """Write the last trace as Chrome Trace Event Format JSON (chrome://tracing, Perfetto,
        speedscope, ``tg.widgets.ProfileView``)."""
        from .chrome_trace import write_trace

        write_trace(self._events, path)

    def chrome_trace(self) -> dict:
        """The trace as a dict (what :meth:`export_chrome_trace` writes)."""
        from .chrome_trace import trace_dict

        return trace_dict(self._events)


def _gather(collector: recorder.Collector, device_rec, activities: frozenset) -> EventList:
    """The trace's events: host events (CPU), device items and host waits (CUDA), nested."""
    events = list(collector.events) if ProfilerActivity.CPU in activities else []
    enqueued_at: dict[int, tuple[int, float]] = {}
    if device_rec is not None:
        host_thread = events[0].thread if events else 0
        for w in device_rec.waits:
            if w.reason != "end of recording" and ProfilerActivity.CPU in activities:
                events.append(collector.add(f"wait for device ({w.reason})", "wait", w.began,
                                            w.ended, thread=host_thread))
        for op in device_rec.ops:
            if op.kind not in ("kernel", "h2d") or op.started is None or op.finished is None:
                continue
            name = op.name if op.kind == "kernel" else "Memcpy HtoD (Host -> Device)"
            event = FunctionEvent(-1 - len(enqueued_at), name, op.stream, collector.us(op.started),
                                  collector.us(op.finished), kind="kernel" if op.kind == "kernel"
                                  else "memcpy", device_type="cuda", stream=op.stream)
            enqueued_at[event.id] = (host_thread, collector.us(op.enqueued))
            events.append(event)
    events.sort(key=lambda e: (e.is_device, e.start_us, -e.end_us))
    nest(events)
    attach_kernels(events, enqueued_at)
    return EventList(events)

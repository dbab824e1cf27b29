"""The trace in Chrome's Trace Event Format: what chrome://tracing, Perfetto and speedscope read.

Every event is a *complete* event (``"ph": "X"``) with a start ``ts`` and a duration
``dur`` in microseconds, a process ``pid`` and a lane ``tid``. Host events sit on
their thread's lane in this process, nested by time: an op inside a
``record_function`` region starts after it and ends before it. Kernels and copies sit
on the device's process, one lane per stream, where they ran. Metadata events
(``"ph": "M"``) name the processes and lanes.
"""
from __future__ import annotations

import json
import os

from .events import FunctionEvent

DEVICE_PID = 0  #: the device's process in the trace (the host is the real process id)
_CATEGORY = {"op": "cpu_op", "backward": "cpu_op", "region": "user_annotation",
             "wait": "cuda_runtime", "kernel": "kernel", "memcpy": "gpu_memcpy"}


def _us(t: float) -> float:
    return round(t, 3)  # nanoseconds: rounding both ends keeps children inside parents


def _complete_event(e: FunctionEvent, host_pid: int) -> dict:
    start, end = _us(e.start_us), _us(e.end_us)
    args: dict = {}  # (left out when empty: speedscope shows args beside each name)
    if e.input_shapes:
        args["Input Shapes"] = e.input_shapes
    if e.stack:
        args["Call stack"] = ";".join(e.stack)
    if e.is_device:
        args["stream"] = e.stream
    event = {"ph": "X", "cat": _CATEGORY[e.kind], "name": e.name,
             "pid": DEVICE_PID if e.is_device else host_pid,
             "tid": e.stream if e.is_device else e.thread,
             "ts": start, "dur": round(end - start, 3)}
    if args:
        event["args"] = args
    return event


def _metadata(pid: int, tid: int | None, name: str) -> dict:
    if tid is None:
        return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def trace_dict(events: list[FunctionEvent]) -> dict:
    """The trace of ``events`` as a dict ready for ``json.dump``."""
    host_pid = os.getpid()
    out = [_metadata(host_pid, None, "host (python)")]
    threads = sorted({e.thread for e in events if not e.is_device})
    out += [_metadata(host_pid, t, f"thread {t}") for t in threads]
    streams = sorted({e.stream for e in events if e.is_device})
    if streams:
        out.append(_metadata(DEVICE_PID, None, "cuda:0"))
        out += [_metadata(DEVICE_PID, s, f"stream {s}") for s in streams]
    ordered = sorted(events, key=lambda e: (e.is_device, e.thread, e.start_us, -e.end_us, e.id))
    out += [_complete_event(e, host_pid) for e in ordered]
    return {"traceEvents": out, "displayTimeUnit": "ms"}


def write_trace(events: list[FunctionEvent], path: str | os.PathLike) -> None:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"export_chrome_trace takes a file path, got {path!r}")
    text = json.dumps(trace_dict(events))  # made first: a failure leaves no half-written file
    with open(path, "w") as f:
        f.write(text)

"""``tg.profiler``: where the time of a training step goes, with ``torch.profiler``'s API.

    from teachgrad.profiler import profile, record_function, ProfilerActivity

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 record_shapes=True) as prof:
        with record_function("forward"):
            loss = model(x).sum()
        loss.backward()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("step.json")     # open it in tg.widgets.ProfileView

The events come from the engine's own seams (``Function.apply``, the backward engine,
the stream timeline of kernels and copies), never from wrapping the user's code::

    recorder.py      the seams and record_function
    events.py        FunctionEvent, nesting (parents, self time), kernels to their ops
    averages.py      key_averages() rows and their sorting
    table.py         the text table
    schedule.py      schedule(), ProfilerAction, ProfilerActivity
    profile.py       profile: start/step/stop, the schedule's transitions
    chrome_trace.py  export_chrome_trace: Trace Event Format JSON
"""
from __future__ import annotations

import os
import socket
import time
from typing import Callable

from .averages import EventList, FunctionEventAvg, KeyAverages
from .events import FunctionEvent
from .profile import profile
from .recorder import record_function
from .schedule import ProfilerAction, ProfilerActivity, schedule

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "KeyAverages", "ProfilerAction",
           "ProfilerActivity", "profile", "record_function", "schedule",
           "tensorboard_trace_handler"]


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None) -> Callable[[profile], None]:
    """An ``on_trace_ready`` that writes each trace to ``dir_name`` as
    ``<worker>.<time in ns>.pt.trace.json`` (the names TensorBoard's profiler plugin reads)."""
    if not isinstance(dir_name, (str, os.PathLike)):
        raise TypeError(f"tensorboard_trace_handler takes a folder path, got {dir_name!r}")
    if worker_name is not None and not isinstance(worker_name, str):
        raise TypeError(f"worker_name must be a str or None, got {worker_name!r}")
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"

    def handler(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        prof.export_chrome_trace(os.path.join(dir_name, f"{worker}.{time.time_ns()}.pt.trace.json"))

    return handler

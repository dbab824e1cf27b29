"""``schedule(wait=, warmup=, active=, repeat=, skip_first=)``: which steps are recorded.

A training loop calls ``prof.step()`` once per step; the schedule maps the step number
to an action, exactly as ``torch.profiler.schedule`` does: skip the first
``skip_first`` steps, then cycle through ``wait`` steps (off), ``warmup`` steps (on,
results thrown away: the first steps of a recording are the slowest) and ``active``
steps (recorded). The last active step of a cycle is ``RECORD_AND_SAVE``: when it ends,
the trace is handed to ``on_trace_ready``. ``repeat`` cycles, or (0) until the end.
"""
from __future__ import annotations

import enum
import warnings
from typing import Callable


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


class ProfilerActivity(enum.Enum):
    """What to record: host-side ops (CPU) and device-side kernels and copies (CUDA)."""

    CPU = "cpu"
    CUDA = "cuda"


def _count(name: str, value: object, least: int) -> int:
    if type(value) is not int or value < least:
        raise ValueError(f"schedule({name}={value!r}): {name} must be an int >= {least}")
    return value


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0,
             skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """The function from step number to :class:`ProfilerAction` (see the module's text)."""
    wait, warmup = _count("wait", wait, 0), _count("warmup", warmup, 0)
    active, repeat = _count("active", active, 1), _count("repeat", repeat, 0)
    skip_first = _count("skip_first", skip_first, 0)
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results", stacklevel=2)
    cycle = wait + warmup + active

    def schedule_fn(step: int) -> ProfilerAction:
        if type(step) is not int or step < 0:
            raise ValueError(f"a schedule takes a step number >= 0, got {step!r}")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        within = step % cycle
        if within < wait:
            return ProfilerAction.NONE
        if within < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if within < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def record_always(step: int) -> ProfilerAction:
    """The schedule of a profile given none: record from start to end."""
    return ProfilerAction.RECORD

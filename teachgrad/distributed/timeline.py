"""What each rank spent its time on: recorded intervals of compute and communication.

Every collective records one ``"comm"`` interval (from the call until its data
is in place); a script marks its own work with :func:`span`::

    with dist.span("forward+backward"):
        loss = loss_fn(model(x), y); loss.backward()

Times are ``time.perf_counter()`` seconds, which on Linux is one monotonic
clock shared by every process of a host, so the ranks' timelines line up.
When the launcher sets ``TEACHGRAD_DIST_TRACE_DIR``, each rank writes its
intervals there as ``rank<N>.json`` when it exits, for
:func:`teachgrad.distributed.launch` to gather.
"""
from __future__ import annotations

import atexit
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

TRACE_DIR_ENV = "TEACHGRAD_DIST_TRACE_DIR"
_MAX_EVENTS = 100_000  # a long run keeps the first ones, and says how many it dropped

_events: list[dict] = []
_state = {"rank": None, "size": None, "dropped": 0, "dumped": False}


def start(rank: int, size: int) -> None:
    """Begin recording for this rank (``init_process_group`` calls it)."""
    _events.clear()
    _state.update(rank=rank, size=size, dropped=0, dumped=False)
    if os.environ.get(TRACE_DIR_ENV):
        atexit.register(dump)


def stop() -> None:
    dump()


def record(kind: str, name: str, start: float, end: float, nbytes: int = 0) -> None:
    """Add one interval: ``kind`` is ``"comm"`` or ``"compute"``."""
    if len(_events) >= _MAX_EVENTS:
        _state["dropped"] += 1
        return
    _events.append({"kind": kind, "name": name, "start": start, "end": end, "bytes": nbytes})


@contextmanager
def span(name: str, kind: str = "compute") -> Iterator[None]:
    """Record the time spent inside the ``with`` block as one interval."""
    begin = time.perf_counter()
    try:
        yield
    finally:
        record(kind, name, begin, time.perf_counter())


def events() -> list[dict]:
    """This rank's recorded intervals so far (copies)."""
    return [dict(e) for e in _events]


def dump() -> None:
    """Write this rank's intervals to the launcher's trace directory, once."""
    folder = os.environ.get(TRACE_DIR_ENV)
    if not folder or _state["rank"] is None or _state["dumped"]:
        return
    _state["dumped"] = True
    payload = {"rank": _state["rank"], "world_size": _state["size"], "events": _events,
               "dropped": _state["dropped"]}
    Path(folder, f"rank{_state['rank']}.json").write_text(json.dumps(payload))

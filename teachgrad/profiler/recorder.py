"""Where the events come from: the engine's own seams, switched on only while profiling.

* every op: ``Function.apply`` calls :data:`teachgrad.autograd.function.observer` when
  one is set (the seam ``tg.jit.trace`` uses too); the profiler's observer times the op
  and runs it (through an outer observer, if one was already set);
* every backward node: the backward engine calls
  :data:`teachgrad.autograd.engine.node_observer` when one is set;
* ``record_function`` regions: the user's own names, timed the same way;
* kernels and host-to-device copies: the stream timeline (``teachgrad.streams``)
  records every enqueued item with its stream and its device start and end; host
  waits come from the same timeline.

When no profile is recording, both seams are ``None`` and ``record_function`` checks
one module variable: the engine's hot path runs exactly as it would without a profiler
(``benchmarks/profiler_overhead.py`` measures it).
"""
from __future__ import annotations

import itertools
import threading
from typing import Any, Callable

from ..autograd import engine, function
from ..streams import records
from ..streams.sites import enqueue_site
from .events import FunctionEvent

now = records.now


class Collector:
    """The host events of one recording, and the seams it occupies while it is on."""

    def __init__(self, record_shapes: bool, with_stack: bool) -> None:
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.origin = now()
        self.events: list[FunctionEvent] = []
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._outer_observer: Callable | None = None
        self._outer_node_observer: Callable | None = None

    def us(self, t: float) -> float:
        """Host clock seconds -> microseconds since the recording began."""
        return (t - self.origin) * 1e6

    def add(self, name: str, kind: str, start: float, end: float,
            args: tuple = (), thread: int | None = None, **extra: Any) -> FunctionEvent:
        event = FunctionEvent(next(self._ids), name, thread or threading.get_native_id(),
                              self.us(start), self.us(end), kind=kind, **extra)
        if self.record_shapes and kind == "op":
            event.input_shapes = [list(a.shape) if hasattr(a, "grad_fn") else [] for a in args]
        if self.with_stack and kind in ("op", "region"):
            event.stack = [enqueue_site(3)[0]]
        with self._lock:
            self.events.append(event)
        return event

    def clear(self) -> None:
        """Forget what was recorded (the end of a warm-up) and restart the clock."""
        with self._lock:
            self.events = []
            self.origin = now()

    # -- the seams ---------------------------------------------------------------------
    def observe(self, cls: type, args: tuple, kwargs: dict) -> Any:
        """``Function.apply``'s observer: run the op, timed."""
        start = now()
        try:
            outer = self._outer_observer
            return outer(cls, args, kwargs) if outer is not None else cls._apply(*args, **kwargs)
        finally:
            self.add(cls.__name__, "op", start, now(), args)

    def observe_node(self, node: Any, grads: list, call_backward: Callable) -> list:
        """The backward engine's node observer: run one node's backward, timed."""
        start = now()
        try:
            outer = self._outer_node_observer
            if outer is not None:
                return outer(node, grads, call_backward)
            return call_backward(node, grads)
        finally:
            self.add(node.name(), "backward", start, now())

    def install(self) -> None:
        global active
        self._outer_observer, self._outer_node_observer = function.observer, engine.node_observer
        function.observer, engine.node_observer = self.observe, self.observe_node
        active = self

    def uninstall(self) -> None:
        global active
        function.observer, engine.node_observer = self._outer_observer, self._outer_node_observer
        active = None


#: The collector recording now (None: nothing is profiled, and every seam is off).
active: Collector | None = None


class record_function:
    """A named region of the profile, as ``torch.profiler.record_function``.

    Use it as a context manager (``with record_function("data"):``) or as a decorator
    (``@record_function("loss")``). Outside a recording profile it records nothing.
    """

    def __init__(self, name: str, args: str | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"record_function takes a non-empty name (a str), got {name!r}")
        if args is not None and not isinstance(args, str):
            raise TypeError(f"record_function(args=...) takes a str or None, got {args!r}")
        self.name = name
        self.args = args
        self._start: float | None = None
        self._collector: Collector | None = None

    def __enter__(self) -> "record_function":
        self._collector = active
        if self._collector is not None:
            self._start = now()
        return self

    def __exit__(self, *exc: object) -> None:
        collector, self._collector = self._collector, None
        if collector is not None and collector is active:
            collector.add(self.name, "region", self._start, now())

    def __call__(self, fn: Callable) -> Callable:
        import functools

        name = self.name

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with record_function(name):
                return fn(*args, **kwargs)

        return wrapper

"""Timing one piece of work honestly: first call apart, warm-up, median of repeats.

Three habits make a timing mean something:

1. **Time the first call apart.** It compiles (numba), loads a module onto
   the GPU or touches fresh memory; it says how long a learner waits once,
   not how fast the code runs. It is reported as ``compile_s``.
2. **Warm up.** A few untimed calls bring caches, clocks and allocators to
   their steady state.
3. **Report the median of many calls.** One call can be slowed by anything
   else the machine does; the median ignores the outliers, the minimum says
   what the code can do on a quiet machine.

GPU work is *asynchronous*: a launch returns before the kernel has run, so a
host clock around it measures only the launch. GPU times therefore come from
CUDA *events*, time stamps the GPU itself writes into its queue before and
after the work (:class:`CudaEventTimer`). In numba's CUDA simulator events
record nothing, so simulated work is timed on the host and marked simulated.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence


class Timer(Protocol):
    """Something that can time the work between ``start()`` and ``stop()``."""

    name: str

    def start(self) -> None: ...

    def stop(self) -> float:
        """Seconds since ``start()``, once the work in between has finished."""


class HostTimer:
    """The host's clock (``time.perf_counter``), after an optional ``sync()``.

    ``sync`` waits for queued work (e.g. ``numba.cuda.synchronize``) so that
    asynchronous work is inside the measured interval.
    """

    name = "perf_counter"

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 sync: Callable[[], None] | None = None) -> None:
        self._clock = clock
        self._sync = sync or (lambda: None)
        self._started = 0.0

    def start(self) -> None:
        self._sync()
        self._started = self._clock()

    def stop(self) -> float:
        self._sync()
        return self._clock() - self._started


class CudaEventTimer:
    """GPU time between two CUDA events recorded on the default stream (numba.cuda)."""

    name = "cuda_event"

    def __init__(self) -> None:
        from numba import cuda

        self._cuda = cuda
        self._begin = cuda.event(timing=True)
        self._end = cuda.event(timing=True)

    def start(self) -> None:
        self._begin.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()  # wait until the GPU has passed the second event
        return self._cuda.event_elapsed_time(self._begin, self._end) / 1e3  # milliseconds -> s


@dataclass
class Timing:
    """What :func:`measure` found: the first call, and the timed calls after warm-up."""

    first_call_s: float
    times_s: list[float]
    timer: str = "perf_counter"

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def min_s(self) -> float:
        return min(self.times_s)

    @property
    def repeats(self) -> int:
        return len(self.times_s)

    @property
    def compile_s(self) -> float:
        """How much longer the first call took than a typical one (compiling, loading)."""
        return max(0.0, self.first_call_s - self.median_s)


def measure(work: Callable[[], object], timer: Timer | None = None, *, warmup: int = 2,
            repeats: int = 10, min_repeats: int = 3, budget_s: float | None = None,
            first_call_timer: Timer | None = None) -> Timing:
    """Time ``work()``: the first call apart, ``warmup`` untimed calls, then up to ``repeats``.

    ``timer`` times each repeat (default: the host clock). The first call is
    always timed on ``first_call_timer`` (default: the host clock), since it
    includes host-side work such as compiling that GPU events would not see
    as such. With ``budget_s``, repeating stops once the timed calls add up
    to that many seconds and at least ``min_repeats`` are done, so a slow
    case (a naive matmul) does not hold the whole run up.
    """
    timings = measure_in_turns([work], [timer or HostTimer()], warmup=warmup, repeats=repeats,
                               min_repeats=min_repeats, budget_s=budget_s,
                               first_call_timers=[first_call_timer or HostTimer()])
    return timings[0]


def measure_in_turns(works: Sequence[Callable[[], object]], timers: Sequence[Timer] | None = None, *,
                     warmup: int = 2, repeats: int = 10, min_repeats: int = 3,
                     budget_s: float | None = None, first_call_timers: Sequence[Timer] | None = None,
                     on_error: Callable[[int, Exception], None] | None = None) -> list[Timing | None]:
    """Time several pieces of work that take turns, as :func:`measure` times one.

    Each round times every work once, so when the machine gets busier or
    quieter all of them see it alike, and their *ratio* stays fair. With
    ``on_error``, a work that raises is reported as ``on_error(index, error)``,
    left out of the following rounds, and gets ``None`` instead of a Timing.
    """
    if repeats < 1 or min_repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1, min_repeats >= 1 and warmup >= 0, got "
                         f"repeats={repeats}, min_repeats={min_repeats}, warmup={warmup}")
    timers = list(timers) if timers is not None else [HostTimer() for _ in works]
    firsts = list(first_call_timers) if first_call_timers is not None else [HostTimer() for _ in works]
    first_call_s: dict[int, float] = {}
    times: dict[int, list[float]] = {}

    def attempt(i: int, action: Callable[[], object]) -> bool:
        try:
            action()
            return True
        except Exception as error:
            if on_error is None:
                raise
            on_error(i, error)
            first_call_s.pop(i, None)
            return False

    def first_call(i: int) -> None:
        firsts[i].start()
        works[i]()
        first_call_s[i] = firsts[i].stop()

    def warm_up(i: int) -> None:
        firsts[i].start()
        works[i]()
        if budget_s is not None and firsts[i].stop() * warmup > budget_s:
            warming.discard(i)  # one slow call is warm-up enough

    for i in range(len(works)):
        attempt(i, lambda: first_call(i))
    warming = set(first_call_s)
    for _ in range(warmup):
        for i in sorted(warming & set(first_call_s)):
            attempt(i, lambda: warm_up(i))
    active = list(first_call_s)
    times.update({i: [] for i in active})

    def timed_call(i: int) -> None:
        timers[i].start()
        works[i]()
        times[i].append(timers[i].stop())

    while active:
        for i in list(active):
            done = not attempt(i, lambda: timed_call(i))
            spent = sum(times[i])
            if done or len(times[i]) >= repeats or (
                    budget_s is not None and len(times[i]) >= min_repeats and spent > budget_s):
                active.remove(i)
    return [Timing(first_call_s[i], times[i], timers[i].name) if i in first_call_s else None
            for i in range(len(works))]


#: A timing of short calls lasts at least this long (the clock and the loop around
#: each call cost ~0.2 µs: small next to this, large next to a 1 µs call).
BATCH_S = 2e-4


def measure_batched(work: Callable[[], object], *, warmup: int = 2, repeats: int = 10,
                    min_repeats: int = 3, budget_s: float | None = None,
                    on_error: Callable[[int, Exception], None] | None = None,
                    clock: Callable[[], float] = time.perf_counter) -> Timing | None:
    """:func:`measure` for host work that may take microseconds: the first call is timed
    alone, then each timing runs ``work`` as many times as fill :data:`BATCH_S`, and
    reports the time per call."""
    try:
        started = clock()
        work()
        first_call_s = clock() - started
        calls = 1
        for _ in range(max(warmup, 1)):  # warm-up calls, the last one timed to size the batch
            started = clock()
            work()
            one = clock() - started
        calls = max(1, min(100_000, round(BATCH_S / max(one, 1e-9))))
    except Exception as error:
        if on_error is None:
            raise
        on_error(0, error)
        return None

    def batch() -> None:
        for _ in range(calls):
            work()

    # (measure_in_turns's own first call is one more batch: a last warm-up)
    timing = measure_in_turns([batch], [HostTimer(clock)], warmup=0, repeats=repeats,
                              min_repeats=min_repeats, budget_s=budget_s, on_error=on_error,
                              first_call_timers=[HostTimer(clock)])[0]
    if timing is None:
        return None
    return Timing(first_call_s, [t / calls for t in timing.times_s], timing.timer)

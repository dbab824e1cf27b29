"""Checkers for chapter 9, *CPU vs GPU speed*: timing, arithmetic intensity, the roofline.

The timing checker never looks at a real clock: it hands the learner's
function a fake clock and a fake device queue whose durations are scripted, so
the right answer is known exactly and the test cannot flake.
"""
from __future__ import annotations

import math
import statistics
from typing import Callable

from .core import Feedback, Mismatch, Test, check, unseen_rng


def _number(got: object, what: str) -> float:
    if isinstance(got, bool) or not isinstance(got, (int, float)) and not hasattr(got, "__float__"):
        raise Mismatch(f"expected a number for the {what}, got a {type(got).__name__}",
                       hint="return a plain Python number", show_values=False)
    return float(got)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


# -- exercise 9.1: timing properly ------------------------------------------------------------

class FakeDevice:
    """A clock plus an asynchronous queue, both scripted.

    ``work()`` is the function being timed: like a kernel launch it returns at
    once and only *enqueues* its duration; ``synchronize()`` waits for the queue,
    which is the only thing that moves the clock. ``durations`` scripts each
    call's length; the first calls are the slow ones (compilation, cold caches).
    """

    def __init__(self, durations: list[float]) -> None:
        self.durations = list(durations)
        self.now = 1000.0
        self.pending = 0.0
        self.calls = 0

    def clock(self) -> float:
        return self.now

    def synchronize(self) -> None:
        self.now += self.pending
        self.pending = 0.0

    def work(self) -> None:
        # calls past the script cost 1.0 each; the checker reports the wrong call count
        self.pending += self.durations[self.calls] if self.calls < len(self.durations) else 1.0
        self.calls += 1


#: (description, warm-up calls, timed repeats, scripted durations). Exact binary
#: fractions, so sums on the fake clock are exact.
TIMING_CASES = [
    ("1 warm-up (slow: compiling) then 5 repeats", 1, 5, [64.0, 0.375, 0.125, 0.25, 8.0, 0.25]),
    ("2 warm-ups then 3 repeats", 2, 3, [32.0, 16.0, 0.5, 0.25, 2.0]),
    ("no warm-up, 1 repeat", 0, 1, [0.75]),
    ("1 warm-up then 4 repeats (even count: median of the middle two)", 1, 4,
     [4.0, 1.0, 0.5, 3.0, 0.25]),
]


def check_median_time(median_time: Callable) -> Feedback:
    """Exercise 9.1: ``median_time(fn, *, warmup, repeats, clock, synchronize)``."""
    def make(description: str, warmup: int, repeats: int, durations: list[float]) -> Test:
        def run() -> None:
            device = FakeDevice(durations)
            got = _number(median_time(device.work, warmup=warmup, repeats=repeats,
                                      clock=device.clock, synchronize=device.synchronize),
                          "median time")
            timed = durations[warmup:]
            expected = statistics.median(timed)
            if device.calls != warmup + repeats:
                raise Mismatch(f"fn was called {device.calls} times instead of "
                               f"{warmup} warm-up + {repeats} timed = {warmup + repeats}",
                               warmup + repeats, device.calls,
                               "call fn `warmup` times untimed, then `repeats` times timed")
            if _close(got, expected):
                return
            raise Mismatch("wrong median time", expected, got,
                           _timing_hint(got, durations, warmup))

        return Test(f"{description}: durations {durations}", run)

    rng = unseen_rng()
    warmup, repeats = int(rng.integers(1, 3)), int(rng.integers(3, 8))
    # multiples of 1/64: sums on the fake clock stay exact
    durations = [float(rng.integers(256, 2048)) / 64 for _ in range(warmup)] + \
        [float(rng.integers(1, 128)) / 64 for _ in range(repeats)]
    unseen = (f"unseen: {warmup} warm-up(s) then {repeats} repeats", warmup, repeats, durations)
    return check("9.1", [make(*case) for case in TIMING_CASES + [unseen]],
                 candidate=median_time,
                 solved="warm up, synchronise before reading the clock, take the median.")


def _timing_hint(got: float, durations: list[float], warmup: int) -> str:
    timed = durations[warmup:]
    if _close(got, 0.0):
        return ("the clock did not move: the work is only queued when fn returns; call "
                "synchronize() before reading the clock after fn")
    if _close(got, statistics.mean(timed)):
        return "that is the mean; one slow run pulls it up, the median is robust to it"
    ordered = sorted(timed)
    if len(timed) % 2 == 0 and (_close(got, ordered[len(timed) // 2])
                                or _close(got, ordered[len(timed) // 2 - 1])):
        return ("with an even number of repeats there are two middle values: the median is "
                "their mean (statistics.median does it for you)")
    if _close(got, timed[len(timed) // 2]):
        return "sort the times before taking the middle one"
    leaked = [sum(durations[:warmup]) + timed[0]] + timed[1:]
    if warmup and _close(got, statistics.median(leaked)):
        return ("the warm-up's queued work leaked into the first timed run: synchronize() after "
                "the warm-up, before starting the clock")
    if _close(got, statistics.median(durations)) and not _close(got, statistics.median(timed)):
        return "the warm-up runs must not be timed: they include compilation"
    return "time each repeat on its own: start = clock(); fn(); synchronize(); clock() - start"


# -- exercise 9.2: arithmetic intensity of a matmul ------------------------------------------

def reference_matmul_intensity(M: int, K: int, N: int, itemsize: int) -> float:
    """FLOPs per byte of ``C = A @ B`` when each matrix crosses memory exactly once."""
    flops = 2 * M * K * N
    bytes_moved = (M * K + K * N + M * N) * itemsize
    return flops / bytes_moved


def check_matmul_intensity(matmul_intensity: Callable) -> Feedback:
    """Exercise 9.2: ``matmul_intensity(M, K, N, itemsize)`` in FLOP per byte."""
    rng = unseen_rng()
    cases = [(1024, 1024, 1024, 4), (4096, 4096, 4096, 2), (1, 4096, 4096, 4),
             (64, 1000, 32, 8), (1, 1, 1, 4),
             tuple(int(v) for v in rng.integers(1, 5000, size=3)) + (int(rng.choice([2, 4, 8])),)]

    def make(M: int, K: int, N: int, itemsize: int) -> Test:
        def run() -> None:
            expected = reference_matmul_intensity(M, K, N, itemsize)
            got = _number(matmul_intensity(M, K, N, itemsize), "intensity")
            if _close(got, expected):
                return
            if _close(got, expected / 2):
                hint = "each multiply-add is 2 FLOPs: the matmul does 2*M*K*N of them"
            elif _close(got, 2 * M * K * N / ((M * K + K * N) * itemsize)):
                hint = "C has to be written back to memory too: count M*N more elements"
            elif _close(got, expected * itemsize):
                hint = f"bytes, not elements: each element takes itemsize = {itemsize} bytes"
            else:
                hint = "FLOPs = 2*M*K*N; bytes = (M*K + K*N + M*N) * itemsize"
            raise Mismatch("wrong arithmetic intensity", expected, got, hint)

        return Test(f"M={M}, K={K}, N={N}, itemsize={itemsize} bytes", run)

    return check("9.2", [make(*c) for c in cases], candidate=matmul_intensity,
                 solved="square matmuls do ~n/6 FLOPs per float32 byte; a matrix-vector "
                        "product stays below 1.")


# -- exercise 9.3: the roofline ---------------------------------------------------------------

def check_attainable_gflops(attainable_gflops: Callable) -> Feedback:
    """Exercise 9.3: ``attainable_gflops(intensity, peak_gflops, bandwidth_gbs)`` (the roofline)."""
    cases = [
        ("a vector add on an H100 (published: 67 000 GFLOP/s, 3 350 GB/s)", (1 / 12, 67_000, 3_350)),
        ("a large matmul on the same GPU", (170.0, 67_000, 3_350)),
        ("exactly at the ridge point", (20.0, 100.0, 5.0)),
        ("a CPU: 1 000 GFLOP/s, 50 GB/s, intensity 4", (4.0, 1_000, 50)),
    ]
    rng = unseen_rng()
    for _ in range(2):
        cases.append(("an unseen machine and op", (round(float(rng.uniform(0.05, 300)), 3),
                                                   int(rng.integers(500, 100_000)),
                                                   int(rng.integers(20, 4000)))))

    def make(description: str, args: tuple) -> Test:
        def run() -> None:
            intensity, peak, bandwidth = args
            expected = min(peak, intensity * bandwidth)
            got = _number(attainable_gflops(*args), "attainable GFLOP/s")
            if _close(got, expected):
                return
            if _close(got, max(peak, intensity * bandwidth)):
                hint = "the lower of the two ceilings limits you, not the higher"
            elif _close(got, intensity * bandwidth) or _close(got, peak):
                hint = "an op is held by whichever ceiling is lower: min(peak, intensity * bandwidth)"
            else:
                hint = "bytes/s times FLOP/byte gives FLOP/s; then the compute peak caps it"
            raise Mismatch("wrong attainable speed", expected, got, hint)

        return Test(description + f": intensity={args[0]:.4g}, peak={args[1]}, bandwidth={args[2]}",
                    run)

    return check("9.3", [make(*c) for c in cases], candidate=attainable_gflops,
                 solved="you can place any op under the roofline.")

"""Asynchronous dispatch: the host prepares the next batch while the device runs this one.

    python benchmarks/async_overlap.py            # writes results/async_overlap.json
    python benchmarks/async_overlap.py --quick

A training loop on the ``cuda`` device, in numba's CUDA simulator (a worker
thread plays the device): each step uploads a batch, runs a small model's
forward, backward and SGD update, and, while those kernels run, the host
prepares the next batch with numpy ("decode" random numbers, "augment" them).
The same loop runs twice per repeat, in turns:

* **async**: launches return at once; the only wait is the final synchronize;
* **blocking**: ``TEACHGRAD_LAUNCH_BLOCKING=1`` semantics (``set_launch_blocking``),
  every launch waits for its kernel, so host and device take turns.

The host's batch is sized so that preparing it takes about as long as the
device's step (measured first, in this run): that is where overlap pays most,
up to 2x. Overlap needs a second core: the simulator's kernels are Python and
hold the GIL, numpy's batch preparation releases it. So BLAS is limited to one
thread, and CPU/wall (the process's CPU time over wall time) is reported beside
every time: about 1 means one core was busy at a time, towards 2 means host and
device really ran at once. Target: async wall time at least 1.3x lower.
"""
from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # one BLAS thread: the second core is the device's
os.environ.setdefault("TEACHGRAD_CUDA", "sim")

import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402

from common import RESULTS, header, parse_arguments, print_table, save  # noqa: E402

import teachgrad as tg  # noqa: E402
from teachgrad import streams  # noqa: E402
from teachgrad.streams.simulated import SIMULATOR_SWITCH_INTERVAL  # noqa: E402

BATCH, FEATURES, HIDDEN = 8, 16, 8
TARGET = 1.3
MAX_RAW_NUMBERS = 20_000_000  # 80 MB of float32 per batch at most


class Loop:
    """The training loop, with a host-side batch preparation of ``raw_size`` numbers."""

    def __init__(self, raw_size: int, seed: int = 0) -> None:
        self.raw_size = raw_size
        self.rng = np.random.default_rng(seed)
        start = self.rng.standard_normal((FEATURES, HIDDEN)).astype(np.float32) * 0.1
        self.w = tg.tensor(start, device="cuda", requires_grad=True)

    def prepare(self) -> np.ndarray:
        """The host's share: make a batch (numpy, which releases the GIL while it computes)."""
        raw = self.rng.standard_normal(self.raw_size, dtype=np.float32)  # "decode"
        raw = np.sqrt(np.abs(raw)) * 0.5 + np.tanh(raw)  # "augment"
        return np.ascontiguousarray(raw[:BATCH * FEATURES].reshape(BATCH, FEATURES))

    def step(self, batch: np.ndarray) -> tg.Tensor:
        """The device's share: upload, forward, backward, SGD update (all enqueued)."""
        x = tg.tensor(batch, device="cuda")
        loss = (x @ self.w).relu().sum()
        loss.backward()
        with tg.no_grad():
            self.w -= 0.01 * self.w.grad
            self.w.grad = None
        return loss

    def run(self, steps: int) -> tuple[float, float]:
        """``steps`` steps; returns (wall seconds, process CPU seconds)."""
        batch = self.prepare()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            self.step(batch)
            batch = self.prepare()  # overlaps the step's kernels, unless launches block
        tg.cuda.synchronize()
        return time.perf_counter() - wall0, time.process_time() - cpu0


def in_mode(blocking: bool, work: Callable[[], Any]) -> Any:
    with streams.blocking_launches(blocking):
        return work()


def calibrate(loop: Loop, repeats: int = 5) -> dict[str, float]:
    """Time the device's step (blocking) and the host's preparation per number, alone.

    Minima of a few timings: both are then what the work costs on a quiet moment of the
    machine, so their ratio holds even when other programs come and go.
    """
    def timed(work: Callable[[], Any]) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            work()
            times.append(time.perf_counter() - start)
        return min(times)

    batch = loop.prepare()
    device_step = in_mode(True, lambda: timed(lambda: loop.step(batch)))
    probe = Loop(1_000_000)
    per_number = timed(probe.prepare) / probe.raw_size
    return {"device_step_s": device_step, "prepare_s_per_number": per_number}


def stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main(argv: list[str] | None = None) -> dict:
    args = parse_arguments(__doc__, argv, loops=8, repeats=5, quick=(4, 2),
                           out="async_overlap.json")
    steps, repeats = args.loops, args.repeats
    machine = header(None)  # the load average before the run
    warm = Loop(1000)
    in_mode(False, lambda: warm.run(2))  # first calls: kernel factories, caches
    cal = calibrate(warm)
    raw_size = min(int(cal["device_step_s"] / cal["prepare_s_per_number"]), MAX_RAW_NUMBERS)
    loop = Loop(raw_size)
    runs: dict[str, list[tuple[float, float]]] = {"async": [], "blocking": []}
    for _ in range(repeats):  # in turns, so a change in the machine's load hits both
        runs["async"].append(in_mode(False, lambda: loop.run(steps)))
        runs["blocking"].append(in_mode(True, lambda: loop.run(steps)))
    with streams.recording() as rec:  # one more async run, recorded, for the timeline figures
        loop.run(steps)
    walls = {mode: [w for w, _ in r] for mode, r in runs.items()}
    cpu_per_wall = {mode: [c / w for w, c in r] for mode, r in runs.items()}
    ratios = [b / a for a, b in zip(walls["async"], walls["blocking"])]
    result = {
        "header": {**machine, "simulated": tg.cuda.is_simulated(),
                   "switch_interval_s_while_streams_busy": SIMULATOR_SWITCH_INTERVAL},
        "workload": {"steps": steps, "repeats": repeats, "batch": BATCH, "features": FEATURES,
                     "hidden": HIDDEN, "host_raw_numbers": raw_size, **cal},
        "wall_s": {mode: stats(v) for mode, v in walls.items()},
        "cpu_per_wall": {mode: stats(v) for mode, v in cpu_per_wall.items()},
        "speedup_blocking_over_async": stats(ratios),
        "recorded_async_run": rec.summary(),
        "target": TARGET,
        "target_met": statistics.median(ratios) >= TARGET,
        "measured_on": "numba CUDA simulator (host clock); no GPU was measured",
    }
    print_table(f"{steps} steps, {repeats} repeats (seconds; CPU/wall = busy cores)",
                ["mode", "wall min", "wall median", "wall max", "CPU/wall median"],
                [[mode, *result["wall_s"][mode].values(), result["cpu_per_wall"][mode]["median"]]
                 for mode in walls])
    r = result["speedup_blocking_over_async"]
    print(f"blocking / async wall time: median {r['median']:.2f}x (min {r['min']:.2f}, "
          f"max {r['max']:.2f}); target >= {TARGET}x: {'met' if result['target_met'] else 'NOT met'}")
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()

"""8 trials on 2 local Dask workers against 1: the wall-clock speed-up of a search.

Each trial is ``spirals_objective`` at budget 81 (81 x 15 = 1215 SGD steps, width 32, so every
trial costs about the same). One ``LocalCluster`` per worker count (its start-up is not
timed), the same 8 configurations on each, alternated and repeated; BLAS limited to one
thread per worker. The target: 2 workers at least 1.6x faster than 1. The machine's load
average is recorded before and after: on a shared 2-core machine the second worker only
helps if a core is free.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/tune_dask_speedup.py [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from common import RESULTS, header, save

from teachgrad import tune
from teachgrad.tune.objectives import spirals_objective

SPACE = {"lr": tune.loguniform(0.01, 0.5), "width": 32, "weight_decay": tune.loguniform(1e-6, 1e-3),
         "steps_per_budget": 15}
TRIALS, BUDGET = 8, 81


def spin(n: int) -> int:
    """Pure Python work for the probe below."""
    total = 0
    for i in range(n):
        total += i * i
    return total


def free_core_probe(n: int = 3_000_000) -> float:
    """How much faster two processes finish two equal pieces of work than one process
    doing both: about 2 on an idle 2-core machine, about 1 when other programs hold the
    cores. It says what speed-up the machine could give at all while the benchmark ran."""
    start = time.perf_counter()
    spin(n)
    spin(n)
    alone = time.perf_counter() - start
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(spin, [10, 10]))  # start the workers first
        start = time.perf_counter()
        list(pool.map(spin, [n, n]))
        together = time.perf_counter() - start
    return alone / together


def timed_search(client) -> tuple[float, list]:
    start = time.perf_counter()
    result = tune.random_search(spirals_objective, SPACE, TRIALS, BUDGET,
                                executor=client.get_executor(), seed=0)
    return time.perf_counter() - start, [t.loss for t in result.trials]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "tune_dask_speedup.json"))
    args = parser.parse_args(argv)
    head = header(None)  # (its load average: before the runs)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the workers inherit it
    probes = [free_core_probe()]
    times: dict[int, list[float]] = {1: [], 2: []}
    losses = {}
    with tune.local_dask_client(n_workers=1) as one, tune.local_dask_client(n_workers=2) as two:
        clients = {1: one, 2: two}
        for workers, client in clients.items():  # warm-up: imports in the workers
            timed_search(client)
        for _ in range(args.repeats):
            for workers, client in clients.items():
                elapsed, losses[workers] = timed_search(client)
                times[workers].append(elapsed)
                print(f"{workers} worker(s): {elapsed:.2f} s (load {os.getloadavg()[0]:.2f})",
                      flush=True)
    probes.append(free_core_probe())
    stats = {w: {"min_s": min(t), "median_s": statistics.median(t), "max_s": max(t), "all_s": t}
             for w, t in times.items()}
    speedup_median = stats[1]["median_s"] / stats[2]["median_s"]
    speedup_best = stats[1]["min_s"] / stats[2]["min_s"]
    result = {"header": head, "trials": TRIALS, "budget": BUDGET,
              "threads_per_worker": 1, "repeats": args.repeats,
              "one_worker": stats[1], "two_workers": stats[2],
              "speedup_median": speedup_median, "speedup_min_times": speedup_best,
              "same_losses_on_both": losses[1] == losses[2],
              "free_core_probe_before_after": probes,
              "target": "speedup_median >= 1.6", "target_met": speedup_median >= 1.6}
    print(f"speed-up, medians: {speedup_median:.2f}x; best times: {speedup_best:.2f}x; "
          f"free-core probe (2 processes vs 1, ideal 2.0): {probes}")
    save(result, Path(args.out))


if __name__ == "__main__":
    main()

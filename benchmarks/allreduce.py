"""The lesson's ring all-reduce against MPI's own Allreduce, 1e3 to 1e7 float32.

Run ``python benchmarks/allreduce.py``: it starts itself on 2 and on 3 ranks
(``teachgrad.distributed.launch``), where each rank times single calls of both
algorithms in turns (a barrier before each call; a call's time is the slowest
rank's), then writes ``results/allreduce.json``:

* min/median/max seconds per call for each size and algorithm, and the ratio
  ring / MPI of the medians (target: at most 2x from 1e6 floats up);
* the ring's cost model ``t = 2(p-1) alpha + 2(p-1)/p * bytes / bandwidth``,
  fitted to the 2-rank ring times and then *predicting* the 3-rank ones, which
  are measured too (the 3-rank job has more ranks than this machine has cores);
* the load average and the share of CPU other programs used before the run.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from common import RESULTS, header, print_table, save  # noqa: I001
from distributed_common import cpu_busy_fraction, stats

SIZES = [1_000, 10_000, 100_000, 1_000_000, 10_000_000]


def calls_for(n: int) -> int:
    return 40 if n <= 100_000 else (15 if n <= 1_000_000 else 6)


def worker(sizes: list[int]) -> None:
    """One rank: time both algorithms on each size; rank 0 prints the JSON line."""
    from mpi4py import MPI

    import teachgrad.distributed as dist
    from teachgrad.distributed import ring

    dist.init_process_group("mpi")  # its exception hook ends the job if a rank raises
    comm = MPI.COMM_WORLD
    rank, p = comm.Get_rank(), comm.Get_size()
    rows = []
    for n in sizes:
        data = np.random.default_rng(rank).normal(size=n).astype(np.float32)
        buffers = {"mpi": data.copy(), "ring": data.copy()}
        run = {"mpi": lambda b: comm.Allreduce(MPI.IN_PLACE, b, op=MPI.SUM),
               "ring": lambda b: ring.ring_all_reduce(b, np.add, comm)}
        for name in run:  # warm-up, and the check that both give the same sum
            run[name](buffers[name])
        same = bool(np.allclose(buffers["mpi"], buffers["ring"], rtol=1e-5, atol=1e-5))
        times = {name: [] for name in run}
        for call in range(calls_for(n)):
            for name in (("mpi", "ring") if call % 2 == 0 else ("ring", "mpi")):
                buffers[name][:] = data
                comm.Barrier()
                start = time.perf_counter()
                run[name](buffers[name])
                times[name].append(time.perf_counter() - start)
        slowest = {}
        for name, mine in times.items():
            slowest[name] = np.array(mine)
            comm.Allreduce(MPI.IN_PLACE, slowest[name], op=MPI.MAX)
        rows.append({"floats": n, "bytes": n * 4, "ring_equals_mpi": same,
                     "mpi_s": stats(slowest["mpi"].tolist()),
                     "ring_s": stats(slowest["ring"].tolist())})
    if rank == 0:
        print(json.dumps({"world_size": p, "rows": rows}))


def fit_cost_model(rows: list[dict], p: int) -> tuple[float, float]:
    """Least squares on relative errors: median ring time = 2(p-1) alpha + 2(p-1)/p bytes / bw.

    Dividing each equation by its measured time weighs a 20 us call as much as a
    50 ms one (plain least squares would fit the largest sizes only).
    """
    a = np.array([[2 * (p - 1), 2 * (p - 1) / p * r["bytes"]] for r in rows])
    t = np.array([r["ring_s"]["median"] for r in rows])
    (alpha, inverse_bandwidth), *_ = np.linalg.lstsq(a / t[:, None], np.ones_like(t), rcond=None)
    return float(alpha), float(1 / inverse_bandwidth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    parser.add_argument("--out", default=str(RESULTS / "allreduce.json"))
    args = parser.parse_args()
    if args.worker:
        worker(args.sizes)
        return
    import teachgrad.distributed as dist
    from teachgrad.distributed.ring import modelled_time

    result = {"benchmark": "allreduce", "header": header(None)}
    result["header"]["cpu_busy_before"] = cpu_busy_fraction()
    runs = {}
    for p in (2, 3):
        job = dist.launch(__file__, n=p, args=["--worker", "--sizes", *map(str, args.sizes)],
                          timeout=600).raise_for_status()
        runs[p] = json.loads(job.stdout[0].strip().splitlines()[-1])
    alpha, bandwidth = fit_cost_model(runs[2]["rows"], 2)
    result["cost_model"] = {"fitted_on": "2-rank ring medians", "latency_s": alpha,
                            "bandwidth_bytes_per_s": bandwidth}
    for p, run in runs.items():
        for row in run["rows"]:
            row["ratio_ring_over_mpi"] = row["ring_s"]["median"] / row["mpi_s"]["median"]
            row["model_ring_s"] = modelled_time(row["bytes"], p, bandwidth, alpha)
        table = [[r["floats"], r["mpi_s"]["median"] * 1e3, r["ring_s"]["median"] * 1e3,
                  r["ratio_ring_over_mpi"], r["model_ring_s"] * 1e3] for r in run["rows"]]
        print_table(f"all-reduce of float32 on {p} ranks (ms per call, medians)",
                    ["floats", "MPI", "ring", "ring/MPI", "model"], table)
    result["runs"] = {str(p): run for p, run in runs.items()}
    result["target"] = "ring within 2x of MPI's Allreduce from 1e6 floats up (2 ranks)"
    result["target_met"] = all(r["ratio_ring_over_mpi"] <= 2 for r in runs[2]["rows"]
                               if r["floats"] >= 1_000_000)
    save(result, Path(args.out))




if __name__ == "__main__":
    sys.exit(main())

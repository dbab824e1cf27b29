"""DistributedDataParallel on 2 ranks against one process: scaling efficiency.

A compute-bound MLP (784 -> 1024 -> 1024 -> 10, 1.86 M parameters) trains with
SGD, one BLAS thread per process. Run ``python benchmarks/ddp_scaling.py``; it
launches, in turns and ``--rounds`` times:

* ``single``: one process, no DDP, batch ``B`` (and ``B/2``);
* ``ddp``: 2 ranks with DDP, each on ``B/2`` (strong scaling: the same global
  batch) and each on ``B`` (weak scaling: the same per-rank batch).

Efficiency = throughput on 2 ranks / (2 x throughput of one process), in
samples per second from the median step time. Each rank also reports how much
of a step its bucket all-reduces took (from the recorded timeline). Results go
to ``results/ddp_scaling.json`` with the load average and the share of CPU
other programs used just before the run: on a shared 2-core machine 2 ranks
reach full speed only if both cores are free.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from common import RESULTS, header, print_table, save  # noqa: I001
from distributed_common import cpu_busy_fraction, stats

LAYERS = (784, 1024, 1024, 10)


def worker(mode: str, batch: int, steps: int, warmup: int, bucket_mb: float) -> None:
    """Train for ``warmup + steps`` steps; rank 0 prints step times as a JSON line."""
    import teachgrad as tg
    import teachgrad.distributed as dist
    from teachgrad.nn.parallel import DistributedDataParallel

    rank = 0
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(LAYERS[0], LAYERS[1]), tg.nn.ReLU(),
                             tg.nn.Linear(LAYERS[1], LAYERS[2]), tg.nn.ReLU(),
                             tg.nn.Linear(LAYERS[2], LAYERS[3]))
    if mode == "ddp":
        dist.init_process_group("mpi")
        rank = dist.get_rank()
        model = DistributedDataParallel(model, bucket_cap_mb=bucket_mb)
    rng = np.random.default_rng(rank)
    x = tg.tensor(rng.normal(size=(batch, LAYERS[0])), dtype=tg.float32)
    y = tg.tensor(rng.integers(0, LAYERS[-1], size=batch))
    optimizer = tg.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = tg.nn.CrossEntropyLoss()
    times = []
    for step in range(warmup + steps):
        if mode == "ddp":
            dist.barrier()  # every rank starts the step together
        start = time.perf_counter()
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    comm_share = None
    if mode == "ddp":
        events = [e for e in dist.timeline.events() if e["name"].startswith("all_reduce bucket")]
        timed = events[-steps * len(model.buckets):]  # the buckets of the timed steps
        comm_share = sum(e["end"] - e["start"] for e in timed) / sum(times[warmup:])
    if rank == 0:
        print(json.dumps({"mode": mode, "batch": batch, "step_s": times[warmup:],
                          "comm_share_rank0": comm_share}))


def run(dist, mode: str, batch: int, steps: int, warmup: int, bucket_mb: float) -> dict:
    n = 2 if mode == "ddp" else 1
    job = dist.launch(__file__, n=n, timeout=600,
                      args=["--worker", mode, "--batch", str(batch), "--steps", str(steps),
                            "--warmup", str(warmup), "--bucket-mb", str(bucket_mb)]
                      ).raise_for_status()
    return json.loads(job.stdout[0].strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", choices=["single", "ddp"], help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=256, help="global batch B")
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bucket-mb", type=float, default=1.0, help="DDP's bucket_cap_mb")
    parser.add_argument("--out", default=str(RESULTS / "ddp_scaling.json"))
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.batch, args.steps, args.warmup, args.bucket_mb)
        return
    import teachgrad.distributed as dist

    result = {"benchmark": "ddp_scaling", "header": header(None), "layers": LAYERS,
              "global_batch": args.batch, "steps": args.steps, "rounds": args.rounds,
              "bucket_cap_mb": args.bucket_mb}
    result["header"]["cpu_busy_before"] = cpu_busy_fraction()
    half = args.batch // 2
    configs = [("single", args.batch), ("single", half), ("ddp", half), ("ddp", args.batch)]
    times: dict[str, list[float]] = {f"{m}-{b}": [] for m, b in configs}
    comm_share: dict[str, list[float]] = {f"ddp-{b}": [] for b in (half, args.batch)}
    for _ in range(args.rounds):
        for mode, batch in configs:
            out = run(dist, mode, batch, args.steps, args.warmup, args.bucket_mb)
            times[f"{mode}-{batch}"] += out["step_s"]
            if mode == "ddp":
                comm_share[f"ddp-{batch}"].append(out["comm_share_rank0"])
    result["step_s"] = {k: stats(v) for k, v in times.items()}
    median = {k: v["median"] for k, v in result["step_s"].items()}
    strong = median[f"single-{args.batch}"] / median[f"ddp-{half}"] / 2
    weak = median[f"single-{args.batch}"] / median[f"ddp-{args.batch}"]
    result["efficiency"] = {
        "strong_same_global_batch": strong,   # (B / t_single(B)) / (2 * ... ) = t1(B) / (2 t2(B/2))
        "weak_same_per_rank_batch": weak,     # t1(B) / t2(B) per rank
        "target": 0.70, "target_met_weak": weak >= 0.70, "target_met_strong": strong >= 0.70}
    result["comm_share_of_step_rank0"] = {k: statistics.median(v) for k, v in comm_share.items()}
    result["header"]["cpu_busy_after"] = cpu_busy_fraction()
    rows = [[k, v["median"] * 1e3, v["min"] * 1e3, v["max"] * 1e3] for k, v in result["step_s"].items()]
    print_table("step time (ms)", ["run", "median", "min", "max"], rows)
    print(f"efficiency: strong {strong:.2f}, weak {weak:.2f}; comm share "
          f"{result['comm_share_of_step_rank0']}")
    save(result, Path(args.out))


if __name__ == "__main__":
    sys.exit(main())

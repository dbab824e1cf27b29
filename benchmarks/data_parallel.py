"""DataParallel's known costs, against the DDP pattern, on two simulated cuda devices.

    python benchmarks/data_parallel.py           # writes results/data_parallel.json
    python benchmarks/data_parallel.py --quick

One SGD training step of a small MLP on a batch, three ways, in turns, in one process:

* **one device**: the plain model on ``cuda:0``;
* **DataParallel** over ``cuda:0`` and ``cuda:1``: every step scatters the batch,
  *replicates the model* onto ``cuda:1`` (a copy of every parameter), runs both halves,
  *gathers* the outputs on ``cuda:0``; in backward every replica's gradients travel
  back to ``cuda:0``, where the one optimizer steps (and the loss is computed);
* **DDP pattern**: one replica per device, made once; each device runs its half and
  steps its own optimizer after the gradients are averaged (an all-reduce: here each
  device receives the other's gradient and averages), as ``DistributedDataParallel`` does
  with one process per device. (teachgrad's DDP itself runs on MPI ranks with cpu
  tensors, so it cannot share these simulated devices; this is its pattern on them.)

Reported per step: wall time (min/median/max over repeats), the device-to-device
copies and bytes (``tg.cuda.transfer_stats()``), the kernels each device ran, and the
host's time to enqueue a step (until the steps return, before the wait that ends each
timing).
This runs in numba's CUDA simulator: the two devices share one CPU and run one kernel
at a time, so no variant can be faster than one device here; what carries over to real
GPUs is the *count* of copies and launches each pattern makes per step.
"""
from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                  "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
os.environ.setdefault("TEACHGRAD_CUDA", "sim")

import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402

from common import header, parse_arguments, print_table, save  # noqa: E402

import teachgrad as tg  # noqa: E402
from teachgrad import streams  # noqa: E402

BATCH, FEATURES, HIDDEN, CLASSES = 8, 8, 16, 4  # small: the simulator runs a thread per element


def make_model(seed: int = 0) -> tg.nn.Module:
    tg.manual_seed(seed)
    return tg.nn.Sequential(tg.nn.Linear(FEATURES, HIDDEN), tg.nn.ReLU(),
                            tg.nn.Linear(HIDDEN, CLASSES))


def sgd_step(model: tg.nn.Module, forward: Callable) -> Callable[[Any, Any], Any]:
    """One SGD step of ``model``'s parameters, computing the output with ``forward``."""
    opt = tg.optim.SGD(model.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = ((forward(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return step


def one_device() -> Callable[[Any, Any], Any]:
    model = make_model().to("cuda:0")
    return sgd_step(model, model)


def data_parallel() -> Callable[[Any, Any], Any]:
    model = make_model().to("cuda:0")
    return sgd_step(model, tg.nn.DataParallel(model, device_ids=[0, 1]))


def ddp_pattern() -> Callable[[Any, Any], float]:
    replicas = [make_model().to(f"cuda:{d}") for d in (0, 1)]  # made once, kept
    opts = [tg.optim.SGD(r.parameters(), lr=0.01) for r in replicas]

    def step(x, y):
        half = x.shape[0] // 2
        losses = []
        for d, (replica, opt) in enumerate(zip(replicas, opts)):
            opt.zero_grad()
            rows = slice(d * half, (d + 1) * half)
            xd, yd = x[rows].to(f"cuda:{d}"), y[rows].to(f"cuda:{d}")
            loss = ((replica(xd) - yd) ** 2).mean()
            loss.backward()
            losses.append(loss)
        with tg.no_grad():  # all-reduce (average): each device adds the other's gradient
            for p0, p1 in zip(*(r.parameters() for r in replicas)):
                from_1, from_0 = p1.grad.to("cuda:0"), p0.grad.to("cuda:1")
                p0.grad.add_(from_1).mul_(0.5)
                p1.grad.add_(from_0).mul_(0.5)
        for opt in opts:
            opt.step()
        return losses[0]
    return step


VARIANTS = {"one device": one_device, "DataParallel": data_parallel, "DDP pattern": ddp_pattern}


def counts_per_step(step: Callable, x: Any, y: Any) -> dict[str, float]:
    """Device-to-device copies, bytes, and kernels per device, of one step."""
    tg.cuda.synchronize()
    tg.cuda.reset_transfer_stats()
    with streams.recording() as rec:
        step(x, y)
    stats = tg.cuda.transfer_stats()
    kernels = {d: sum(1 for op in rec.ops if op.kind == "kernel" and op.device == d)
               for d in (0, 1)}
    return {"d2d_copies": stats["device_to_device"], "d2d_bytes": stats["bytes_d2d"],
            "kernels_cuda0": kernels[0], "kernels_cuda1": kernels[1]}


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(__doc__, argv, loops=3, repeats=5, quick=(1, 3),
                           out="data_parallel.json")
    rng = np.random.default_rng(0)
    x = tg.tensor(rng.standard_normal((BATCH, FEATURES)), dtype=tg.float32, device="cuda:0")
    y = tg.tensor(rng.standard_normal((BATCH, CLASSES)), dtype=tg.float32, device="cuda:0")
    steps = {name: make() for name, make in VARIANTS.items()}
    for step in steps.values():  # warm up: the simulator compiles nothing, but caches fill
        step(x, y).item()
    times: dict[str, list[float]] = {name: [] for name in steps}
    host: dict[str, list[float]] = {name: [] for name in steps}  # until the steps are queued
    for _ in range(args.repeats):
        for name, step in steps.items():  # in turns, so that load drifts hit every variant
            tg.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(args.loops):
                step(x, y)
            host[name].append((time.perf_counter() - start) / args.loops)
            tg.cuda.synchronize()
            times[name].append((time.perf_counter() - start) / args.loops)
    base = statistics.median(times["one device"])
    rows, results = [], {}
    for name, step in steps.items():
        counts = counts_per_step(step, x, y)
        median = statistics.median(times[name])
        results[name] = {"seconds_per_step": {"min": min(times[name]), "median": median,
                                              "max": max(times[name])},
                         "ratio_to_one_device": median / base,
                         "host_enqueue_seconds_per_step": {"min": min(host[name]),
                                                           "median": statistics.median(host[name])},
                         **counts}
        rows.append([name, min(times[name]) * 1e3, median * 1e3, max(times[name]) * 1e3,
                     median / base, counts["d2d_copies"], counts["d2d_bytes"],
                     counts["kernels_cuda0"], counts["kernels_cuda1"],
                     statistics.median(host[name]) * 1e3])
    print_table(f"one SGD step, MLP {FEATURES}-{HIDDEN}-{CLASSES}, batch {BATCH}, "
                "2 simulated cuda devices (numba CUDA simulator)",
                ["variant", "min ms", "median ms", "max ms", "x one device", "d2d copies",
                 "d2d bytes", "kernels cuda:0", "kernels cuda:1", "host enqueue ms (median)"],
                rows)
    head = header(None)
    head.update({"device": "numba CUDA simulator, 2 simulated devices",
                 "loops": args.loops, "repeats": args.repeats,
                 "model": f"MLP {FEATURES}-{HIDDEN}-{CLASSES}", "batch": BATCH})
    save({"header": head, "results": results}, Path(args.out))


if __name__ == "__main__":
    main()

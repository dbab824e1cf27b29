"""Host time per training step: eager launches against one CUDA graph replay.

    python benchmarks/cuda_graph_replay.py            # writes results/cuda_graph_replay.json
    python benchmarks/cuda_graph_replay.py --quick
    python benchmarks/cuda_graph_replay.py --out DIR  # (gpu_check.sh: results of a GPU run)

A small MLP's training step (forward, MSE loss, backward, SGD with momentum) on
the ``cuda`` device, issued two ways in turns, repeated:

* **eager**: ``zero_grad``, forward, backward, ``step``: the Python engine runs
  every op (dispatch, autograd, one enqueue per kernel);
* **replay**: ``static_x.copy_(...)`` is left out (both steps read the same static
  buffers) and ``g.replay()`` issues the captured launches.

Measured is the **host** time to issue one step, not the device's: the time from
the call until it returns. In numba's simulator a worker thread plays the device
and competes for the GIL, so while the host issues, the benchmark holds the
simulated device (the worker cannot start a kernel) and releases it afterwards;
on a GPU nothing is held. After each step the device is waited for, untimed.
The figure is eager / replay (how many times less host time a replay takes),
min / median / max over the repeats, with which replay backend ran.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
os.environ.setdefault("TEACHGRAD_CUDA", "sim")

from common import RESULTS, header, print_table, save  # noqa: E402

import teachgrad as tg  # noqa: E402

FEATURES, HIDDEN, OUTPUTS, BATCH = 8, 16, 4, 8


def build():
    """The model, its optimizer, the static batch, and the step as a function."""
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(FEATURES, HIDDEN), tg.nn.ReLU(),
                             tg.nn.Linear(HIDDEN, HIDDEN), tg.nn.ReLU(),
                             tg.nn.Linear(HIDDEN, OUTPUTS)).to("cuda")
    opt = tg.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    static_x = tg.randn(BATCH, FEATURES).to("cuda")
    static_y = tg.randn(BATCH, OUTPUTS).to("cuda")

    def step():
        loss = tg.nn.functional.mse_loss(model(static_x), static_y)
        loss.backward()
        opt.step()
        return loss

    return model, opt, step


def capture(opt, step) -> tg.cuda.CUDAGraph:
    """PyTorch's recipe: warm up on a side stream, then capture one step."""
    side = tg.cuda.Stream()
    side.wait_stream(tg.cuda.current_stream())
    with tg.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            step()
    tg.cuda.current_stream().wait_stream(side)
    g = tg.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with tg.cuda.graph(g):
        step()
    return g


def device_held():
    """The simulated device, held while the host issues (a GPU needs nothing held)."""
    if not tg.cuda.is_simulated():
        return contextlib.nullcontext()
    from teachgrad.kernels._simulator import DEVICE_LOCK

    return DEVICE_LOCK


def host_seconds(issue) -> float:
    """Seconds the host takes to issue one step; then the device is waited for, untimed."""
    with device_held():
        began = time.perf_counter()
        issue()
        seconds = time.perf_counter() - began
    tg.cuda.synchronize()
    return seconds


def run(repeats: int, steps: int) -> dict:
    model, opt, step = build()
    g = capture(opt, step)

    def eager():
        opt.zero_grad(set_to_none=True)
        step()

    rows = []
    for _ in range(repeats):  # the two in turns, so a busy moment hits both
        eager_s = min(host_seconds(eager) for _ in range(steps))
        replay_s = min(host_seconds(g.replay) for _ in range(steps))
        rows.append({"eager_ms": eager_s * 1e3, "replay_ms": replay_s * 1e3,
                     "ratio": eager_s / replay_s})
    ratios = [r["ratio"] for r in rows]
    return {
        "launches_per_step": len(g.launches),
        "replay_backend": g.backend,
        "device": tg.cuda.get_device_name(),
        "repeats": rows,
        "eager_ms_median": statistics.median(r["eager_ms"] for r in rows),
        "replay_ms_median": statistics.median(r["replay_ms"] for r in rows),
        "ratio": {"min": min(ratios), "median": statistics.median(ratios), "max": max(ratios)},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats of 2 steps")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON file")
    args = parser.parse_args(argv)
    repeats, steps = (3, 2) if args.quick else (9, 3)
    result = {"header": header(None), "benchmark": "cuda_graph_replay", **run(repeats, steps)}
    print_table(f"host ms per training step ({result['launches_per_step']} launches, "
                f"replay: {result['replay_backend']}, {result['device']})",
                ["repeat", "eager ms", "replay ms", "eager / replay"],
                [[i, f"{r['eager_ms']:.2f}", f"{r['replay_ms']:.3f}", f"{r['ratio']:.0f}x"]
                 for i, r in enumerate(result["repeats"])])
    r = result["ratio"]
    print(f"eager / replay: min {r['min']:.0f}x, median {r['median']:.0f}x, max {r['max']:.0f}x")
    save(result, args.out / "cuda_graph_replay.json")


if __name__ == "__main__":
    main()

"""What activation checkpointing buys and costs for a deep MLP's training step.

Peak device memory of one forward + backward (``tg.cuda.max_memory_allocated``,
counted by the caching allocator; launches blocking so a block is freed when the
program drops it), with no checkpointing and with ``checkpoint_sequential`` at a few
segment counts. The peak is a count, the same on every run, so it runs once, on
``cuda`` (numba's CUDA simulator here: a small size). The extra compute, a time, is
measured on ``cpu`` at a larger size, each variant in turns, repeated: min / median /
max and the ratio of medians against no checkpointing.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 PYTHONPATH=. \
        python benchmarks/checkpoint_memory.py [--repeats 7]
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time
import warnings

from common import RESULTS, header, save

import teachgrad as tg
from teachgrad.streams import blocking_launches
from teachgrad.utils.checkpoint import checkpoint_sequential

DEPTH = 16  # Linear + Tanh pairs
SEGMENTS = (None, 2, 4, 8)


def mlp(width: int, device: str) -> tg.nn.Sequential:
    tg.manual_seed(0)
    layers = []
    for _ in range(DEPTH):
        layers += [tg.nn.Linear(width, width), tg.nn.Tanh()]
    return tg.nn.Sequential(*layers).to(device)


def step(model, x, segments) -> None:
    out = model(x) if segments is None else checkpoint_sequential(model, segments, x,
                                                                  use_reentrant=False)
    out.sum().backward()


def peak_bytes(segments, width: int = 16, batch: int = 128) -> int:
    model, x = mlp(width, "cuda"), tg.randn(batch, width, device="cuda")
    with blocking_launches():
        gc.collect()
        tg.cuda.reset_peak_memory_stats()
        base = tg.cuda.memory_allocated()
        step(model, x, segments)
        return tg.cuda.max_memory_allocated() - base


def step_times(repeats: int, width: int = 256, batch: int = 512) -> dict:
    model, x = mlp(width, "cpu"), tg.randn(batch, width)
    times = {str(s): [] for s in SEGMENTS}
    for _ in range(repeats):
        for segments in SEGMENTS:  # in turns: every variant sees the same load
            start = time.perf_counter()
            step(model, x, segments)
            times[str(segments)].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    peaks = {str(s): peak_bytes(s) for s in SEGMENTS}
    times = step_times(args.repeats)
    base = statistics.median(times["None"])
    rows = []
    for s in SEGMENTS:
        t = times[str(s)]
        rows.append({"segments": s, "peak_bytes_cuda": peaks[str(s)],
                     "peak_ratio": peaks[str(s)] / peaks["None"],
                     "time_min_s": min(t), "time_median_s": statistics.median(t),
                     "time_max_s": max(t), "time_ratio": statistics.median(t) / base})
        print(f"segments={s}: peak {peaks[str(s)]} B ({peaks[str(s)] / peaks['None']:.2f}x), "
              f"step {min(t)*1e3:.1f}/{statistics.median(t)*1e3:.1f}/{max(t)*1e3:.1f} ms "
              f"({statistics.median(t) / base:.2f}x)")
    save({"header": header(None), "depth": DEPTH,
          "peak_size": "batch 128, width 16, cuda (simulator)",
          "time_size": "batch 512, width 256, cpu",
          "repeats": args.repeats, "rows": rows}, RESULTS / "checkpoint_memory.json")


if __name__ == "__main__":
    main()

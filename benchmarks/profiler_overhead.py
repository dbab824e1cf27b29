"""What the profiler costs a program that is not being profiled: nothing measurable.

The profiler reads the engine's seams (``Function.apply``'s observer, the backward
engine's node observer, the stream timeline). Off, each seam is one ``None`` check:
the observer check was there before the profiler (``tg.jit.trace`` uses it); the node
observer adds one local ``None`` check per backward node. This script times the same
workloads on this tree and on the commit before the profiler (``--base``, extracted with
``git archive`` into a temporary folder), each in its own process, taking turns, one
thread each, and reports min / median / max per step and the ratio of the medians.
Each step is timed in CPU seconds of its thread (``time.thread_time``), not wall time: on
a machine shared with other jobs, wall time mostly measures who else ran meanwhile.

* ``chain``: 300 elementwise ops on 16 numbers and their backward (300 backward nodes:
  where a per-node cost would show most);
* ``mlp``: one Adam training step of the MLP 784-256-10, batch 128 (``mlp_step.py``'s).

It also times the chain *with* a profile recording, to show what switching it on costs.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/profiler_overhead.py [--rounds 7] [--base 6620974]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BASE = "6620974"  # the last commit before teachgrad.profiler
THREADS = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                            "NUMBA_NUM_THREADS")}


# -- the worker: runs in a process whose teachgrad comes from the tree under test --------------

def chain_step(tg, x):
    y = x
    for i in range(100):
        y = (y * 1.001 + 0.5).tanh()
    y.sum().backward()


def make_workload(name: str):
    import numpy as np

    import teachgrad as tg

    tg.manual_seed(0)
    if name == "chain":
        x = tg.randn(16, requires_grad=True)
        return lambda: chain_step(tg, x)
    model = tg.nn.Sequential(tg.nn.Linear(784, 256), tg.nn.ReLU(), tg.nn.Linear(256, 10))
    opt = tg.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    xb = tg.tensor(rng.standard_normal((128, 784)).astype(np.float32))
    yb = tg.tensor(rng.integers(0, 10, 128))
    loss_fn = tg.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(xb), yb).backward()
        opt.step()

    return step


def worker(workload: str, steps: int, profiled: bool) -> None:
    import teachgrad

    step = make_workload(workload)
    for _ in range(3):
        step()  # warm up
    times = []
    for _ in range(steps):
        start = time.thread_time()
        if profiled:
            from teachgrad.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]):
                step()
        else:
            step()
        times.append(time.thread_time() - start)
    print(json.dumps({"teachgrad": teachgrad.__file__, "seconds": times}))


# -- the driver -----------------------------------------------------------------------------------

def extract(commit: str, folder: Path) -> Path:
    """The package as it was at ``commit`` (teachgrad/ only), under ``folder``."""
    archive = folder / "base.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), commit, "teachgrad"],
                   check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder / "tree", filter="data")
    return folder / "tree"


def run_worker(tree: Path, workload: str, steps: int, profiled: bool = False) -> list[float]:
    env = dict(os.environ, **THREADS, PYTHONPATH=str(tree), TEACHGRAD_CUDA="sim")
    out = subprocess.run([sys.executable, __file__, "--worker", workload, "--steps", str(steps)]
                         + (["--profiled"] if profiled else []),
                         env=env, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["teachgrad"].startswith(str(tree)), result["teachgrad"]  # the tree we meant
    return result["seconds"]


def summary(per_round: list[float]) -> dict:
    return {"min": min(per_round), "median": statistics.median(per_round), "max": max(per_round)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--profiled", action="store_true")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--base", default=BASE)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.steps, args.profiled)
        return
    results = {"base": args.base, "rounds": args.rounds, "workloads": {}}
    with tempfile.TemporaryDirectory() as folder:
        base_tree = extract(args.base, Path(folder))
        for workload, steps in (("chain", 60), ("mlp", 100)):
            medians = {"this tree": [], "before the profiler": [], "profiling on": []}
            for i in range(args.rounds):  # in turns: both see the same machine load
                order = [("this tree", ROOT), ("before the profiler", base_tree)]
                for name, tree in order if i % 2 == 0 else order[::-1]:  # (each goes first half the time)
                    medians[name].append(statistics.median(run_worker(tree, workload, steps)))
                if workload == "chain":
                    medians["profiling on"].append(
                        statistics.median(run_worker(ROOT, workload, steps, profiled=True)))
            rows = {k: summary(v) for k, v in medians.items() if v}
            ratios = [a / b for a, b in zip(medians["this tree"], medians["before the profiler"])]
            entry = {"steps_per_round": steps, "seconds_per_step": rows,
                     "ratio_this_over_before": summary(ratios),
                     "ratio_of_medians": rows["this tree"]["median"] / rows["before the profiler"]["median"]}
            if medians["profiling on"]:
                entry["ratio_profiling_on_over_off"] = (rows["profiling on"]["median"]
                                                        / rows["this tree"]["median"])
            results["workloads"][workload] = entry
            print(workload, json.dumps(entry, indent=1))
    results["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results["cpu_count"] = os.cpu_count()
    path = HERE / "results" / "profiler_overhead.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

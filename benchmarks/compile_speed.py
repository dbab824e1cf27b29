"""What tg.compile buys: fused elementwise chains and compiled MLPs, inference and training.

    python benchmarks/compile_speed.py            # full run
    python benchmarks/compile_speed.py --quick    # fewer repeats
    python benchmarks/compile_speed.py --runs-log results/compile_speed_runs.json
                                                  # also append the training rows to a log

1. **Fused chain** on 1e6 float32 elements, six operations with a transcendental:

       a = x * 2 + y;  b = tanh(a) * 0.5 - 1;  out = relu(b * a)

   timed as ``tg.compile`` (one generated ``@njit`` loop), eager teachgrad (numpy,
   one temporary array per operation) and eager PyTorch on the CPU.
   Targets: compiled at least 2x faster than eager teachgrad and 1.5x than PyTorch.
2. **Small MLP forward at batch 1** (32 -> 64 -> 64 -> 10, ReLU), under ``no_grad``:
   the arithmetic is tiny, so the time is the framework's per-operation cost.
   Target: compiled at least 2x faster than eager teachgrad.
3. **Training the chain**: forward and backward of the same chain on 1e5 float32
   elements that require grad (``out.backward(ones)``), compiled (a fused forward
   loop and a generated fused backward loop) against eager teachgrad.
   Target: compiled at least 1.5x faster.
4. **An MLP training step** (32 -> 64 -> 64 -> 10, ReLU, batch 64): forward through
   ``tg.compile(model)`` or the model itself, MSE loss, backward, SGD step.
   Target: compiled no slower than eager (ratio at least 1.0).

For the training cases each round times eager and compiled back to back, and the
ratio is taken round by round (eager / compiled of the same round): the min, median
and max of those ratios are reported beside the min, median and max times.

Everything runs on one thread (set below, before numpy and torch load), the
works take turns timing after timing, and the medians and minima are reported.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import json  # noqa: E402
import statistics  # noqa: E402

from common import header, import_torch, parse_arguments, print_table, save, seconds_per_call  # noqa: E402

import teachgrad as tg  # noqa: E402
from teachgrad.bench.harness import measure_in_turns  # noqa: E402

CHAIN = "a = x * 2 + y; b = tanh(a) * 0.5 - 1; relu(b * a)"
CHAIN_ELEMENTS = 1_000_000
MLP = (32, 64, 64, 10)
TRAIN_CHAIN_ELEMENTS = 100_000
TRAIN_MLP_BATCH = 64
TARGETS = {"chain_vs_eager": 2.0, "chain_vs_torch": 1.5, "mlp_vs_eager": 2.0,
           "train_chain_vs_eager": 1.5, "train_mlp_vs_eager": 1.0}


def chain(x, y, relu):
    a = x * 2.0 + y
    b = a.tanh() * 0.5 - 1.0
    return relu(b * a)


def chain_works(torch) -> dict:
    rng = np.random.default_rng(0)
    xs, ys = (rng.standard_normal(CHAIN_ELEMENTS).astype(np.float32) for _ in range(2))
    x, y = tg.tensor(xs), tg.tensor(ys)
    compiled = tg.compile(lambda x, y: chain(x, y, tg.relu))
    compiled(x, y)  # compile outside the timings
    np.testing.assert_allclose(compiled(x, y).numpy(), chain(x, y, tg.relu).numpy(), atol=2e-6)
    works = {"compiled": lambda: compiled(x, y), "eager": lambda: chain(x, y, tg.relu)}
    if torch is not None:
        tx, ty = torch.from_numpy(xs), torch.from_numpy(ys)
        works["torch"] = lambda: chain(tx, ty, torch.relu)
    return works


def mlp() -> tg.nn.Module:
    nn = tg.nn
    layers = []
    for i in range(len(MLP) - 1):
        layers += [nn.Linear(MLP[i], MLP[i + 1]), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def mlp_works() -> dict:
    model = mlp()
    x = tg.randn(1, MLP[0])
    compiled = tg.compile(model)
    with tg.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)

    def compiled_forward():
        with tg.no_grad():
            return compiled(x)

    def eager_forward():
        with tg.no_grad():
            return model(x)
    return {"compiled": compiled_forward, "eager": eager_forward}


def train_chain_works() -> dict:
    """Forward and backward of the chain, compiled and eager, on inputs that require grad."""
    rng = np.random.default_rng(1)
    x, y = (tg.tensor(rng.standard_normal(TRAIN_CHAIN_ELEMENTS).astype(np.float32), requires_grad=True)
            for _ in range(2))
    ones = tg.ones(TRAIN_CHAIN_ELEMENTS)
    compiled = tg.compile(lambda x, y: chain(x, y, tg.relu))

    def step(fn):
        def run():
            x.grad = y.grad = None
            fn(x, y).backward(ones)
            return x.grad
        return run
    eager_grad, compiled_grad = step(lambda x, y: chain(x, y, tg.relu))(), step(compiled)()
    np.testing.assert_allclose(compiled_grad.numpy(), eager_grad.numpy(), rtol=1e-5, atol=4e-6)
    return {"eager": step(lambda x, y: chain(x, y, tg.relu)), "compiled": step(compiled)}


def train_mlp_works() -> dict:
    """One SGD step of an MLP, its forward compiled or eager (the loss and update are eager)."""
    tg.manual_seed(0)
    model = mlp()
    optimizer = tg.optim.SGD(model.parameters(), lr=1e-3)
    x, target = tg.randn(TRAIN_MLP_BATCH, MLP[0]), tg.randn(TRAIN_MLP_BATCH, MLP[-1])
    compiled = tg.compile(model)

    def step(forward):
        def run():
            optimizer.zero_grad()
            loss = ((forward(x) - target) ** 2).mean()
            loss.backward()
            optimizer.step()
            return loss
        return run
    return {"eager": step(model), "compiled": step(compiled)}


def paired(works: dict, loops: int, repeats: int, target: float) -> dict:
    """Eager and compiled in turns; times (µs per call) and round-by-round ratios, min/median/max."""
    def batch(work):
        def run():
            for _ in range(loops):
                work()
        return run
    eager, compiled = measure_in_turns([batch(works["eager"]), batch(works["compiled"])],
                                       warmup=1, repeats=repeats)
    ratios = [e / c for e, c in zip(eager.times_s, compiled.times_s)]
    row = {}
    for name, timing in (("eager", eager), ("compiled", compiled)):
        us = [t / loops * 1e6 for t in timing.times_s]
        row.update({f"{name}_us_min": min(us), f"{name}_us_median": statistics.median(us),
                    f"{name}_us_max": max(us)})
    row.update(speedup_min=min(ratios), speedup_median=statistics.median(ratios),
               speedup_max=max(ratios),
               # fastest against fastest: the closest to what a quiet machine would show
               speedup_of_minima=row["eager_us_min"] / row["compiled_us_min"], target=target,
               target_met=statistics.median(ratios) >= target, rounds=len(ratios),
               calls_per_round=loops)
    return row


def summarise(times: dict, pairs: dict[str, tuple[str, str]]) -> dict:
    row = {f"{name}_us_{stat}": t[stat] * 1e6 for name, t in times.items() for stat in ("median", "min")}
    for key, (slow, fast) in pairs.items():
        if slow in times:
            row[f"speedup_{key}_median"] = times[slow]["median"] / times[fast]["median"]
            row[f"speedup_{key}_min"] = times[slow]["min"] / times[fast]["min"]
            row[f"target_{key}_met"] = row[f"speedup_{key}_median"] >= TARGETS[key]
    return row


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(__doc__, argv, loops=20, repeats=15, quick=(5, 5),
                           out="compile_speed.json", extra=lambda p: p.add_argument(
                               "--runs-log", default=None, help="a JSON list to append the training rows to"))
    torch = import_torch()
    if torch is not None:
        torch.set_num_threads(1)
    chain_times = seconds_per_call(chain_works(torch), args.loops, args.repeats)
    chain_row = summarise(chain_times, {"chain_vs_eager": ("eager", "compiled"),
                                        "chain_vs_torch": ("torch", "compiled")})
    mlp_times = seconds_per_call(mlp_works(), args.loops * 25, args.repeats)
    mlp_row = summarise(mlp_times, {"mlp_vs_eager": ("eager", "compiled")})
    training = {
        "chain": paired(train_chain_works(), args.loops * 2, args.repeats * 2,
                        TARGETS["train_chain_vs_eager"]),
        "mlp": paired(train_mlp_works(), args.loops * 5, args.repeats * 2, TARGETS["train_mlp_vs_eager"]),
    }
    rows = [[f"chain, {CHAIN_ELEMENTS:.0e} float32, µs", chain_row["compiled_us_median"],
             chain_row["eager_us_median"], chain_row.get("torch_us_median"),
             chain_row["speedup_chain_vs_eager_median"], chain_row.get("speedup_chain_vs_torch_median")],
            [f"MLP {MLP} batch 1, µs", mlp_row["compiled_us_median"], mlp_row["eager_us_median"],
             None, mlp_row["speedup_mlp_vs_eager_median"], None]]
    print_table("tg.compile, one thread, medians", ["case", "compiled", "eager tg", "torch",
                                                    "x vs eager", "x vs torch"], rows)
    print_table("training, one thread: µs per call (median) and eager/compiled per round",
                ["case", "compiled", "eager tg", "x min", "x median", "x max", "x of minima"],
                [[f"{case} forward+backward", r["compiled_us_median"], r["eager_us_median"],
                  r["speedup_min"], r["speedup_median"], r["speedup_max"], r["speedup_of_minima"]]
                 for case, r in (("chain 1e5 float32", training["chain"]),
                                 (f"MLP {MLP} batch {TRAIN_MLP_BATCH} SGD step", training["mlp"]))])
    result = {"benchmark": "compile_speed", "header": header(torch), "loops": args.loops,
              "repeats": args.repeats, "targets": TARGETS, "chain": CHAIN,
              "chain_elements": CHAIN_ELEMENTS, "chain_results": chain_row,
              "mlp_layers": list(MLP), "mlp_batch": 1, "mlp_results": mlp_row,
              "fused_kernel": "@njit(error_model='numpy'), rational float32 tanh (see NOTES.md)",
              "training_chain_elements": TRAIN_CHAIN_ELEMENTS, "training_mlp_batch": TRAIN_MLP_BATCH,
              "training_results": training,
              "fused_backward": "one generated loop per fused region (kernel.backward_source)"}
    save(result, Path(args.out))
    if args.runs_log:
        append_run(Path(args.runs_log), result)


def append_run(path: Path, result: dict) -> None:
    """Add this run's training rows and load averages to a log of runs (a JSON list)."""
    runs = json.loads(path.read_text()) if path.exists() else []
    runs.append({"created_utc": result["header"]["created_utc"],
                 "load_average_before": result["header"]["load_average_before"],
                 "load_average_after": result["header"]["load_average_after"],
                 "training_results": result["training_results"]})
    path.write_text(json.dumps(runs, indent=2) + "\n")
    print(f"appended to {path}")


if __name__ == "__main__":
    main()

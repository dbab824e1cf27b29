"""What tg.compile buys: a fused elementwise chain, and an overhead-bound MLP at batch 1.

    python benchmarks/compile_speed.py            # full run
    python benchmarks/compile_speed.py --quick    # fewer repeats

1. **Fused chain** on 1e6 float32 elements, six operations with a transcendental:

       a = x * 2 + y;  b = tanh(a) * 0.5 - 1;  out = relu(b * a)

   timed as ``tg.compile`` (one generated ``@njit`` loop), eager teachgrad (numpy,
   one temporary array per operation) and eager PyTorch on the CPU.
   Targets: compiled at least 2x faster than eager teachgrad and 1.5x than PyTorch.
2. **Small MLP forward at batch 1** (32 -> 64 -> 64 -> 10, ReLU), under ``no_grad``:
   the arithmetic is tiny, so the time is the framework's per-operation cost.
   Target: compiled at least 2x faster than eager teachgrad.

Everything runs on one thread (set below, before numpy and torch load), the
works take turns timing after timing, and the medians and minima are reported.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from common import header, import_torch, parse_arguments, print_table, save, seconds_per_call  # noqa: E402

import teachgrad as tg  # noqa: E402

CHAIN = "a = x * 2 + y; b = tanh(a) * 0.5 - 1; relu(b * a)"
CHAIN_ELEMENTS = 1_000_000
MLP = (32, 64, 64, 10)
TARGETS = {"chain_vs_eager": 2.0, "chain_vs_torch": 1.5, "mlp_vs_eager": 2.0}


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


def mlp_works() -> dict:
    nn = tg.nn
    layers = []
    for i in range(len(MLP) - 1):
        layers += [nn.Linear(MLP[i], MLP[i + 1]), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
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
                           out="compile_speed.json")
    torch = import_torch()
    if torch is not None:
        torch.set_num_threads(1)
    chain_times = seconds_per_call(chain_works(torch), args.loops, args.repeats)
    chain_row = summarise(chain_times, {"chain_vs_eager": ("eager", "compiled"),
                                        "chain_vs_torch": ("torch", "compiled")})
    mlp_times = seconds_per_call(mlp_works(), args.loops * 25, args.repeats)
    mlp_row = summarise(mlp_times, {"mlp_vs_eager": ("eager", "compiled")})
    rows = [[f"chain, {CHAIN_ELEMENTS:.0e} float32, µs", chain_row["compiled_us_median"],
             chain_row["eager_us_median"], chain_row.get("torch_us_median"),
             chain_row["speedup_chain_vs_eager_median"], chain_row.get("speedup_chain_vs_torch_median")],
            [f"MLP {MLP} batch 1, µs", mlp_row["compiled_us_median"], mlp_row["eager_us_median"],
             None, mlp_row["speedup_mlp_vs_eager_median"], None]]
    print_table("tg.compile, one thread, medians", ["case", "compiled", "eager tg", "torch",
                                                    "x vs eager", "x vs torch"], rows)
    result = {"benchmark": "compile_speed", "header": header(torch), "loops": args.loops,
              "repeats": args.repeats, "targets": TARGETS, "chain": CHAIN,
              "chain_elements": CHAIN_ELEMENTS, "chain_results": chain_row,
              "mlp_layers": list(MLP), "mlp_batch": 1, "mlp_results": mlp_row,
              "fused_kernel": "@njit(error_model='numpy'), rational float32 tanh (see NOTES.md)"}
    save(result, Path(args.out))


if __name__ == "__main__":
    main()

"""What a compiled function's guards cost per call: the small MLP at batch 1 under no_grad.

    python benchmarks/compile_guard_cost.py            # full run
    python benchmarks/compile_guard_cost.py --quick    # fewer repeats

Four works take turns: eager teachgrad; the compiled call (signature, guards, the
generated program); the compiled graph alone (the same program, no cache lookup or
guards); and the guard check alone (``GuardSet.holds()``). The difference between the
first two compiled rows is what looking up the cache and checking the guards adds.
One thread; medians and minima in microseconds.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

from pathlib import Path  # noqa: E402

from common import header, parse_arguments, print_table, save, seconds_per_call  # noqa: E402

import teachgrad as tg  # noqa: E402
from teachgrad import nn  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(__doc__, argv, loops=2000, repeats=15, quick=(500, 5),
                           out="compile_guard_cost.json")
    tg.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    compiled, one = tg.compile(mlp), tg.randn(1, 32)
    with tg.no_grad():
        compiled(one)
        entry = compiled.last
        works = {"eager": lambda: mlp(one), "compiled call": lambda: compiled(one),
                 "compiled graph alone": lambda: entry((one,)), "guards alone": entry.guards.holds}
        times = seconds_per_call(works, args.loops, args.repeats)
    rows = [[name, t["median"] * 1e6, t["min"] * 1e6] for name, t in times.items()]
    print_table(f"MLP 32-64-64-10 at batch 1, no_grad ({len(entry.guards)} guards), µs per call",
                ["work", "median", "min"], rows)
    save({"header": header(None), "guards": len(entry.guards), "loops": args.loops,
          "repeats": args.repeats, "microseconds": {n: {"median": t["median"] * 1e6, "min": t["min"] * 1e6}
                                                    for n, t in times.items()}}, Path(args.out))


if __name__ == "__main__":
    main()

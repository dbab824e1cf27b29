"""The numba CPU backend against the numpy one: exp and tanh, and the cost of the first operation.

    python benchmarks/numba_backend_speed.py
    python benchmarks/numba_backend_speed.py --quick

Two measurements, one thread each (``common.py`` sets the thread variables):

* ``exp`` and ``tanh`` through each backend's ``unary`` method, float32 and
  float64, 1e4 to 1e6 elements, the two backends taking turns; the ratio is
  numba time / numpy time (target: at most 1.5 from 1e4 elements).
* the first numba operation of a fresh Python process (numba's compiled loops
  already in its on-disk cache): ``import teachgrad`` apart, then
  ``set_cpu_backend("numba")`` plus ``(x * 2).tanh()`` on a 1000-element tensor,
  then a second, different operation (``x + x``), then how long after the switch
  numba computes (``wait=True``: the background load) and the first operation that
  numba itself then runs. Each run is a new process.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from common import header, parse_arguments, print_table, save, seconds_per_call  # (first)

import numpy as np  # noqa: E402

from teachgrad.backends import backend_by_name  # noqa: E402

SIZES = (10_000, 100_000, 1_000_000)
TARGET = 1.5
FIRST_OP = """
import json, time
t0 = time.perf_counter()
import teachgrad as tg
t1 = time.perf_counter()
tg.backends.set_cpu_backend("numba")
x = tg.ones(1000)
y = (x * 2).tanh()
t2 = time.perf_counter()
z = x + x
t3 = time.perf_counter()
tg.backends.set_cpu_backend("numba", wait=True)
t4 = time.perf_counter()
w = (x * 3).tanh() - x
t5 = time.perf_counter()
print(json.dumps({"import_teachgrad_s": t1 - t0, "first_op_s": t2 - t1, "second_op_s": t3 - t2,
                  "numba_computing_after_s": t4 - t1, "first_numba_op_s": t5 - t4}))
"""


def unary_rows(loops: int, repeats: int) -> list[dict]:
    backends = {name: backend_by_name(name) for name in ("numpy", "numba")}
    rows = []
    for dtype in (np.float32, np.float64):
        for size in SIZES:
            x = np.random.default_rng(0).standard_normal(size).astype(dtype)
            for op in ("exp", "tanh"):
                works = {name: (lambda b=b: b.unary(op, x)) for name, b in backends.items()}
                times = seconds_per_call(works, loops, repeats)
                row = {"op": op, "dtype": np.dtype(dtype).name, "elements": size}
                for stat in ("median", "min", "max"):
                    row[f"numpy_us_{stat}"] = times["numpy"][stat] * 1e6
                    row[f"numba_us_{stat}"] = times["numba"][stat] * 1e6
                    row[f"ratio_{stat}"] = times["numba"][stat] / times["numpy"][stat]
                row["target_met"] = row["ratio_median"] <= TARGET
                rows.append(row)
    return rows


def first_op_runs(runs: int) -> list[dict]:
    """Each run a new interpreter (numba's cache warm from the runs before)."""
    results = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", FIRST_OP], capture_output=True, text=True,
                              check=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


def main(argv: list[str] | None = None) -> dict:
    args = parse_arguments(__doc__, argv, loops=20, repeats=15, quick=(10, 5),
                           out="numba_backend_speed.json")
    run_header = header(None)
    rows = unary_rows(args.loops, args.repeats)
    print_table("exp and tanh, numba backend against numpy backend, microseconds (median)",
                ["op", "dtype", "elements", "numpy", "numba", "ratio", f"<= {TARGET}x", "ratio min",
                 "ratio max"],
                [[r["op"], r["dtype"], r["elements"], r["numpy_us_median"], r["numba_us_median"],
                  r["ratio_median"], r["target_met"], r["ratio_min"], r["ratio_max"]] for r in rows])
    first = first_op_runs(1 + max(3, args.repeats // 3))[1:]  # (the first run warms the cache)
    print_table("first numba operation in a fresh process, seconds",
                ["import teachgrad", "switch + first op", "second op", "numba computes after",
                 "first numba op"],
                [[r["import_teachgrad_s"], r["first_op_s"], r["second_op_s"],
                  r["numba_computing_after_s"], r["first_numba_op_s"]] for r in first])
    result = {"benchmark": "numba_backend_speed", "header": run_header, "loops": args.loops,
              "repeats": args.repeats, "target_ratio": TARGET, "unary": rows,
              "first_operation": first}
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()

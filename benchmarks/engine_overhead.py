"""Per-operation overhead of the engine: small forward + backward chains, teachgrad vs PyTorch.

    python benchmarks/engine_overhead.py            # sizes 1, 10, 100, 1000
    python benchmarks/engine_overhead.py --quick    # fewer repeats
    python benchmarks/engine_overhead.py --clock cpu   # the thread's CPU time (crowded machine)

On tiny tensors the arithmetic is nearly free, so the time is what the
framework itself costs: argument checks, making tensors, recording the graph,
running the backward engine. Three pieces of work are timed, each on both
libraries in turns (one thread each, same process):

* ``simple``: ``((x * w + b).tanh() * 2).sum().backward()``: 5 operations, no
  tensor reused, cheap backward formulas.
* ``realistic``: ``y = (y * w + 0.1).tanh() - y.sigmoid() * 0.5`` four times,
  then ``y.sum().backward()``, with both ``y`` and ``w`` requiring grad: 25
  operations, ``y`` and ``w`` reused (their gradients merge), ``tanh`` and
  ``sigmoid`` whose backward formulas are several operations each.
* ``fixed``: ``x.sum().backward()``: one operation and an almost empty
  backward, the cost every ``backward()`` pays whatever the graph.

Reported: microseconds per chain, and the per-operation cost of each chain
with the fixed cost taken out, ``(chain - fixed) / (operations - 1)``.
Targets: the realistic chain at most 1.0x PyTorch's time (the bar: 1.5x).

    python benchmarks/engine_overhead.py --numba-loaded

loads numba before timing, as any program has that has run a convolution, batch norm,
a large layer or the numba backend: the numpy backend then takes its compiled passes
for small arrays too (the sigmoid's, ``backends/sigmoid_loops.py``), which it does not
load numba for (half a second). Each results file says which it was (``numba_loaded``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

from common import (  # (first: it sets one thread per library before numpy loads)
    add_clock_option, compare, header, import_torch, parse_arguments, print_table, save,
    table_columns, table_row,
)

import numpy as np  # noqa: E402  (after common, which sets the thread variables)

SIZES = (1, 10, 100, 1000)
TARGET = 1.0
BAR = 1.5


def simple_step(x: Any, w: Any, b: Any) -> None:
    loss = ((x * w + b).tanh() * 2).sum()
    loss.backward()
    w.grad = None
    b.grad = None


def realistic_step(y0: Any, w: Any) -> None:
    y = y0
    for _ in range(4):
        y = (y * w + 0.1).tanh() - y.sigmoid() * 0.5
    y.sum().backward()
    y0.grad = None
    w.grad = None


def fixed_step(x: Any) -> None:
    x.sum().backward()
    x.grad = None


#: name -> (what it runs, operations per run, how many inputs, which of them require grad)
CHAINS: dict[str, tuple[Callable[..., None], int, tuple[bool, ...], str]] = {
    "simple": (simple_step, 5, (False, True, True),
               "((x * w + b).tanh() * 2).sum().backward(); w.grad = b.grad = None"),
    "realistic": (realistic_step, 25, (True, True),
                  "4 x [y = (y * w + 0.1).tanh() - y.sigmoid() * 0.5]; y.sum().backward(); "
                  "y0.grad = w.grad = None"),
    "fixed": (fixed_step, 1, (True,), "x.sum().backward(); x.grad = None"),
}


def work_for(lib: Any, chain: str, size: int) -> Callable[[], None]:
    """The chain on fresh float32 inputs of ``size`` elements (the same values for both)."""
    step, _, grads, _ = CHAINS[chain]
    rng = np.random.default_rng(0)
    inputs = [lib.tensor(rng.standard_normal(size).astype(np.float32), requires_grad=g)
              for g in grads]
    return lambda: step(*inputs)


def per_op(rows: dict[str, dict], chain: str, lib: str) -> float:
    """Microseconds per operation of ``chain`` beyond the fixed cost (medians)."""
    ops = CHAINS[chain][1]
    return (rows[chain][f"{lib}_us_median"] - rows["fixed"][f"{lib}_us_median"]) / (ops - 1)


def main(argv: list[str] | None = None) -> dict:
    def sizes_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
        parser.add_argument("--numba-loaded", action="store_true",
                            help="load numba before timing (see above)")
        add_clock_option(parser)

    args = parse_arguments(__doc__, argv, loops=100, repeats=25, quick=(30, 7),
                           out="engine_overhead.json", extra=sizes_option)
    if args.numba_loaded:
        import numba  # noqa: F401
    torch = import_torch()
    run_header = header(torch)  # (before the timings: it records the load at the start)
    results = []
    for size in args.sizes:
        rows = {chain: compare(lambda lib: work_for(lib, chain, size), torch, loops=args.loops,
                               repeats=args.repeats, scale=1e6, unit="us", target=TARGET,
                               clock=args.clock)
                for chain in CHAINS}
        for chain, row in rows.items():
            row["bar_met"] = None if row["ratio_median"] is None else row["ratio_median"] <= BAR
        entry: dict[str, Any] = {"elements": size, **{c: rows[c] for c in CHAINS}}
        if torch is not None:
            entry["per_op_us"] = {
                chain: {"teachgrad": per_op(rows, chain, "teachgrad"),
                        "torch": per_op(rows, chain, "torch")}
                for chain in ("simple", "realistic")}
        results.append(entry)

    table = []
    for entry in results:
        for chain in CHAINS:
            table.append([entry["elements"], chain, *table_row(entry[chain], "us")])
    print_table(f"microseconds of {args.clock} time per run of each chain, forward + "
                "backward (median of the timings; min in the last three columns)",
                ["elements", "chain", *table_columns(TARGET)], table)
    if torch is not None:
        print_table("fixed cost (x.sum().backward()) and per-operation cost beyond it, "
                    "microseconds (medians)",
                    ["elements", "fixed tg", "fixed torch", "simple/op tg", "simple/op torch",
                     "realistic/op tg", "realistic/op torch"],
                    [[e["elements"], e["fixed"]["teachgrad_us_median"],
                      e["fixed"]["torch_us_median"],
                      e["per_op_us"]["simple"]["teachgrad"], e["per_op_us"]["simple"]["torch"],
                      e["per_op_us"]["realistic"]["teachgrad"],
                      e["per_op_us"]["realistic"]["torch"]] for e in results])
    result = {"benchmark": "engine_overhead", "header": run_header,
              "chains": {name: {"code": code, "operations": ops}
                         for name, (_, ops, _, code) in CHAINS.items()},
              "loops": args.loops, "repeats": args.repeats, "clock": args.clock,
              "target_ratio": TARGET, "numba_loaded": "numba" in sys.modules,
              "bar_ratio": BAR, "results": results}
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()

"""Per-operation overhead of the engine: a small forward + backward chain, teachgrad vs PyTorch.

    python benchmarks/engine_overhead.py            # sizes 1, 10, 100, 1000
    python benchmarks/engine_overhead.py --quick    # fewer repeats

On tiny tensors the arithmetic is nearly free, so the time is what the
framework itself costs per operation: argument checks, making tensors,
recording the graph, and running the backward engine. The chain is

    loss = ((x * w + b).tanh() * 2).sum()      # 5 operations
    loss.backward()                              # 5 backward nodes, 2 leaves
    w.grad = None; b.grad = None

and the reported number is (forward + backward time) / 5, in microseconds,
next to PyTorch's for the same chain on the same tensors (CPU, same run).
Target: teachgrad at most 1.5x PyTorch's per-op overhead.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from common import (
    compare, header, import_torch, parse_arguments, print_table, save, table_columns, table_row,
)

CHAIN = "((x * w + b).tanh() * 2).sum(); backward(); w.grad = b.grad = None"
CHAIN_OPS = 5
SIZES = (1, 10, 100, 1000)
TARGET = 1.5


def chain_step(x: Any, w: Any, b: Any) -> None:
    """One forward + backward through the chain (the same code runs on both libraries)."""
    loss = ((x * w + b).tanh() * 2).sum()
    loss.backward()
    w.grad = None
    b.grad = None


def inputs(lib: Any, size: int, rng: np.random.Generator) -> tuple:
    x, w, b = (rng.standard_normal(size).astype(np.float32) for _ in range(3))
    return lib.tensor(x), lib.tensor(w, requires_grad=True), lib.tensor(b, requires_grad=True)


def chain_for(lib: Any, size: int) -> Any:
    x, w, b = inputs(lib, size, np.random.default_rng(0))
    return lambda: chain_step(x, w, b)


def main(argv: list[str] | None = None) -> dict:
    def sizes_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))

    args = parse_arguments(__doc__, argv, loops=200, repeats=15, quick=(50, 5),
                           out="engine_overhead.json", extra=sizes_option)
    torch = import_torch()
    rows = []
    for size in args.sizes:
        row = compare(lambda lib: chain_for(lib, size), torch, loops=args.loops, repeats=args.repeats,
                      scale=1e6 / CHAIN_OPS, unit="us_per_op", target=TARGET)
        rows.append({"elements": size, **row})

    print_table(
        f"per-op overhead of a {CHAIN_OPS}-op forward+backward chain, microseconds per op "
        "(median of the timings; min in the last three columns)",
        ["elements", *table_columns(TARGET)],
        [[row["elements"], *table_row(row, "us_per_op")] for row in rows],
    )
    result = {"benchmark": "engine_overhead", "header": header(torch), "chain": CHAIN,
              "ops_per_chain": CHAIN_OPS, "loops": args.loops, "repeats": args.repeats,
              "target_ratio": TARGET, "results": rows}
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()

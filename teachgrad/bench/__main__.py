"""``python -m teachgrad.bench``: run the benchmark suite and write a results file.

Examples::

    python -m teachgrad.bench --quick                      # well under a minute on a CPU
    python -m teachgrad.bench --ops matmul --sizes 512     # one size of one op
    python -m teachgrad.bench --out benchmarks/results     # where the JSON goes
    python -m teachgrad.bench --quick --include-simulator  # also run the cuda code paths
                                                           # in numba's simulator (tiny sizes,
                                                           # records marked simulated)
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from .schema import save
from .suite import BACKENDS, SUMMED_OPS, Plan, output_path, run


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m teachgrad.bench",
        description="Time elementwise add, sum and matmul on numpy, the numba CPU loops and "
                    "teachgrad's cuda kernels, against the machine's ceilings; write JSON.")
    parser.add_argument("--quick", action="store_true",
                        help="fewer sizes and repeats (well under a minute on a CPU)")
    parser.add_argument("--ops", nargs="+", choices=SUMMED_OPS, default=list(SUMMED_OPS),
                        help="operations to time (a copy, the bandwidth reference, comes with add and sum)")
    parser.add_argument("--sizes", nargs="+", type=int, default=None,
                        help="sizes for every chosen op: elements for add/sum, n for an n x n matmul")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS),
                        help="where to run (cuda: a real GPU, or the simulator with --include-simulator)")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed calls per case (default 10; 5 with --quick)")
    parser.add_argument("--include-simulator", action="store_true",
                        help="without a GPU, run the cuda cases in numba's CUDA simulator (code paths only: "
                             "the records are marked simulated and are never GPU speed)")
    parser.add_argument("--bare-only", action="store_true",
                        help="time only the bare loops, not also each op through its backend's method")
    parser.add_argument("--warm-compile", action="store_true",
                        help="report compile_s as the first call minus the median instead of "
                             "compiling each numba case again from an empty cache in a new process")
    parser.add_argument("--tag", default=None,
                        help="a word for the file name, e.g. --tag 1thread gives cpu-1thread-<date>.json")
    parser.add_argument("--out", default=None,
                        help="folder for the results file (default: benchmarks/results if it exists, else .)")
    args = parser.parse_args(argv)
    if args.sizes and min(args.sizes) < 1:
        parser.error(f"--sizes must be positive, got {args.sizes}")
    if args.repeats is not None and args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    return args


def main(argv: list[str] | None = None) -> Path:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    plan = Plan(ops=tuple(args.ops), backends=tuple(args.backends), dtype=args.dtype, quick=args.quick,
                sizes=tuple(args.sizes) if args.sizes else None, repeats=args.repeats,
                include_simulator=args.include_simulator, through_backend=not args.bare_only,
                cold_compile=not args.warm_compile)
    command = shlex.join(["python", "-m", "teachgrad.bench", *argv])
    results = run(plan, command)
    if args.out:
        folder = Path(args.out)
    else:  # the repository's results folder when run from its root
        folder = Path("benchmarks/results") if Path("benchmarks").is_dir() else Path(".")
    path = save(results, output_path(results, folder, args.tag))
    print(f"wrote {path} ({len(results.records)} records; {results.header.label})")
    for note in results.header.notes:
        print(f"note: {note}")
    return path


if __name__ == "__main__":
    main()

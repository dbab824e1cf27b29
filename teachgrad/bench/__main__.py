"""``python -m teachgrad.bench``: run the benchmark suite and write a results file.

Examples::

    python -m teachgrad.bench --quick                      # well under a minute on a CPU
    python -m teachgrad.bench --ops matmul --sizes 512     # one size of one op
    python -m teachgrad.bench --out benchmarks/results     # where the JSON goes
    python -m teachgrad.bench --quick --include-simulator  # also run the cuda code paths
                                                           # in numba's simulator (tiny sizes,
                                                           # records marked simulated)
    python -m teachgrad.bench --quick --no-ceilings        # skip the hardware ceilings

Before the CPU cases, the run measures the CPU's hardware ceilings (see
:mod:`teachgrad.bench.ceilings`): the memory bandwidth of a STREAM-style triad
on arrays several times the last-level cache (one thread, and all of numba's
threads), and the GFLOP/s of ``np.matmul`` in float32 and float64. Each CPU
record then carries its fraction of them (``hw_fraction``) next to its ratio
to numpy (``ratio_to_ceiling``).
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
                    "teachgrad's cuda kernels; write JSON. CPU records are compared with numpy "
                    "(ratio_to_ceiling) and with hardware ceilings measured in the same run "
                    "(hw_fraction): memory bandwidth from a STREAM-style triad a = b + s*c on "
                    "arrays larger than the last-level cache (one thread, and all numba threads), "
                    "and the BLAS peak, np.matmul's GFLOP/s in float32 and float64.")
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
    parser.add_argument("--no-ceilings", action="store_true",
                        help="skip the hardware ceilings (the triad's memory bandwidth and the BLAS "
                             "peak; they take a few seconds, most of it compiling the triad)")
    parser.add_argument("--triad-mib", type=float, default=None,
                        help="MiB per triad array (default: 4x the last-level cache and at least 32; "
                             "--quick: 2x and at least 16). Smaller arrays measure a cache, not DRAM")
    parser.add_argument("--blas-n", type=int, default=None,
                        help="side n of the BLAS peak's n x n matmul (default: 1024 to 2048, "
                             "the smallest where one call takes tens of ms)")
    parser.add_argument("--ceiling-repeats", type=int, default=None,
                        help="timed calls per hardware ceiling, the best is kept (default 10; 5 with --quick)")
    parser.add_argument("--tag", default=None,
                        help="a word for the file name, e.g. --tag 1thread gives cpu-1thread-<date>.json")
    parser.add_argument("--out", default=None,
                        help="folder for the results file (default: benchmarks/results if it exists, else .)")
    args = parser.parse_args(argv)
    if args.sizes and min(args.sizes) < 1:
        parser.error(f"--sizes must be positive, got {args.sizes}")
    if args.repeats is not None and args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.triad_mib is not None and not args.triad_mib > 0:  # (also catches nan)
        parser.error(f"--triad-mib must be a positive number of MiB, got {args.triad_mib}")
    if args.blas_n is not None and args.blas_n < 1:
        parser.error(f"--blas-n must be at least 1, got {args.blas_n}")
    if args.ceiling_repeats is not None and args.ceiling_repeats < 1:
        parser.error(f"--ceiling-repeats must be at least 1, got {args.ceiling_repeats}")
    if args.no_ceilings:
        given = [flag for flag, value in (("--triad-mib", args.triad_mib), ("--blas-n", args.blas_n),
                                          ("--ceiling-repeats", args.ceiling_repeats)) if value is not None]
        if given:
            parser.error(f"{', '.join(given)} set how the ceilings are measured; "
                         "they make no sense with --no-ceilings")
    return args


def main(argv: list[str] | None = None) -> Path:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    plan = Plan(ops=tuple(args.ops), backends=tuple(args.backends), dtype=args.dtype, quick=args.quick,
                sizes=tuple(args.sizes) if args.sizes else None, repeats=args.repeats,
                include_simulator=args.include_simulator, through_backend=not args.bare_only,
                cold_compile=not args.warm_compile, ceilings=not args.no_ceilings,
                triad_mib=args.triad_mib, blas_n=args.blas_n, ceiling_repeats=args.ceiling_repeats)
    command = shlex.join(["python", "-m", "teachgrad.bench", *argv])
    results = run(plan, command)
    if args.out:
        folder = Path(args.out)
    else:  # the repository's results folder when run from its root
        folder = Path("benchmarks/results") if Path("benchmarks").is_dir() else Path(".")
    path = save(results, output_path(results, folder, args.tag))
    print(f"wrote {path} ({len(results.records)} records; {results.header.label})")
    for ceiling in results.header.ceilings:
        threads = f"{ceiling.threads} thread(s)" if ceiling.threads else "threads unknown"
        print(f"ceiling: {ceiling.name} {ceiling.best:.2f} {ceiling.unit} (best of {ceiling.repeats}, "
              f"{threads})")
    for note in results.header.notes:
        print(f"note: {note}")
    return path


if __name__ == "__main__":
    main()

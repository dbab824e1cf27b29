"""Measured speed: a timing harness, the benchmark suite, and its results files.

Run the suite from a shell::

    python -m teachgrad.bench --quick            # CPU: numpy vs numba loops, < 1 minute
    python -m teachgrad.bench                    # everything this machine has (a GPU too)
    python -m teachgrad.bench --ops matmul --sizes 256 512
    python -m teachgrad.bench --quick --no-ceilings   # without the hardware ceilings

Each CPU record is compared twice: with numpy doing the same thing
(``ratio_to_ceiling``, "vs numpy") and with the hardware, measured at the
start of the same run (``hw_fraction``): the memory bandwidth of a
STREAM-style triad on arrays larger than the last-level cache, and the BLAS
peak of ``np.matmul`` (:mod:`teachgrad.bench.ceilings`; the results header's
``ceilings``).

or time anything from a notebook::

    from teachgrad.bench import measure
    timing = measure(lambda: a @ b)
    timing.median_s, timing.compile_s

Results files follow :mod:`teachgrad.bench.schema` and are read back with
:func:`load` (one file) or :func:`load_dir` (a folder such as
``benchmarks/results``); :func:`results_dir` finds that folder wherever a
notebook runs.
"""
from .harness import CudaEventTimer, HostTimer, Timing, measure, measure_in_turns
from .locate import results_dir, results_file
from .schema import SCHEMA_VERSION, Header, Record, Results, SchemaError, load, load_dir, save

__all__ = [
    "measure", "measure_in_turns", "Timing", "HostTimer", "CudaEventTimer",
    "SCHEMA_VERSION", "Header", "Record", "Results", "SchemaError", "load", "load_dir", "save",
    "results_dir", "results_file",
]

"""The benchmark suite: which operations at which sizes on which backends, run and recorded.

:func:`run` takes a :class:`Plan`, times every case (numpy and numba on the
CPU; teachgrad's kernels, a device copy and cuBLAS on a GPU), checks every
answer against a float64 reference, and returns
:class:`~teachgrad.bench.schema.Results` with each record's ratio to its
reference filled in (``ratio_to_ceiling``: vs numpy on the CPU). With
``Plan(ceilings=True)`` (the command line's default) it first measures the
CPU's hardware ceilings (:mod:`teachgrad.bench.ceilings`: a STREAM-style
triad and the BLAS peak), stores them in the header, and gives each CPU
record its fraction of them (``hw_fraction``).
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .. import _cuda_setup
from . import ceilings as hardware
from . import cpu, gpu
from .cases import (
    TOLERANCE, Case, cold_compile_s, make_inputs, reference, relative_error, traffic,
)
from .harness import Timing, measure_batched, measure_in_turns
from .schema import Record, Results, clean_number
from .system import blas_name, blas_threads, gpu_details, make_header, numba_threads

#: Sizes per operation: elements for add/sum (and their copy ceiling), the side n for matmul.
SIZES = {
    ("cpu", "full"): {"add": [2 ** k for k in range(10, 25, 2)], "matmul": [64, 128, 256, 512, 1024]},
    ("cpu", "quick"): {"add": [2 ** 10, 2 ** 14, 2 ** 18, 2 ** 20], "matmul": [64, 128, 256, 512]},
    # >= 256 MB per array at the top (2^26 and 2^28 float32) to measure DRAM, not cache
    ("cuda", "full"): {"add": [2 ** k for k in range(12, 29, 2)], "matmul": [256, 512, 1024, 2048, 4096]},
    ("cuda", "quick"): {"add": [2 ** 12, 2 ** 16, 2 ** 20, 2 ** 24], "matmul": [256, 512, 1024]},
    # the simulator runs one OS thread per CUDA thread: tiny sizes only
    ("sim", "full"): {"add": [64, 256], "matmul": [8, 16]},
    ("sim", "quick"): {"add": [64], "matmul": [8]},
}
#: Largest n for the naive matmul (one O(n^3) loop with cache misses: minutes beyond this).
NAIVE_MAX = {("cpu", "full"): 512, ("cpu", "quick"): 256}
SUMMED_OPS = ("add", "sum", "matmul")  # what --ops may name; "copy" comes with add and sum
BACKENDS = ("numpy", "numba", "cuda")


@dataclass
class Plan:
    """What to measure. ``sizes`` overrides the default sizes of every chosen op."""

    ops: tuple[str, ...] = SUMMED_OPS
    backends: tuple[str, ...] = BACKENDS
    dtype: str = "float32"
    quick: bool = False
    sizes: tuple[int, ...] | None = None
    repeats: int | None = None  # default: 10, or 5 with quick
    warmup: int = 2
    include_simulator: bool = False
    #: also time each CPU op through its backend's method (``backend.binary(...)``: what a
    #: tensor operation pays) next to the bare loop
    through_backend: bool = False
    #: time each numba case's first call again in a fresh process with an empty numba
    #: cache (``compile_s``: compiling from nothing), instead of first call minus median
    cold_compile: bool = False
    #: measure the CPU's hardware ceilings first (triad bandwidth, BLAS peak) and give each
    #: CPU record its fraction of them; the command line does unless ``--no-ceilings``
    ceilings: bool = False
    #: MiB per triad array (default: from the last-level cache, see ``ceilings.triad_elements``)
    triad_mib: float | None = None
    #: side of the BLAS peak's square matmul (default: chosen by timing, 1024 to 2048)
    blas_n: int | None = None
    #: timed calls per ceiling (default 10; 5 with quick)
    ceiling_repeats: int | None = None

    def __post_init__(self) -> None:
        bad_ops = [op for op in self.ops if op not in SUMMED_OPS]
        bad_backends = [b for b in self.backends if b not in BACKENDS]
        if bad_ops or bad_backends:
            raise ValueError(f"unknown ops {bad_ops} or backends {bad_backends}: "
                             f"ops are {', '.join(SUMMED_OPS)}; backends {', '.join(BACKENDS)}")
        if self.dtype not in TOLERANCE:
            raise ValueError(f"dtype {self.dtype!r}: choose float32 or float64")
        if self.triad_mib is not None and not self.triad_mib > 0:
            raise ValueError(f"triad_mib must be positive, got {self.triad_mib}")
        if self.blas_n is not None and self.blas_n < 1:
            raise ValueError(f"blas_n must be at least 1, got {self.blas_n}")
        if self.ceiling_repeats is not None and self.ceiling_repeats < 1:
            raise ValueError(f"ceiling_repeats must be at least 1, got {self.ceiling_repeats}")

    @property
    def speed(self) -> str:
        return "quick" if self.quick else "full"

    @property
    def budget_s(self) -> float:
        """Seconds of timed calls after which one case stops repeating."""
        return 0.25 if self.quick else 2.0

    def sizes_for(self, op: str, place: str) -> list[int]:
        if self.sizes:
            return list(self.sizes)
        table = SIZES[(place, self.speed)]
        return table["matmul" if op == "matmul" else "add"]

    def ops_to_run(self) -> list[str]:
        """The chosen ops, plus the copy ceiling when a bandwidth-bound op is chosen."""
        ops = list(self.ops)
        if "add" in ops or "sum" in ops:
            ops.append("copy")
        return ops


def cuda_place(plan: Plan) -> str | None:
    """``"cuda"`` on a real GPU, ``"sim"`` in the simulator when asked for, else None."""
    if "cuda" not in plan.backends or _cuda_setup.SETUP.mode == "none":
        return None
    if _cuda_setup.is_simulated():
        return "sim" if plan.include_simulator else None
    from numba import cuda

    return "cuda" if cuda.is_available() else None


def _cases_for(plan: Plan, op: str, size: int, place: str, inputs, vendor: str | None) -> list[Case]:
    if place == "cpu":
        cases = cpu.numpy_cases(op, size, inputs) if "numpy" in plan.backends else []
        if "numba" in plan.backends:
            kernels = tuple(k for k in cpu.NUMBA_MATMUL_KERNELS
                            if k != "naive" or size <= NAIVE_MAX.get(("cpu", plan.speed), size))
            cases += cpu.numba_cases(op, size, inputs, kernels)
        ceiling = next((c.key for c in cases if c.is_ceiling), None)
        for backend in ("numpy", "numba") if plan.through_backend else ():
            if backend in plan.backends and ceiling:
                case = cpu.backend_case(backend, op, size, inputs, ceiling)
                cases += [case] if case is not None else []
        return cases
    cases = gpu.cuda_cases(op, size, inputs, simulated=place == "sim", vendor=vendor)
    if op == "matmul" and vendor:
        cases.append(gpu.vendor_matmul_case(vendor, size, inputs))
    return cases


def measure_cases(cases: list[Case], plan: Plan,
                  on_error: Callable[[int, Exception], None]) -> list[Timing | None]:
    """Time the cases of one op and size: GPU cases in turns, CPU cases one after another.

    Taking turns (:func:`~teachgrad.bench.harness.measure_in_turns`) lets a
    machine that gets busier or quieter slow every case alike. On the CPU it
    backfires: numba's threads and OpenBLAS's keep spinning on the cores for a
    while after each call, so alternating between them makes each wait for the
    other (measured: 8.0 ms for a 512^3 numba + numpy pair that takes 5.7 ms
    apart). So CPU cases run all their calls in one block each, and a short call is
    timed in a loop of many (:func:`~teachgrad.bench.harness.measure_batched`).
    """
    simulated = any(case.simulated for case in cases)
    options = dict(warmup=0 if simulated else plan.warmup,
                   repeats=1 if simulated else (plan.repeats or (5 if plan.quick else 10)),
                   budget_s=plan.budget_s)
    if cases and cases[0].device == "cpu":
        return [measure_batched(case.work, on_error=lambda _, error, i=i: on_error(i, error),
                                **options)
                for i, case in enumerate(cases)]
    return measure_in_turns([case.work for case in cases], [case.make_timer() for case in cases],
                            first_call_timers=[case.make_first_call_timer() for case in cases],
                            on_error=on_error, **options)


def make_record(case: Case, timing: Timing, ref: np.ndarray, cold_compile: bool = False) -> Record:
    """A :class:`Record` from a case, its timing, and its answer checked against ``ref``.

    ``compile_s`` is the first call's time minus the median, or with ``cold_compile``,
    for a case that compiles, its first call in a fresh process with an empty cache.
    """
    nbytes, flops = traffic(case.op, case.size, case.dtype)
    compile_s = timing.compile_s
    if cold_compile and case.cold_start is not None:
        compile_s = cold_compile_s(case.cold_start)
    median = timing.median_s
    # a simulator time is Python threads at work: keep it, but derive no throughput from it
    speed_known = median > 0 and not case.simulated
    return Record(
        op=case.op, backend=case.backend, kernel=case.kernel, device=case.device,
        dtype=str(case.dtype), size=case.size, shape=case.shape,
        median_s=median, min_s=timing.min_s, repeats=timing.repeats, compile_s=compile_s,
        bytes=nbytes, flops=flops,
        gbps=clean_number(nbytes / median / 1e9) if case.op != "matmul" and speed_known else None,
        gflops=clean_number(flops / median / 1e9) if case.op == "matmul" and speed_known else None,
        ceiling=case.ceiling, is_ceiling=case.is_ceiling,
        ratio_to_ceiling=1.0 if case.is_ceiling and not case.simulated else None,
        timer=timing.timer, simulated=case.simulated,
        rel_error=clean_number(relative_error(case.output(), ref)), threads=case.threads,
    )


def attach_ratios(records: list[Record]) -> None:
    """Fill ``ratio_to_ceiling``: throughput over the reference's at the same size and dtype
    (on the CPU the reference is numpy: this is the "vs numpy" ratio).

    The hardware fractions are :func:`teachgrad.bench.ceilings.attach_hardware`'s."""
    ceilings = {(r.key, r.dtype, r.size): r for r in records if not r.simulated}
    for record in records:
        if record.simulated:
            record.ratio_to_ceiling = None  # simulator times are not speed: no ratio either
            continue
        ceiling = ceilings.get((record.ceiling, record.dtype, record.size))
        if ceiling and record.throughput and ceiling.throughput:
            record.ratio_to_ceiling = record.throughput / ceiling.throughput


def table_header(hardware: bool = True) -> str:
    """Column names over :func:`format_record`'s lines."""
    columns = f"{'op':6} {'where':6} {'kernel':22} {'size':>10}  {'median':>13}  {'throughput':>18}"
    return columns + (f"  {'fraction of hardware':36}" if hardware else "") + "  ratio"


def format_record(r: Record, hardware: bool = True) -> str:
    """One line of the table: time, throughput, with ``hardware`` the fraction of the hardware
    ceiling (CPU; "in cache" when the bytes fit in the last-level cache), and the ratio to
    the reference (``vs numpy`` on the CPU)."""
    unit = "GFLOP/s" if r.op == "matmul" else "GB/s"
    throughput = "-" if r.throughput is None else f"{r.throughput:9.2f} {unit}"
    fraction = ""
    if hardware:
        fraction = (f"  {r.hw_fraction:6.3f} of {r.hw_ceiling:16}" if r.hw_fraction is not None
                    else " " * 28)
        fraction += "  in cache" if r.in_cache else " " * 10
    if r.is_ceiling:
        ratio = "  (reference)" if r.device == "cpu" else "  (ceiling)"
    elif r.ratio_to_ceiling is not None:
        versus = "vs numpy" if r.device == "cpu" else "of"
        ratio = f"  {r.ratio_to_ceiling:6.3f} {versus} {r.ceiling}"
    else:
        ratio = ""
    flag = "  [simulated: not GPU speed]" if r.simulated else ""
    return (f"{r.op:6} {r.backend:6} {r.kernel:22} {r.size:>10}  {r.median_s * 1e3:10.4f} ms  "
            f"{throughput:>18}{fraction}{ratio}{flag}")


def measure_size(plan: Plan, op: str, size: int, where: str, vendor: str | None,
                 notes: list[str], log: Callable[[str], None]) -> list[Record]:
    """Every case of ``op`` at ``size`` on ``where`` ("cpu", "cuda" or "sim"), timed in turns."""
    inputs = make_inputs(op, size, np.dtype(plan.dtype))
    ref = reference(op, inputs)

    def failed(what: str, error: Exception) -> None:  # one broken case must not lose the whole run
        notes.append(f"{what} at {size} failed: {error!r}")
        log(f"FAILED {notes[-1]}")

    try:
        cases = _cases_for(plan, op, size, where, inputs, vendor)
    except Exception as error:  # e.g. out of GPU memory
        failed(f"setting up {op} on {where}", error)
        return []
    timings = measure_cases(cases, plan, lambda i, error: failed(cases[i].key, error))
    records = []
    for case, timing in zip(cases, timings):
        if timing is None:
            continue
        try:
            record = make_record(case, timing, ref, plan.cold_compile)
        except Exception as error:  # reading the answer back failed
            failed(case.key, error)
            continue
        if record.rel_error is None or record.rel_error > TOLERANCE[record.dtype]:
            notes.append(f"{record.key} at {size}: relative error {record.rel_error} "
                         f"over {TOLERANCE[record.dtype]}")
            log(f"WRONG  {notes[-1]}")
        log(f"  {record.key} at {size}: {record.median_s * 1e3:.4f} ms")
        records.append(record)
    return records


def run(plan: Plan, command: str, log: Callable[[str], None] = print) -> Results:
    """Measure everything ``plan`` names; never stops at one failing case (it is noted)."""
    place = cuda_place(plan)
    vendor = gpu.find_vendor() if place == "cuda" and "matmul" in plan.ops else None
    places = [p for p in ("cpu", place) if p and (p != "cpu" or {"numpy", "numba"} & set(plan.backends))]
    notes: list[str] = [_load_note("before")]
    found = measure_ceilings(plan, log) if plan.ceilings and "cpu" in places else None
    if found:
        notes += found.notes
        notes.append(f"hardware ceilings measured in {found.elapsed_s:.1f} s")
    records: list[Record] = []
    for op in plan.ops_to_run():
        for where in places:
            for size in plan.sizes_for(op, where):
                records += measure_size(plan, op, size, where, vendor, notes, log)
                _release_gpu_memory()
    notes.append(_load_note("after"))
    attach_ratios(records)
    if found:
        hardware.attach_hardware(records, found.ceilings, found.cache.llc_bytes)
        in_cache = sum(r.in_cache for r in records)
        if in_cache:
            notes.append(f"{in_cache} records fit in the {found.cache.llc_bytes / 2 ** 20:g} MiB last-level "
                         "cache (marked in_cache): their fraction of the DRAM triad can pass 1")
        log("\n".join(hardware.format_ceiling(c) for c in found.ceilings))
    log(table_header(hardware=bool(found)))
    log("\n".join(format_record(r, hardware=bool(found)) for r in records))
    simulated = place == "sim"
    gpu_info = {"gpu_name": "CUDA simulator"} if simulated else None
    if place == "cuda":
        try:
            gpu_info = gpu_details()
        except Exception as error:  # the measurements matter more than the version strings
            notes.append(f"could not read the GPU's details: {error!r}")
            gpu_info = {"gpu_name": "unknown GPU"}
    header = make_header(command, simulated=simulated, notes=notes, gpu=gpu_info,
                         vendor_matmul=gpu.vendor_description(vendor) if vendor else None,
                         ceilings=found.ceilings if found else None,
                         llc_bytes=found.cache.llc_bytes if found else None)
    return Results(header, records)


def measure_ceilings(plan: Plan, log: Callable[[str], None] = print) -> hardware.HardwareCeilings:
    """The CPU's hardware ceilings for ``plan``: the triad, numpy's copy, and the BLAS peak
    in float32 and float64 (see :mod:`teachgrad.bench.ceilings`)."""
    log("hardware ceilings (STREAM-style triad, BLAS peak):")
    return hardware.measure_all(plan.speed, numba_threads=numba_threads(), blas_threads=blas_threads(),
                                blas=blas_name(), array_mib=plan.triad_mib, blas_n=plan.blas_n,
                                repeats=plan.ceiling_repeats, log=log)


def _load_note(when: str) -> str:
    """The machine's load average: other programs competing for the CPU slow every timing."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return f"load average {when} the run: unknown"
    return f"load average {when} the run: {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def _release_gpu_memory() -> None:
    """Hand cached GPU memory back between sizes (CuPy's pool, PyTorch's cache)."""
    if "cupy" in sys.modules:
        sys.modules["cupy"].get_default_memory_pool().free_all_blocks()
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        sys.modules["torch"].cuda.empty_cache()


def results_filename(results: Results, tag: str | None = None) -> str:
    """``cpu-<date>.json``, ``gpu-<device>-<date>.json`` or ``sim-<date>.json`` (``tag`` before the date)."""
    header = results.header
    if header.simulated:
        kind = "sim"
    elif header.gpu_name and any(r.device == "cuda" for r in results.records):
        kind = "gpu-" + re.sub(r"[^a-z0-9]+", "-", header.gpu_name.lower()).strip("-")
    else:
        kind = "cpu"
    if tag:
        kind += "-" + re.sub(r"[^A-Za-z0-9_.]+", "-", tag).strip("-")
    return f"{kind}-{header.date}.json"


def output_path(results: Results, directory: str | Path, tag: str | None = None) -> Path:
    """Where to save: the default name in ``directory``, with the time added if it is taken."""
    path = Path(directory) / results_filename(results, tag)
    if path.exists():
        clock = results.header.created_utc[11:19].replace(":", "")
        path = path.with_name(f"{path.stem}-{clock}.json")
    return path

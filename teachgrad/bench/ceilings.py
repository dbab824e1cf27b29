"""The CPU's hardware ceilings: memory bandwidth (a STREAM-style triad) and the BLAS peak.

A CPU record is only "fast" next to what the machine can do, so the suite
measures two ceilings at the start of a run (``python -m teachgrad.bench``;
``--no-ceilings`` skips them) and stores them in the results header
(``header.ceilings``, a list of :class:`~teachgrad.bench.schema.Ceiling`):

**Memory bandwidth: the triad** ``a[i] = b[i] + s * c[i]`` (STREAM's "Triad"),
a numba ``@njit`` loop, on float64 arrays far larger than the last-level
cache (LLC), so every byte comes from DRAM. The LLC size is read from
``/sys/devices/system/cpu/cpu0/cache/index*/size`` (32 MiB assumed, and said
in a note, when that is missing). Each array holds ``max(4 x LLC, 32 MiB)``
(``--quick``: ``max(2 x LLC, 16 MiB)``; the three arrays together are still 6
times the LLC). It runs on one thread (``triad/1thread``) and, when numba has
more than one thread, as the ``prange`` build on all of them
(``triad/<n>threads``).

Bytes are counted as STREAM counts them: 3 arrays x 8 bytes per element (two
reads, one write). **Write-allocate traffic is not counted**: a cache loads
each line of ``a`` before writing it (unless the compiler uses streaming
stores, which numba's loop does not ask for), so the memory system moves up
to 4/3 of the counted bytes. numpy's copy (``np.copyto``) at the same size is
kept as a reference (``copy/numpy``; 2 arrays counted, 3 moved).

**Compute: the BLAS peak.** GFLOP/s of ``np.matmul`` (the BLAS numpy links,
e.g. OpenBLAS) in float32 and float64 (``matmul/float32``,
``matmul/float64``), ``2 n^3`` flops a call, on an ``n x n`` square chosen so
one call takes tens of milliseconds (n from 1024 to 2048, the smallest that
takes at least :data:`BLAS_TARGET_S`), at the thread count the BLAS uses.

Every ceiling is the **best** of its repeats (STREAM reports the best); the
median and the slowest are kept too, with the thread count, sizes, repeats
and the seconds it took to measure.

**Records against the ceilings** (:func:`attach_hardware`): each CPU record
of ``add``, ``sum`` or ``copy`` gets ``hw_fraction``, its GB/s over the
triad's at the same thread count (a one-thread loop against the one-thread
triad), and each ``matmul`` record its GFLOP/s over the BLAS peak of its
dtype. A record whose bytes fit in the LLC is marked ``in_cache``: it is
served from cache, not DRAM, and its fraction can pass 1.

No theoretical peak (clock x vector width x FMA units) is reported: the
number of FMA units per core is not something the OS exposes, and it is not
hard-coded here for any CPU model.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from numba import njit, prange

from .cases import traffic
from .harness import Timing, measure
from .schema import Ceiling, Record

MIB = 2 ** 20
#: Where Linux describes cpu0's caches, one ``index<N>`` folder per cache.
CACHE_ROOT = Path("/sys/devices/system/cpu/cpu0/cache")
#: The last-level cache assumed when the sysfs files are missing.
DEFAULT_LLC_BYTES = 32 * MIB
#: Triad array size: this many times the LLC, and at least the floor (full run / --quick).
LLC_MULTIPLE = {"full": 4, "quick": 2}
MIN_ARRAY_BYTES = {"full": 32 * MIB, "quick": 16 * MIB}
#: The triad's arrays together use at most this share of the memory the OS has free.
MEMORY_SHARE = 0.5
#: STREAM's scalar.
TRIAD_SCALAR = 3.0
#: Timed calls per ceiling (after one untimed warm-up call).
REPEATS = {"full": 10, "quick": 5}
#: Square matmul sides tried for the BLAS peak, and how long one call should take at least.
BLAS_SIZES = (1024, 1280, 1536, 1792, 2048)
BLAS_TARGET_S = {"full": 0.05, "quick": 0.02}
#: The ops whose speed is memory bandwidth (compared with the triad).
BANDWIDTH_OPS = ("add", "sum", "copy")


# -- the last-level cache --------------------------------------------------------------

_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)i?B?\s*$", re.IGNORECASE)


def parse_cache_size(text: str) -> int:
    """Bytes in a sysfs cache size: ``"32768K"``, ``"1M"``, ``"512"`` (bytes), ``"2G"``."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a cache size: {text!r}")
    number, unit = int(match.group(1)), match.group(2).upper()
    return number * {"": 1, "K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}[unit]


@dataclass
class CacheInfo:
    """The last-level cache: its size, its level, and where that came from."""

    llc_bytes: int
    level: int | None  #: 3 for an L3; None when assumed
    source: str  #: the sysfs file, or "assumed"
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        size = f"{self.llc_bytes / MIB:g} MiB"
        if self.level is None:
            return f"last-level cache: {size} (assumed)"
        return f"last-level cache: L{self.level}, {size} (from {self.source})"


def read_llc(root: str | Path = CACHE_ROOT) -> CacheInfo:
    """The largest data or unified cache of the highest level under ``root`` (sysfs).

    Instruction caches are passed over. Missing or unreadable files give
    :data:`DEFAULT_LLC_BYTES` and a note saying it was assumed.
    """
    root = Path(root)
    found: list[tuple[int, int, Path]] = []  # (level, bytes, file)
    notes: list[str] = []
    for folder in sorted(root.glob("index*")):
        try:
            kind = (folder / "type").read_text().strip() if (folder / "type").exists() else "Unified"
            if kind.lower() == "instruction":
                continue
            level = int((folder / "level").read_text().strip())
            size = parse_cache_size((folder / "size").read_text())
        except (OSError, ValueError) as error:
            notes.append(f"could not read the cache in {folder}: {error}")
            continue
        found.append((level, size, folder / "size"))
    if not found:
        notes.append(f"no cache sizes under {root}: assumed a {DEFAULT_LLC_BYTES // MIB} MiB "
                     "last-level cache")
        return CacheInfo(DEFAULT_LLC_BYTES, None, "assumed", notes)
    level, size, path = max(found)
    return CacheInfo(size, level, str(path), notes)


def available_memory(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """Bytes of memory the OS says are available (``MemAvailable``), or None."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return parse_cache_size(line.split(":", 1)[1].replace("kB", "K"))
    except (OSError, ValueError):
        pass
    return None


def triad_elements(llc_bytes: int, itemsize: int, speed: str = "full",
                   array_mib: float | None = None,
                   free_bytes: int | None = None) -> tuple[int, list[str]]:
    """Elements per triad array, and notes on the choice.

    By default each array holds ``LLC_MULTIPLE[speed]`` times the LLC and at
    least ``MIN_ARRAY_BYTES[speed]``; ``array_mib`` sets it instead. The three
    arrays never take more than :data:`MEMORY_SHARE` of ``free_bytes``.
    """
    notes = []
    if array_mib is not None:
        array_bytes = int(array_mib * MIB)
    else:
        array_bytes = max(LLC_MULTIPLE[speed] * llc_bytes, MIN_ARRAY_BYTES[speed])
    if free_bytes is not None and 3 * array_bytes > MEMORY_SHARE * free_bytes:
        array_bytes = int(MEMORY_SHARE * free_bytes / 3)
        notes.append(f"triad arrays cut to {array_bytes / MIB:.0f} MiB each: "
                     f"{free_bytes / MIB:.0f} MiB of memory available")
    elements = max(1, array_bytes // itemsize)
    total = 3 * elements * itemsize
    if total <= llc_bytes:
        notes.append(f"the three arrays ({total / MIB:g} MiB) fit in the {llc_bytes / MIB:g} MiB "
                     "last-level cache: a cache bandwidth, not DRAM")
    elif elements * itemsize < LLC_MULTIPLE["quick"] * llc_bytes:
        notes.append(f"each array ({elements * itemsize / MIB:g} MiB) is under twice the "
                     f"{llc_bytes / MIB:g} MiB last-level cache: partly served from cache")
    return elements, notes


def make_ceiling(name: str, op: str, kernel: str, dtype: str, threads: int | None, size: int,
                 timing: Timing, nbytes: int = 0, flops: int = 0, elapsed_s: float = 0.0,
                 notes: list[str] | None = None) -> Ceiling:
    """A :class:`Ceiling` from a timing: bytes (GB/s) or flops (GFLOP/s) per call over its times."""
    amount, unit = (flops, "GFLOP/s") if flops else (nbytes, "GB/s")
    fastest, typical, slowest = timing.min_s, timing.median_s, max(timing.times_s)
    return Ceiling(name=name, op=op, kernel=kernel, unit=unit, dtype=dtype, threads=threads,
                   size=size, bytes=nbytes, flops=flops, repeats=timing.repeats,
                   best=amount / fastest / 1e9, median=amount / typical / 1e9,
                   worst=amount / slowest / 1e9, min_s=fastest, median_s=typical, max_s=slowest,
                   elapsed_s=elapsed_s, notes=list(notes or []))


# -- the triad -------------------------------------------------------------------------

def _triad(a, b, c, s):
    for i in range(a.shape[0]):
        a[i] = b[i] + s * c[i]


def _triad_prange(a, b, c, s):
    for i in prange(a.shape[0]):  # each thread takes a share of the i's
        a[i] = b[i] + s * c[i]


#: ``a = b + s * c`` on one thread. No fastmath: ``s * c`` is rounded before the add,
#: exactly as numpy's ``b + s * c``. ``s`` should have the arrays' dtype.
triad_serial = njit(cache=True)(_triad)
#: The same loop built with ``parallel=True``: the iterations are shared over numba's threads.
triad_parallel = njit(parallel=True, cache=True)(_triad_prange)

WRITE_ALLOCATE_NOTE = ("bytes counted as STREAM does (triad: 3 arrays, 2 reads + 1 write; copy: "
                       "2 arrays); write-allocate traffic is not counted, so the memory moved is "
                       "up to 4/3 (triad) or 3/2 (copy) of that")


def measure_triad(elements: int, threads: int, repeats: int, dtype: str = "float64",
                  notes: list[str] | None = None) -> Ceiling:
    """The triad on ``elements``-long arrays: one thread, or the ``prange`` build on ``threads``."""
    started = time.perf_counter()
    dtype_ = np.dtype(dtype)
    a = np.zeros(elements, dtype=dtype_)  # written here, so every page is mapped before timing
    b = np.full(elements, 1.0, dtype=dtype_)
    c = np.full(elements, 2.0, dtype=dtype_)
    s = dtype_.type(TRIAD_SCALAR)
    kernel = triad_parallel if threads > 1 else triad_serial
    timing = measure(lambda: kernel(a, b, c, s), warmup=1, repeats=repeats, min_repeats=repeats)
    if not (a[0] == a[-1] == 1.0 + TRIAD_SCALAR * 2.0):
        raise RuntimeError(f"the triad wrote {a[0]} and {a[-1]}, not {1.0 + TRIAD_SCALAR * 2.0}")
    label = "1thread" if threads == 1 else f"{threads}threads"
    built = "numba njit loop" if threads == 1 else "numba njit(parallel=True) prange loop"
    return make_ceiling(f"triad/{label}", "triad", built, dtype_.name, threads, elements, timing,
                        nbytes=traffic("add", elements, dtype_)[0],  # (add's bytes: b + s*c)
                        elapsed_s=time.perf_counter() - started,
                        notes=[WRITE_ALLOCATE_NOTE, *(notes or [])])


def measure_copy(elements: int, repeats: int, dtype: str = "float64",
                 notes: list[str] | None = None) -> Ceiling:
    """numpy's copy (``np.copyto``, one thread) at the triad's size: a reference."""
    started = time.perf_counter()
    dtype_ = np.dtype(dtype)
    out = np.zeros(elements, dtype=dtype_)
    x = np.full(elements, 1.0, dtype=dtype_)
    timing = measure(lambda: np.copyto(out, x), warmup=1, repeats=repeats, min_repeats=repeats)
    return make_ceiling("copy/numpy", "copy", "np.copyto", dtype_.name, 1, elements, timing,
                        nbytes=traffic("copy", elements, dtype_)[0],
                        elapsed_s=time.perf_counter() - started,
                        notes=[WRITE_ALLOCATE_NOTE, *(notes or [])])


# -- the BLAS peak ---------------------------------------------------------------------

def choose_blas_n(probe_n: int, probe_s: float, target_s: float,
                  sizes: tuple[int, ...] = BLAS_SIZES) -> int:
    """The smallest of ``sizes`` where one call should take ``target_s`` (time grows as n^3),
    judging from one call of side ``probe_n`` that took ``probe_s``; the largest if none does."""
    for n in sizes:
        if probe_s * (n / probe_n) ** 3 >= target_s:
            return n
    return sizes[-1]


def measure_blas(dtype: str, repeats: int, n: int | None = None, speed: str = "full",
                 threads: int | None = None, blas: str | None = None) -> Ceiling:
    """``np.matmul``'s GFLOP/s on ``n x n`` squares (n chosen by timing one call when None)."""
    started = time.perf_counter()
    dtype_ = np.dtype(dtype)
    rng = np.random.default_rng(0)

    def operands(side: int):
        return (rng.standard_normal((side, side), dtype=dtype_),
                rng.standard_normal((side, side), dtype=dtype_), np.empty((side, side), dtype_))

    notes = []
    if n is None:
        probe = BLAS_SIZES[0]
        a, b, out = operands(probe)
        np.matmul(a, b, out=out)  # the BLAS starts its threads and sizes its buffers
        one = time.perf_counter()
        np.matmul(a, b, out=out)
        probe_s = time.perf_counter() - one
        n = choose_blas_n(probe, probe_s, BLAS_TARGET_S[speed])
        notes.append(f"n = {n}: one {probe}^3 call took {probe_s * 1e3:.1f} ms "
                     f"(wanted at least {BLAS_TARGET_S[speed] * 1e3:.0f} ms a call)")
        if n != probe:
            a, b, out = operands(n)
    else:
        a, b, out = operands(n)
    timing = measure(lambda: np.matmul(a, b, out=out), warmup=1, repeats=repeats, min_repeats=repeats)
    kernel = f"np.matmul ({blas})" if blas else "np.matmul"
    return make_ceiling(f"matmul/{dtype_.name}", "matmul", kernel, dtype_.name, threads, n, timing,
                        flops=traffic("matmul", n, dtype_)[1], elapsed_s=time.perf_counter() - started, notes=notes)


# -- all of them -----------------------------------------------------------------------

@dataclass
class HardwareCeilings:
    """What :func:`measure_all` found: the ceilings, the LLC, and notes (failures included)."""

    ceilings: list[Ceiling]
    cache: CacheInfo
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0


def measure_all(speed: str = "full", numba_threads: int = 1, blas_threads: int | None = None,
                blas: str | None = None, array_mib: float | None = None, blas_n: int | None = None,
                repeats: int | None = None, dtypes: tuple[str, ...] = ("float32", "float64"),
                cache_root: str | Path = CACHE_ROOT,
                log: Callable[[str], None] = print) -> HardwareCeilings:
    """Measure the triad (1 thread, and ``numba_threads`` if more), numpy's copy, and the
    BLAS peak per dtype. A ceiling that fails is left out and noted, never fatal."""
    started = time.perf_counter()
    cache = read_llc(cache_root)
    notes = [cache.describe(), *cache.notes]
    repeats = repeats or REPEATS[speed]
    elements, size_notes = triad_elements(cache.llc_bytes, 8, speed, array_mib, available_memory())
    found: list[Ceiling] = []

    def attempt(what: str, action: Callable[[], Ceiling]) -> None:
        log(f"  ceiling {what} ...")
        try:
            found.append(action())
        except Exception as error:  # e.g. out of memory: the run goes on without it
            notes.append(f"ceiling {what} failed: {error!r}")
            log(f"FAILED {notes[-1]}")

    triad_threads = [1] + ([numba_threads] if numba_threads > 1 else [])
    for threads in triad_threads:
        attempt(f"triad on {threads} thread(s), {elements} float64 x 3",
                lambda threads=threads: measure_triad(elements, threads, repeats, notes=size_notes))
    attempt("copy/numpy", lambda: measure_copy(elements, repeats, notes=size_notes))
    for dtype in dtypes:
        attempt(f"matmul/{dtype}", lambda dtype=dtype: measure_blas(
            dtype, repeats, blas_n, speed, threads=blas_threads, blas=blas))
    return HardwareCeilings(found, cache, notes, time.perf_counter() - started)


# -- records against them --------------------------------------------------------------

def attach_hardware(records: list[Record], ceilings: list[Ceiling], llc_bytes: int | None) -> None:
    """Fill each CPU record's ``hw_ceiling``, ``hw_fraction`` and ``in_cache``.

    ``add``/``sum``/``copy``: GB/s over the best triad on the record's thread
    count (a record with no thread count is taken as one thread); ``matmul``:
    GFLOP/s over the best ``np.matmul`` of the record's dtype. Records whose
    bytes fit in ``llc_bytes`` are ``in_cache`` and keep their fraction, which
    can exceed 1. GPU and simulated records are left alone.
    """
    triads = {c.threads: c for c in ceilings if c.op == "triad"}
    peaks = {c.dtype: c for c in ceilings if c.op == "matmul"}
    for record in records:
        if record.device != "cpu" or record.simulated:
            continue
        if record.op == "matmul":
            ceiling = peaks.get(record.dtype)
        elif record.op in BANDWIDTH_OPS:
            ceiling = triads.get(record.threads or 1)
            record.in_cache = llc_bytes is not None and record.bytes <= llc_bytes
        else:
            continue
        if ceiling is None or not ceiling.best or record.throughput is None:
            continue
        record.hw_ceiling = ceiling.name
        record.hw_fraction = record.throughput / ceiling.best


def format_ceiling(c: Ceiling) -> str:
    """One line of the ceilings table."""
    if c.op == "matmul":
        size = f"n = {c.size}"
    else:
        arrays = 3 if c.op == "triad" else 2
        size = f"{arrays} x {c.size} ({c.size * np.dtype(c.dtype).itemsize / MIB:.3g} MiB each)"
    threads = "? threads" if c.threads is None else f"{c.threads} thread{'s' if c.threads > 1 else ''}"
    return (f"{c.name:16} {c.dtype:8} {threads:10} {size:32} best {c.best:8.2f} {c.unit:7} "
            f"median {c.median:8.2f}  worst {c.worst:8.2f}  ({c.repeats} repeats, {c.elapsed_s:.1f} s)")


"""The benchmark results file: what one run measured, and on what.

``python -m teachgrad.bench`` writes one JSON file per run; the speed chart
(``teachgrad.widgets.SpeedChart``) and the chapters read them back with
:func:`load` / :func:`load_dir`. The file is a :class:`Results`::

    {"header":  {...one Header...},
     "records": [{...one Record...}, ...]}

**Header** -- the machine and the run: schema version, UTC date, the exact
command, CPU model, library versions, and for a GPU its name, driver and CUDA
versions. ``simulated`` is true when the ``cuda`` records came from numba's
CUDA simulator.

**Record** -- one operation at one size on one backend: the median and
minimum time over ``repeats`` timed calls, the first call's extra time
(``compile_s``: compiling and loading, timed apart from the runs), and the
throughput, in GB/s for memory-bound operations (``add``, ``sum``, ``copy``)
and GFLOP/s for ``matmul``, and the answer's relative error against a
float64 reference (a fast wrong kernel does not pass unnoticed).

**Two comparisons per record.**

* ``ceiling`` / ``ratio_to_ceiling`` -- a *reference* measured at the same
  size in the same run. On a GPU: ``add`` and ``sum`` against a
  device-to-device copy of the same size (GB/s over GB/s), ``matmul`` against
  the vendor's (cuBLAS through CuPy or PyTorch, float32 without TF32). On the
  CPU this is **vs numpy**: numpy doing the same operation at the same size
  (numpy's time over this time: 0.5 means half numpy's speed). Reference
  records carry ``is_ceiling = True`` and ratio 1.
* ``hw_ceiling`` / ``hw_fraction`` (CPU only, version 2) -- the fraction of
  the **hardware** the record reached: its GB/s over the best STREAM-style
  triad bandwidth at the same thread count (``add``, ``sum``, ``copy``), or
  its GFLOP/s over the measured BLAS matmul peak of its dtype (``matmul``).
  ``in_cache`` is true when the operation's bytes fit in the last-level
  cache; such a record can exceed the DRAM triad (fraction above 1).

**Hardware ceilings** (``header.ceilings``, version 2) -- what the
machine itself can do, measured at the start of the same run: the triad
``a = b + s*c`` on arrays several times the last-level cache, one thread and
(with more numba threads) all of them; numpy's copy at the same size as a
reference; and ``np.matmul``'s GFLOP/s in float32 and float64. Each is a
:class:`Ceiling`: best, median and worst of its repeats, thread count, sizes,
repeats and the seconds it took. ``header.llc_bytes`` is the last-level cache
size the array sizes were chosen from. See :mod:`teachgrad.bench.ceilings`.

**Simulator timings are not GPU speed.** The simulator runs each CUDA thread
as a Python thread; its records exist only to exercise the code paths and are
marked ``simulated = True``. :meth:`Results.select` leaves them out unless
asked; plots of GPU speed must never show them.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Bumped whenever a field changes meaning or is removed (adding one is compatible).
#: 2: the hardware ceilings (``Header.ceilings``, ``llc_bytes``; ``Record.threads``,
#: ``hw_ceiling``, ``hw_fraction``, ``in_cache``). Version 1 files load with those empty.
SCHEMA_VERSION = 2
#: Versions :func:`load` reads (older files get the defaults of the fields they lack).
READABLE_VERSIONS = (1, 2)


@dataclass
class Ceiling:
    """One hardware ceiling measured in the run (see :mod:`teachgrad.bench.ceilings`).

    Throughputs are in ``unit``: ``best`` is the fastest repeat (what STREAM
    reports, and what records are compared with), ``median`` and ``worst`` the
    typical and the slowest.
    """

    name: str  #: "triad/1thread", "triad/2threads", "copy/numpy", "matmul/float32", ...
    op: str  #: "triad", "copy" or "matmul"
    kernel: str  #: the code that ran, e.g. "numba njit loop", "np.matmul (scipy-openblas ...)"
    unit: str  #: "GB/s" or "GFLOP/s"
    dtype: str
    threads: int | None  #: threads that did the work (None: not known)
    size: int  #: elements per array (triad, copy) or the side n of an n x n matmul
    bytes: int  #: bytes counted per call (STREAM's way: no write-allocate traffic)
    flops: int  #: floating-point operations per call
    repeats: int
    best: float  #: per-call amount / fastest call, in ``unit``
    median: float
    worst: float
    min_s: float
    median_s: float
    max_s: float
    elapsed_s: float  #: wall time of measuring this ceiling: allocation, compiling, every call
    notes: list[str] = field(default_factory=list)

@dataclass
class Header:
    """Where and how a results file was made."""

    schema_version: int
    created_utc: str  #: ISO 8601 in UTC, e.g. "2026-05-20T21:50:03+00:00"
    command: str  #: the exact command line that produced the file
    simulated: bool  #: True when the cuda records ran in numba's CUDA simulator
    cpu_model: str  #: from /proc/cpuinfo ("model name"), or the platform's best guess
    cpu_count: int  #: logical CPUs the OS reports
    cpu_threads: int  #: threads numba's parallel loops used
    platform: str  #: e.g. "Linux-6.1-x86_64"
    python: str
    numpy: str
    numba: str
    numba_cuda: str | None = None
    blas: str | None = None  #: the BLAS behind numpy.matmul, e.g. "scipy-openblas 0.3.31"
    gpu_name: str | None = None  #: "NVIDIA H100 80GB HBM3", "CUDA simulator", or None
    gpu_driver: str | None = None  #: the NVIDIA driver, e.g. "580.159.04"
    cuda_driver_api: str | None = None  #: the CUDA version the driver supports, e.g. "13.0"
    cuda_runtime: str | None = None  #: the CUDA toolkit (NVRTC) version numba compiles kernels with
    compute_capability: str | None = None  #: e.g. "9.0"
    vendor_matmul: str | None = None  #: e.g. "cupy 14.2.0 (cuBLAS, float32 without TF32)"
    notes: list[str] = field(default_factory=list)
    #: the hardware ceilings measured in this run (empty: not measured, or a version 1 file)
    ceilings: list[Ceiling] = field(default_factory=list)
    llc_bytes: int | None = None  #: the last-level cache size the ceilings' array sizes came from

    def ceiling(self, name: str) -> Ceiling | None:
        """The hardware ceiling called ``name`` (e.g. ``"triad/1thread"``), or None."""
        return next((c for c in self.ceilings if c.name == name), None)

    @property
    def date(self) -> str:
        """The day of the run, ``YYYY-MM-DD``."""
        return self.created_utc[:10]

    @property
    def label(self) -> str:
        """A short caption for plots, e.g. ``"NVIDIA H100 80GB HBM3, 2026-05-20"``.

        A CPU run limited to fewer threads than the machine has says so:
        ``"AMD EPYC (1 thread), 2026-11-22"``.
        """
        if self.simulated:
            device = "CUDA simulator (not GPU speed)"
        elif self.gpu_name:
            device = self.gpu_name
        elif self.cpu_threads < self.cpu_count:  # a run limited to fewer cores says so
            device = f"{self.cpu_model} ({self.cpu_threads} thread{'s' if self.cpu_threads > 1 else ''})"
        else:
            device = self.cpu_model
        return f"{device}, {self.date}"


@dataclass
class Record:
    """One operation, one size, one backend: its timing and throughput."""

    op: str  #: "add", "sum", "matmul" or "copy"
    backend: str  #: "numpy", "numba", "cuda", "cupy" or "torch"
    kernel: str  #: which code: "np.add", "zip_loop", "naive", "tiled", "register", "memcpy", "cublas", ...
    device: str  #: "cpu" or "cuda"
    dtype: str  #: "float32" or "float64"
    size: int  #: elements (add, sum, copy) or the side n of an n x n x n matmul
    shape: list[list[int]]  #: the input shapes
    median_s: float  #: median of the timed calls, in seconds
    min_s: float
    repeats: int  #: timed calls (after the untimed warm-up)
    compile_s: float  #: numba: a first call compiled from an empty cache in a new process; else first call minus median
    bytes: int  #: the fewest bytes the operation must move (inputs read once, output written once)
    flops: int  #: floating-point operations (2*n^3 for matmul)
    gbps: float | None = None  #: bytes / median_s / 1e9 (memory-bound operations)
    gflops: float | None = None  #: flops / median_s / 1e9 (matmul)
    ceiling: str | None = None  #: the record this one is compared with, "op/backend/kernel"
    ratio_to_ceiling: float | None = None
    is_ceiling: bool = False
    timer: str = "perf_counter"  #: "perf_counter", "cuda_event", "torch_event" or "cupy_event"
    simulated: bool = False  #: True: ran in the CUDA simulator; the time says nothing about a GPU
    rel_error: float | None = None  #: |out - ref| / |ref| against a float64 reference
    threads: int | None = None  #: threads the code ran on (CPU; None: not known)
    hw_ceiling: str | None = None  #: name of the hardware :class:`Ceiling` compared with
    hw_fraction: float | None = None  #: throughput / that ceiling's best (CPU only)
    in_cache: bool = False  #: the bytes fit in the last-level cache (hw_fraction can pass 1)

    @property
    def key(self) -> str:
        """``"op/backend/kernel"``, the name other records use in ``ceiling``."""
        return f"{self.op}/{self.backend}/{self.kernel}"

    @property
    def throughput(self) -> float | None:
        """GFLOP/s for matmul, GB/s otherwise."""
        return self.gflops if self.op == "matmul" else self.gbps


@dataclass
class Results:
    """A whole results file: one header, many records."""

    header: Header
    records: list[Record] = field(default_factory=list)

    def select(self, op: str | None = None, backend: str | None = None, kernel: str | None = None,
               device: str | None = None, dtype: str | None = None,
               include_simulated: bool = False) -> list[Record]:
        """Records that match every given field, sorted by size. Simulated ones only if asked."""
        chosen = [
            r for r in self.records
            if (include_simulated or not r.simulated)
            and (op is None or r.op == op) and (backend is None or r.backend == backend)
            and (kernel is None or r.kernel == kernel) and (device is None or r.device == device)
            and (dtype is None or r.dtype == dtype)
        ]
        return sorted(chosen, key=lambda r: (r.op, r.backend, r.kernel, r.dtype, r.size))

    def series(self, include_simulated: bool = False) -> dict[str, list[Record]]:
        """Records grouped by ``"op/backend/kernel"`` (one line of a plot each), sorted by size."""
        groups: dict[str, list[Record]] = {}
        for record in self.select(include_simulated=include_simulated):
            groups.setdefault(record.key, []).append(record)
        return groups


class SchemaError(ValueError):
    """A results file that does not follow this schema."""


def to_dict(results: Results) -> dict[str, Any]:
    return {"header": dataclasses.asdict(results.header),
            "records": [dataclasses.asdict(r) for r in results.records]}


def from_dict(data: dict[str, Any], source: str = "results") -> Results:
    """Build :class:`Results` from parsed JSON, with errors that name the bad field."""
    if not isinstance(data, dict) or "header" not in data or "records" not in data:
        raise SchemaError(f"{source}: expected an object with 'header' and 'records'")
    version = data["header"].get("schema_version")
    if version not in READABLE_VERSIONS:
        readable = " or ".join(map(str, READABLE_VERSIONS))
        raise SchemaError(f"{source}: schema_version {version!r}, but this teachgrad reads "
                          f"version {readable}; re-run `python -m teachgrad.bench` to make a new file")
    values = dict(data["header"])
    ceilings = values.get("ceilings") or []
    if not isinstance(ceilings, list):
        raise SchemaError(f"{source}: header ceilings should be a list")
    values["ceilings"] = [_build(Ceiling, c, f"{source}: ceiling {i}") for i, c in enumerate(ceilings)]
    header = _build(Header, values, f"{source}: header")
    records = [_build(Record, r, f"{source}: record {i}") for i, r in enumerate(data["records"])]
    return Results(header, records)


def _build(cls, values: dict[str, Any], where: str):
    if not isinstance(values, dict):
        raise SchemaError(f"{where} should be an object")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    required = [name for name, f in fields.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = [name for name in required if name not in values]
    if missing:
        raise SchemaError(f"{where} lacks {', '.join(missing)}")
    # fields this version does not know (written by a newer, compatible one) are skipped
    return cls(**{k: v for k, v in values.items() if k in fields})


def save(results: Results, path: str | Path) -> Path:
    """Write ``results`` as JSON (creating the folder); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = to_dict(results)
    # one record per line: the file stays readable and diffs stay small
    header = json.dumps(data["header"], indent=2, allow_nan=False).replace("\n", "\n ")
    records = ",\n  ".join(json.dumps(r, allow_nan=False) for r in data["records"])
    path.write_text(f'{{\n "header": {header},\n "records": [\n  {records}\n ]\n}}\n')
    return path


def load(path: str | Path) -> Results:
    """Read one results file written by :func:`save`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise SchemaError(f"{path}: not valid JSON ({error})") from None
    return from_dict(data, str(path))


def load_dir(directory: str | Path) -> list[Results]:
    """Every suite results file in ``directory`` (``*.json``), oldest first.

    JSON files of another shape (no ``header`` and ``records``, e.g. the engine
    benchmarks' files) are passed over; a suite file that is broken raises.
    """
    found = []
    for path in sorted(Path(directory).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and "records" in data and "schema_version" in data.get("header", {}):
            found.append(from_dict(data, str(path)))
    return sorted(found, key=lambda r: r.header.created_utc)


def clean_number(x: float | None) -> float | None:
    """``None`` for a missing or non-finite number (JSON has no NaN), else ``x`` as a float."""
    if x is None or not math.isfinite(x):
        return None
    return float(x)


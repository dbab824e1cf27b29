"""teachgrad.bench.ceilings: the triad, the BLAS peak, the LLC, records against them.

Behaviour only: no test times real code or asserts a speed. Timings are faked
where the arithmetic on them is what is checked.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from teachgrad.bench import ceilings as hw
from teachgrad.bench import load, save
from teachgrad.bench.__main__ import main
from teachgrad.bench.cases import traffic
from teachgrad.bench.harness import Timing
from teachgrad.bench.schema import READABLE_VERSIONS, SCHEMA_VERSION, Ceiling, Record, Results
from teachgrad.bench.suite import Plan, format_record
from teachgrad.bench.system import make_header

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


# -- the triad kernel ----------------------------------------------------------------------

@pytest.mark.parametrize("kernel", [hw.triad_serial, hw.triad_parallel], ids=["njit", "prange"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 7, 1000, 4099])
def test_the_triad_computes_exactly_b_plus_s_times_c(kernel, dtype, n):
    rng = np.random.default_rng(n)
    b, c = (rng.standard_normal(n).astype(dtype) for _ in range(2))
    a = np.full(n, np.nan, dtype=dtype)
    s = np.dtype(dtype).type(hw.TRIAD_SCALAR)
    kernel(a, b, c, s)
    expected = b + s * c  # numpy, same dtype, s * c rounded before the add
    assert expected.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(a, expected)


# -- byte and flop accounting --------------------------------------------------------------

def test_bytes_and_flops_are_counted_as_stream_and_blas_benchmarks_count_them():
    # (the triad a = b + s*c moves what add moves: 2 reads + 1 write, no write-allocate)
    assert traffic("add", 1000, np.float64)[0] == 24_000
    assert traffic("add", 1000, np.float32)[0] == 12_000
    assert traffic("copy", 1000, np.float64)[0] == 16_000
    assert traffic("matmul", 1024, np.float32)[1] == 2 * 1024 ** 3


def test_a_fake_timing_gives_the_expected_gigabytes_per_second():
    timing = Timing(first_call_s=9.0, times_s=[0.4, 0.2, 0.1, 0.3, 0.2])
    c = hw.make_ceiling("triad/1thread", "triad", "numba njit loop", "float64", 1, 10 ** 8, timing,
                        nbytes=traffic("add", 10 ** 8, np.float64)[0], elapsed_s=2.5)
    # 2.4e9 bytes a call: best 0.1 s -> 24 GB/s, median 0.2 s -> 12, slowest 0.4 s -> 6
    assert (c.best, c.median, c.worst) == pytest.approx((24.0, 12.0, 6.0))
    assert (c.min_s, c.median_s, c.max_s, c.repeats) == (0.1, 0.2, 0.4, 5)
    assert c.unit == "GB/s" and c.flops == 0 and c.elapsed_s == 2.5


def test_a_fake_timing_gives_the_expected_gflops():
    timing = Timing(first_call_s=1.0, times_s=[0.02, 0.04, 0.025])
    c = hw.make_ceiling("matmul/float32", "matmul", "np.matmul", "float32", 2, 1000, timing,
                        flops=traffic("matmul", 1000, np.float32)[1])
    # 2e9 flops a call: best 0.02 s -> 100 GFLOP/s, median 0.025 s -> 80, slowest 0.04 s -> 50
    assert (c.best, c.median, c.worst) == pytest.approx((100.0, 80.0, 50.0))
    assert c.unit == "GFLOP/s" and c.threads == 2


def fake_measure(times):
    """A stand-in for harness.measure: runs the work once (so its check sees real output) and
    returns scripted times."""
    def measure(work, **options):
        work()
        return Timing(first_call_s=1.0, times_s=list(times))
    return measure


def test_measure_triad_and_copy_count_their_bytes(monkeypatch):
    monkeypatch.setattr(hw, "measure", fake_measure([2e-6, 1e-6, 4e-6]))
    triad = hw.measure_triad(1000, threads=1, repeats=3)
    assert triad.name == "triad/1thread" and triad.kernel == "numba njit loop"
    assert triad.bytes == 24_000 and triad.best == pytest.approx(24_000 / 1e-6 / 1e9)
    assert triad.worst == pytest.approx(6.0) and triad.size == 1000 and triad.dtype == "float64"
    assert any("write-allocate traffic is not counted" in n for n in triad.notes)
    parallel = hw.measure_triad(1000, threads=4, repeats=3)
    assert parallel.name == "triad/4threads" and "prange" in parallel.kernel and parallel.threads == 4
    copy = hw.measure_copy(1000, repeats=3)
    assert copy.name == "copy/numpy" and copy.bytes == 16_000 and copy.best == pytest.approx(16.0)


def test_measure_blas_counts_two_n_cubed_flops(monkeypatch):
    monkeypatch.setattr(hw, "measure", fake_measure([1e-3, 2e-3]))
    c = hw.measure_blas("float32", repeats=2, n=100, threads=1, blas="some BLAS 1.0")
    assert c.name == "matmul/float32" and c.kernel == "np.matmul (some BLAS 1.0)"
    assert c.flops == 2_000_000 and c.best == pytest.approx(2.0) and c.worst == pytest.approx(1.0)


def test_the_blas_size_is_the_smallest_whose_call_is_long_enough():
    assert hw.choose_blas_n(1024, 0.05, target_s=0.02) == 1024
    assert hw.choose_blas_n(1024, 0.01, target_s=0.02) == 1536  # 0.01 * 1.5^3 = 0.034
    assert hw.choose_blas_n(1024, 0.001, target_s=0.05) == 2048  # never enough: the largest


# -- the last-level cache ------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [("32768K", 32 * 2 ** 20), ("1M", 2 ** 20), ("512", 512),
                                            ("2G\n", 2 ** 31), ("48 KiB", 48 * 1024)])
def test_cache_sizes_as_sysfs_writes_them(text, expected):
    assert hw.parse_cache_size(text) == expected


def test_a_cache_size_that_is_not_one_is_an_error():
    with pytest.raises(ValueError, match="not a cache size: 'big'"):
        hw.parse_cache_size("big")


def fake_cache(root: Path, caches: dict[str, tuple[str, str, str]]) -> Path:
    for index, (level, kind, size) in caches.items():
        folder = root / index
        folder.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size)):
            if value is not None:
                (folder / name).write_text(value + "\n")
    return root


def test_the_llc_is_the_largest_data_or_unified_cache_of_the_highest_level(tmp_path):
    root = fake_cache(tmp_path, {"index0": ("1", "Data", "32K"), "index1": ("1", "Instruction", "32K"),
                                 "index2": ("2", "Unified", "1M"), "index3": ("3", "Unified", "32768K")})
    info = hw.read_llc(root)
    assert (info.llc_bytes, info.level, info.notes) == (32 * 2 ** 20, 3, [])
    assert info.source == str(root / "index3" / "size")
    assert info.describe() == f"last-level cache: L3, 32 MiB (from {root / 'index3' / 'size'})"


def test_an_instruction_cache_is_never_the_llc(tmp_path):
    root = fake_cache(tmp_path, {"index0": ("2", "Data", "1M"), "index1": ("3", "Instruction", "64M")})
    assert hw.read_llc(root).llc_bytes == 2 ** 20


def test_missing_cache_files_give_the_default_and_say_so(tmp_path):
    info = hw.read_llc(tmp_path / "no-such-folder")
    assert info.llc_bytes == hw.DEFAULT_LLC_BYTES and info.level is None
    assert info.notes == [f"no cache sizes under {tmp_path / 'no-such-folder'}: assumed a 32 MiB "
                          "last-level cache"]
    assert info.describe() == "last-level cache: 32 MiB (assumed)"


def test_an_unreadable_cache_is_noted_and_the_others_used(tmp_path):
    root = fake_cache(tmp_path, {"index0": ("2", "Unified", "1M"), "index1": ("3", "Unified", "lots")})
    info = hw.read_llc(root)
    assert info.llc_bytes == 2 ** 20 and info.level == 2
    assert len(info.notes) == 1 and "index1" in info.notes[0] and "not a cache size" in info.notes[0]
    only_broken = fake_cache(tmp_path / "b", {"index0": ("3", "Unified", None)})  # no size file
    info = hw.read_llc(only_broken)
    assert info.llc_bytes == hw.DEFAULT_LLC_BYTES and len(info.notes) == 2


def test_triad_arrays_are_several_times_the_llc_and_never_too_little():
    mib = hw.MIB
    assert hw.triad_elements(32 * mib, 8, "full") == (16 * mib, [])  # 4 x 32 MiB of float64
    assert hw.triad_elements(32 * mib, 8, "quick") == (8 * mib, [])  # 2 x 32 MiB
    assert hw.triad_elements(2 * mib, 8, "full")[0] * 8 == 32 * mib  # the floor
    assert hw.triad_elements(2 * mib, 8, "quick")[0] * 8 == 16 * mib
    elements, notes = hw.triad_elements(32 * mib, 8, "full", array_mib=1)
    assert elements * 8 == mib and "fit in the 32 MiB last-level cache" in notes[0]
    elements, notes = hw.triad_elements(32 * mib, 8, "full", array_mib=40)
    assert "partly served from cache" in notes[0]
    elements, notes = hw.triad_elements(32 * mib, 8, "full", free_bytes=300 * mib)
    assert elements * 8 * 3 <= 150 * mib and "300 MiB of memory available" in notes[0]


def test_available_memory_reads_meminfo(tmp_path):
    (tmp_path / "meminfo").write_text("MemTotal: 100 kB\nMemAvailable:    2048 kB\n")
    assert hw.available_memory(tmp_path / "meminfo") == 2 * 2 ** 20
    assert hw.available_memory(tmp_path / "missing") is None


# -- records against the ceilings ----------------------------------------------------------

def ceiling(name: str, best: float, threads: int | None = 1, dtype: str = "float64") -> Ceiling:
    op = name.split("/")[0]
    return Ceiling(name=name, op=op, kernel="fake", unit="GFLOP/s" if op == "matmul" else "GB/s",
                   dtype=dtype, threads=threads, size=1000, bytes=0, flops=0, repeats=3, best=best,
                   median=best / 2, worst=best / 4, min_s=1.0, median_s=2.0, max_s=4.0, elapsed_s=0.1)


def record(op="add", backend="numpy", kernel="np.add", size=10 ** 7, gbps=10.0, gflops=None,
           threads=1, dtype="float32", device="cpu", simulated=False) -> Record:
    from teachgrad.bench.cases import traffic

    nbytes, flops = traffic(op, size, np.dtype(dtype))
    return Record(op=op, backend=backend, kernel=kernel, device=device, dtype=dtype, size=size,
                  shape=[[size]], median_s=1e-3, min_s=1e-3, repeats=3, compile_s=0.0, bytes=nbytes,
                  flops=flops, gbps=gbps, gflops=gflops, threads=threads, simulated=simulated)


CEILINGS = [ceiling("triad/1thread", 20.0), ceiling("triad/2threads", 30.0, threads=2),
            ceiling("copy/numpy", 15.0), ceiling("matmul/float32", 100.0, 2, "float32"),
            ceiling("matmul/float64", 50.0, 2, "float64")]


def test_records_get_their_fraction_of_the_hardware_at_their_thread_count():
    numpy_add = record(gbps=10.0)
    numba_add = record(backend="numba", kernel="zip_loop", gbps=15.0, threads=2)
    backend_sum = record(op="sum", backend="numba", kernel="backend.reduce", gbps=5.0, threads=1)
    copy = record(op="copy", kernel="np.copyto", gbps=16.0)
    small = record(size=1024, gbps=40.0)  # 12 KiB: served from cache, faster than DRAM
    matmul32 = record(op="matmul", kernel="np.matmul", size=512, gbps=None, gflops=80.0, threads=2)
    matmul64 = record(op="matmul", backend="numba", kernel="blocked", size=512, gbps=None, gflops=10.0,
                      dtype="float64", threads=1)
    gpu = record(backend="cuda", kernel="grid_stride_zip", device="cuda", threads=None)
    simulated = record(backend="cuda", kernel="grid_stride_zip", device="cuda", simulated=True)
    no_triad = record(backend="numba", kernel="zip_loop", threads=8)  # no 8-thread triad measured
    records = [numpy_add, numba_add, backend_sum, copy, small, matmul32, matmul64, gpu, simulated, no_triad]
    hw.attach_hardware(records, CEILINGS, llc_bytes=32 * 2 ** 20)
    assert (numpy_add.hw_ceiling, numpy_add.hw_fraction) == ("triad/1thread", pytest.approx(0.5))
    assert (numba_add.hw_ceiling, numba_add.hw_fraction) == ("triad/2threads", pytest.approx(0.5))
    assert backend_sum.hw_fraction == pytest.approx(0.25)
    assert (copy.hw_ceiling, copy.hw_fraction) == ("triad/1thread", pytest.approx(0.8))
    assert small.hw_fraction == pytest.approx(2.0) and small.in_cache  # shown, and flagged
    assert not numpy_add.in_cache  # 120 MB: beyond the 32 MiB cache
    assert (matmul32.hw_ceiling, matmul32.hw_fraction) == ("matmul/float32", pytest.approx(0.8))
    assert (matmul64.hw_ceiling, matmul64.hw_fraction) == ("matmul/float64", pytest.approx(0.2))
    for untouched in (gpu, simulated, no_triad):
        assert untouched.hw_fraction is None and untouched.hw_ceiling is None
    assert not gpu.in_cache
    line = format_record(small)
    assert "2.000 of triad/1thread" in line and "in cache" in line


def test_without_ceilings_records_keep_no_fraction():
    r = record()
    hw.attach_hardware([r], [], llc_bytes=None)
    assert r.hw_fraction is None and not r.in_cache


def test_the_table_says_vs_numpy_for_the_cpu_ratio():
    r = dataclasses.replace(record(backend="numba", kernel="zip_loop"), ceiling="add/numpy/np.add",
                            ratio_to_ceiling=0.5)
    assert "0.500 vs numpy add/numpy/np.add" in format_record(r)
    line = hw.format_ceiling(ceiling("triad/2threads", 30.0, threads=2))
    assert "triad/2threads" in line and "2 threads" in line and "best    30.00 GB/s" in line


# -- the results file ----------------------------------------------------------------------

def results_with_ceilings() -> Results:
    r = record()
    hw.attach_hardware([r], CEILINGS, 32 * 2 ** 20)
    header = make_header("python -m teachgrad.bench", simulated=False, ceilings=CEILINGS,
                         llc_bytes=32 * 2 ** 20)
    return Results(header, [r])


def test_ceilings_survive_a_save_and_load_round_trip(tmp_path):
    results = results_with_ceilings()
    loaded = load(save(results, tmp_path / "run.json"))
    assert loaded == results and loaded.header.schema_version == SCHEMA_VERSION == 2
    assert loaded.header.ceiling("matmul/float64").best == 50.0
    assert loaded.header.ceiling("nothing") is None
    assert loaded.records[0].hw_ceiling == "triad/1thread"


def test_a_version_1_file_still_loads_with_no_ceilings(tmp_path):
    data = json.loads(save(results_with_ceilings(), tmp_path / "new.json").read_text())
    header = {k: v for k, v in data["header"].items() if k not in ("ceilings", "llc_bytes")}
    new_fields = ("threads", "hw_ceiling", "hw_fraction", "in_cache")
    records = [{k: v for k, v in r.items() if k not in new_fields} for r in data["records"]]
    (tmp_path / "old.json").write_text(json.dumps({"header": {**header, "schema_version": 1},
                                                   "records": records}))
    old = load(tmp_path / "old.json")
    assert old.header.schema_version == 1 and old.header.ceilings == [] and old.header.llc_bytes is None
    assert old.records[0].hw_fraction is None and old.records[0].threads is None
    assert not old.records[0].in_cache


@pytest.mark.parametrize("name", sorted(p.name for p in RESULTS.glob("cpu-*2026-11-2*.json")))
def test_the_committed_version_1_results_still_load(name):
    results = load(RESULTS / name)
    assert results.header.schema_version in READABLE_VERSIONS and results.records
    if results.header.schema_version == 1:
        assert results.header.ceilings == []
        assert all(r.hw_fraction is None for r in results.records)


def test_a_ceiling_missing_a_field_is_named(tmp_path):
    data = json.loads(save(results_with_ceilings(), tmp_path / "a.json").read_text())
    del data["header"]["ceilings"][1]["best"]
    (tmp_path / "a.json").write_text(json.dumps(data))
    from teachgrad.bench import SchemaError

    with pytest.raises(SchemaError, match="ceiling 1 lacks best"):
        load(tmp_path / "a.json")


# -- the command line ----------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--triad-mib", "0"], "--triad-mib must be a positive number of MiB, got 0.0"),
    (["--triad-mib", "nan"], "--triad-mib must be a positive number of MiB, got nan"),
    (["--blas-n", "0"], "--blas-n must be at least 1, got 0"),
    (["--ceiling-repeats", "-2"], "--ceiling-repeats must be at least 1, got -2"),
    (["--no-ceilings", "--blas-n", "64", "--triad-mib", "1"],
     "--triad-mib, --blas-n set how the ceilings are measured; they make no sense with --no-ceilings"),
])
def test_cli_rejects_bad_ceiling_options(argv, message, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert message in capsys.readouterr().err


def test_cli_help_says_what_the_ceilings_are(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "STREAM-style triad" in out and "BLAS peak" in out and "--no-ceilings" in out


def test_plan_rejects_bad_ceiling_settings():
    with pytest.raises(ValueError, match="triad_mib must be positive, got -1"):
        Plan(triad_mib=-1)
    with pytest.raises(ValueError, match="blas_n must be at least 1, got 0"):
        Plan(blas_n=0)
    with pytest.raises(ValueError, match="ceiling_repeats must be at least 1, got 0"):
        Plan(ceiling_repeats=0)
    assert not Plan().ceilings  # Python callers (the speed chart) ask for them


def test_cli_measures_small_ceilings_and_compares_every_cpu_record(tmp_path, capsys):
    from numba import get_num_threads

    path = main(["--quick", "--sizes", "64", "--ops", "add", "matmul", "--repeats", "2",
                 "--backends", "numpy", "numba", "--bare-only", "--warm-compile",
                 "--triad-mib", "0.25", "--blas-n", "32", "--ceiling-repeats", "2", "--out", str(tmp_path)])
    results = load(path)
    header = results.header
    threads = get_num_threads()
    expected = {"triad/1thread", "copy/numpy", "matmul/float32", "matmul/float64"}
    if threads > 1:
        expected.add(f"triad/{threads}threads")
    assert {c.name for c in header.ceilings} == expected
    for c in header.ceilings:
        assert c.repeats == 2 and c.best >= c.median >= c.worst > 0 and c.elapsed_s > 0
        assert c.size == (32 if c.op == "matmul" else 2 ** 18 // 8)  # 0.25 MiB of float64
    triad = header.ceiling("triad/1thread")
    assert triad.threads == 1 and any("fit in the" in n for n in triad.notes)  # said, not hidden
    assert header.llc_bytes and any(n.startswith("last-level cache") for n in header.notes)
    for r in results.records:
        assert r.threads is not None
        if r.op == "matmul":
            assert r.hw_ceiling == f"matmul/{r.dtype}"
        else:
            assert r.hw_ceiling.startswith("triad/") and r.in_cache  # 64 elements: in cache
        assert r.hw_fraction is not None and r.hw_fraction > 0 and math.isfinite(r.hw_fraction)
    numpy_add = results.select(op="add", backend="numpy")[0]
    assert numpy_add.threads == 1 and numpy_add.hw_ceiling == "triad/1thread"
    out = capsys.readouterr().out
    assert "ceiling: triad/1thread" in out and "in cache" in out

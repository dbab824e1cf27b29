"""teachgrad.bench: the timing harness, the results schema, and the CLI (no timing assertions)."""
from __future__ import annotations

import dataclasses
import json
from datetime import datetime

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.bench import (
    SCHEMA_VERSION, HostTimer, Record, Results, SchemaError, load, load_dir, measure, save,
)
from teachgrad.bench.harness import measure_in_turns
from teachgrad.bench.__main__ import main
from teachgrad.bench.suite import Plan, attach_ratios, results_filename
from teachgrad.bench.system import make_header


class FakeClock:
    """A clock that only moves when the work says so: every call takes a scripted time."""

    def __init__(self, durations: list[float]) -> None:
        self.now = 100.0
        self.durations = list(durations)
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def work(self) -> None:
        self.now += self.durations[self.calls]
        self.calls += 1


# -- the harness -----------------------------------------------------------------------

def test_measure_times_the_first_call_apart_skips_warmup_and_takes_the_median():
    clock = FakeClock([5.0, 7.0, 7.0, 3.0, 1.0, 2.0, 9.0, 1.0])  # first, 2 warm-ups, 5 timed
    timing = measure(clock.work, HostTimer(clock=clock), warmup=2, repeats=5,
                     first_call_timer=HostTimer(clock=clock))
    assert clock.calls == 8
    assert timing.first_call_s == 5.0
    assert timing.times_s == [3.0, 1.0, 2.0, 9.0, 1.0]  # the warm-up calls (7.0) are not in it
    assert (timing.median_s, timing.min_s, timing.repeats) == (2.0, 1.0, 5)
    assert timing.compile_s == 3.0  # the first call's extra time over a typical one
    assert timing.timer == "perf_counter"


def test_measure_stops_repeating_when_the_budget_is_spent():
    clock = FakeClock([1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    timing = measure(clock.work, HostTimer(clock=clock), warmup=1, repeats=5, min_repeats=2,
                     budget_s=3.0, first_call_timer=HostTimer(clock=clock))
    assert timing.times_s == [2.0, 2.0]  # 4 s > 3 s budget after the second: stop
    assert clock.calls == 4


def test_a_slow_case_gets_one_warm_up_call_not_all_of_them():
    clock = FakeClock([30.0, 5.0, 5.0, 5.0, 5.0, 5.0])  # compiling first, then 5 s a call
    timing = measure(clock.work, HostTimer(clock=clock), warmup=3, repeats=3, budget_s=10.0,
                     first_call_timer=HostTimer(clock=clock))
    assert clock.calls == 1 + 1 + 3  # first call, one warm-up (3 x 5 s > 10 s), three timed
    assert timing.times_s == [5.0, 5.0, 5.0] and timing.compile_s == 25.0


def test_a_first_call_faster_than_the_median_reports_no_compile_time():
    clock = FakeClock([1.0, 2.0, 2.0, 2.0])
    timing = measure(clock.work, HostTimer(clock=clock), warmup=0, repeats=3,
                     first_call_timer=HostTimer(clock=clock))
    assert timing.compile_s == 0.0


def test_host_timer_waits_for_queued_work_before_reading_the_clock():
    events = []
    timer = HostTimer(clock=lambda: len(events), sync=lambda: events.append("sync"))
    timer.start()
    events.append("work")
    assert timer.stop() == 2  # the sync after the work happened before the clock was read
    assert events == ["sync", "work", "sync"]


def test_measure_in_turns_alternates_the_works_and_drops_one_that_fails():
    calls = []
    clock = FakeClock([0.0] * 100)

    def work(name: str):
        def run() -> None:
            calls.append(name)
            clock.work()
            if name == "broken" and calls.count("broken") == 2:
                raise RuntimeError("launch failed")
        return run

    errors = []
    timings = measure_in_turns([work("a"), work("broken"), work("b")],
                               [HostTimer(clock=clock) for _ in range(3)], warmup=1, repeats=2,
                               first_call_timers=[HostTimer(clock=clock) for _ in range(3)],
                               on_error=lambda i, e: errors.append((i, str(e))))
    # first calls, then the warm-up round (where "broken" fails), then two timed rounds in turns
    assert calls == ["a", "broken", "b", "a", "broken", "b", "a", "b", "a", "b"]
    assert errors == [(1, "launch failed")]
    assert timings[1] is None and [t.repeats for t in (timings[0], timings[2])] == [2, 2]


def test_measure_rejects_nonsense_counts():
    with pytest.raises(ValueError,
                       match="need repeats >= 1, min_repeats >= 1 and warmup >= 0, got repeats=0"):
        measure(lambda: None, repeats=0)


# -- the schema ----------------------------------------------------------------------

def _record(**changes) -> Record:
    values = dict(op="add", backend="numba", kernel="zip_loop", device="cpu", dtype="float32",
                  size=1024, shape=[[1024], [1024]], median_s=2e-6, min_s=1.5e-6, repeats=10,
                  compile_s=0.8, bytes=12288, flops=1024, gbps=6.144, ceiling="add/numpy/np.add",
                  rel_error=0.0)
    values.update(changes)
    return Record(**values)


def _results(records: list[Record], simulated: bool = False) -> Results:
    return Results(make_header("python -m teachgrad.bench --quick", simulated=simulated), records)


def test_results_survive_a_save_and_load_round_trip(tmp_path):
    results = _results([_record(), _record(backend="numpy", kernel="np.add", gbps=12.288, ceiling=None,
                                           is_ceiling=True, ratio_to_ceiling=1.0)])
    path = save(results, tmp_path / "nested" / "run.json")
    assert load(path) == results
    assert [r.key for r in load_dir(tmp_path / "nested")[0].records] == ["add/numba/zip_loop",
                                                                          "add/numpy/np.add"]
    json.loads(path.read_text())  # plain JSON any tool can read


def test_load_dir_passes_over_other_json_files_but_not_broken_results(tmp_path):
    save(_results([_record()]), tmp_path / "cpu-run.json")
    (tmp_path / "engine_overhead.json").write_text(json.dumps({"rows": [1, 2]}))  # another tool's file
    assert [len(r.records) for r in load_dir(tmp_path)] == [1]
    (tmp_path / "old.json").write_text(json.dumps({"header": {"schema_version": 0}, "records": []}))
    with pytest.raises(SchemaError, match="old.json: schema_version 0"):
        load_dir(tmp_path)


def test_the_header_says_where_when_and_how():
    header = make_header("python -m teachgrad.bench --quick", simulated=False)
    assert header.schema_version == SCHEMA_VERSION and header.command == "python -m teachgrad.bench --quick"
    assert datetime.fromisoformat(header.created_utc).utcoffset().total_seconds() == 0
    assert header.cpu_model and header.cpu_count >= 1 and header.cpu_threads >= 1
    assert header.numpy == np.__version__ and header.python.count(".") == 2
    assert header.gpu_name is None and header.label.endswith(header.date)
    one_thread = dataclasses.replace(header, cpu_count=4, cpu_threads=1)
    assert one_thread.label == f"{header.cpu_model} (1 thread), {header.date}"
    all_threads = dataclasses.replace(header, cpu_count=4, cpu_threads=4)
    assert all_threads.label == f"{header.cpu_model}, {header.date}"


def test_load_names_what_is_wrong_with_a_file(tmp_path):
    good = json.loads(save(_results([_record()]), tmp_path / "a.json").read_text())
    old = dict(good, header=dict(good["header"], schema_version=0))
    (tmp_path / "old.json").write_text(json.dumps(old))
    with pytest.raises(SchemaError, match="schema_version 0, but this teachgrad reads version 1"):
        load(tmp_path / "old.json")
    broken = dict(good, records=[{k: v for k, v in good["records"][0].items() if k != "median_s"}])
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    with pytest.raises(SchemaError, match="record 0 lacks median_s"):
        load(tmp_path / "broken.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SchemaError, match="not valid JSON"):
        load(tmp_path / "bad.json")


def test_fields_from_a_newer_compatible_file_are_ignored(tmp_path):
    data = json.loads(save(_results([_record()]), tmp_path / "a.json").read_text())
    data["records"][0]["added_later"] = 1
    (tmp_path / "a.json").write_text(json.dumps(data))
    assert load(tmp_path / "a.json").records == [_record()]


def test_select_leaves_simulated_records_out_unless_asked():
    real, simulated = _record(), _record(backend="cuda", device="cuda", simulated=True, gbps=None)
    results = _results([simulated, real])
    assert results.select() == [real]
    assert results.select(include_simulated=True) == [simulated, real]
    assert results.select(backend="cuda") == []
    assert list(results.series()) == ["add/numba/zip_loop"]


def test_ratios_compare_throughput_with_the_ceiling_at_the_same_size():
    numpy_add = _record(backend="numpy", kernel="np.add", gbps=10.0, ceiling=None, is_ceiling=True,
                        ratio_to_ceiling=1.0)
    numba_add = _record(gbps=4.0)
    other_size = _record(size=2048, gbps=4.0)
    gpu_copy = _record(op="copy", backend="cuda", kernel="memcpy", device="cuda", simulated=True,
                       is_ceiling=True, ceiling=None, gbps=None)
    gpu_add = _record(backend="cuda", kernel="grid_stride_zip", device="cuda", simulated=True,
                      ceiling="copy/cuda/memcpy", gbps=None)
    records = [numpy_add, numba_add, other_size, gpu_copy, gpu_add]
    attach_ratios(records)
    assert numba_add.ratio_to_ceiling == pytest.approx(0.4)
    assert other_size.ratio_to_ceiling is None  # no ceiling measured at that size
    assert gpu_add.ratio_to_ceiling is None and gpu_copy.ratio_to_ceiling is None  # simulated
    assert numpy_add.ratio_to_ceiling == 1.0


def test_file_names_say_cpu_gpu_or_simulator():
    cpu_run = _results([_record()])
    assert results_filename(cpu_run) == f"cpu-{cpu_run.header.date}.json"
    sim_run = _results([_record(device="cuda", simulated=True)], simulated=True)
    assert results_filename(sim_run).startswith("sim-")
    gpu_run = _results([_record(device="cuda")])
    gpu_run.header = dataclasses.replace(gpu_run.header, gpu_name="NVIDIA H100 80GB HBM3")
    assert results_filename(gpu_run) == f"gpu-nvidia-h100-80gb-hbm3-{gpu_run.header.date}.json"
    assert results_filename(cpu_run, tag="1 thread") == f"cpu-1-thread-{cpu_run.header.date}.json"


def test_plan_rejects_unknown_ops_and_dtypes():
    with pytest.raises(ValueError, match=r"unknown ops \['conv'\]"):
        Plan(ops=("conv",))
    with pytest.raises(ValueError, match="dtype 'int8': choose float32 or float64"):
        Plan(dtype="int8")


# -- the command line --------------------------------------------------------------------

def test_cli_quick_on_tiny_sizes_writes_a_valid_file(tmp_path, capsys):
    path = main(["--quick", "--sizes", "64", "--repeats", "2", "--backends", "numpy", "numba",
                 "--warm-compile", "--no-ceilings", "--out", str(tmp_path)])
    results = load(path)
    assert path.parent == tmp_path and path.name.startswith("cpu-")
    assert results.header.command == ("python -m teachgrad.bench --quick --sizes 64 --repeats 2 "
                                      "--backends numpy numba --warm-compile --no-ceilings --out "
                                      + str(tmp_path))
    keys = {r.key for r in results.records}
    assert keys == {"add/numpy/np.add", "add/numba/zip_loop", "sum/numpy/np.sum",
                    "sum/numba/reduce_loop", "copy/numpy/np.copyto", "matmul/numpy/np.matmul",
                    "matmul/numba/naive", "matmul/numba/loop_order", "matmul/numba/blocked",
                    # the same ops through each backend's own method, as a tensor op pays them
                    *(f"{op}/{backend}/backend.{method}" for backend in ("numpy", "numba")
                      for op, method in (("add", "binary"), ("sum", "reduce"),
                                         ("matmul", "matmul")))}
    for r in results.records:
        assert r.size == 64 and r.repeats == 2 and not r.simulated and r.median_s > 0
        assert r.rel_error is not None and r.rel_error < 1e-4, r  # every answer was checked
        assert (r.gflops if r.op == "matmul" else r.gbps) > 0
        if r.backend == "numba":
            assert r.ceiling == f"{r.op}/numpy/np.{r.op}" and r.ratio_to_ceiling > 0
        assert r.hw_fraction is None and r.hw_ceiling is None  # --no-ceilings: nothing to compare with
    assert results.header.ceilings == [] and results.header.llc_bytes is None
    assert "wrote" in capsys.readouterr().out


def test_cli_runs_the_cuda_code_paths_and_flags_simulated_records(tmp_path):
    path = main(["--quick", "--sizes", "16", "--backends", "cuda", "--include-simulator",
                 "--out", str(tmp_path)])
    results = load(path)
    keys = {r.key for r in results.records}
    assert {"add/cuda/grid_stride_zip", "sum/cuda/tree_reduce_rows", "copy/cuda/memcpy",
            "matmul/cuda/naive", "matmul/cuda/tiled", "matmul/cuda/register"} <= keys
    assert all(r.rel_error is not None and r.rel_error < 1e-4 for r in results.records)
    if tg.cuda.is_simulated():
        assert results.header.simulated and results.header.gpu_name == "CUDA simulator"
        assert path.name.startswith("sim-")
        assert all(r.simulated and r.gbps is None and r.gflops is None and r.ratio_to_ceiling is None
                   for r in results.records)
        assert results.select() == []  # nothing a speed chart may show as GPU speed
    else:  # on a real GPU the same paths are timed with CUDA events
        assert not results.header.simulated and results.header.gpu_driver is not None
        assert all(not r.simulated and r.timer.endswith("_event") for r in results.records)


def test_without_include_simulator_the_simulator_is_left_out(tmp_path):
    path = main(["--quick", "--sizes", "16", "--ops", "add", "--backends", "numpy", "cuda",
                 "--no-ceilings", "--out", str(tmp_path)])
    results = load(path)
    if tg.cuda.is_simulated():
        assert {r.device for r in results.records} == {"cpu"} and not results.header.simulated
    else:
        assert "cuda" in {r.device for r in results.records}


def test_cli_rejects_bad_sizes(capsys):
    with pytest.raises(SystemExit):
        main(["--sizes", "0"])
    assert "--sizes must be positive, got [0]" in capsys.readouterr().err


def test_measure_batched_times_short_calls_in_loops_and_reports_per_call():
    from teachgrad.bench.harness import BATCH_S, measure_batched

    now = [0.0]
    calls = [0]

    def clock() -> float:
        return now[0]

    def work() -> None:  # a 1 µs call on a fake clock
        calls[0] += 1
        now[0] += 1e-6

    timing = measure_batched(work, warmup=2, repeats=3, clock=clock)
    per_batch = round(BATCH_S / 1e-6)
    assert timing.first_call_s == pytest.approx(1e-6)
    # the first call, two warm-ups, a warm-up batch, three timed batches
    assert calls[0] == 3 + 4 * per_batch
    assert timing.times_s == pytest.approx([1e-6] * 3)  # seconds per call, not per batch


def test_cold_compile_times_a_first_call_in_a_fresh_process_with_an_empty_cache():
    from teachgrad.bench import cpu
    from teachgrad.bench.cases import cold_compile_s, make_inputs, reference
    from teachgrad.bench.harness import Timing
    from teachgrad.bench.suite import make_record

    inputs = make_inputs("add", 64, np.dtype("float64"))
    (case,) = cpu.numba_cases("add", 64, inputs)
    case.work()
    warm = Timing(first_call_s=1e-6, times_s=[1e-6, 1e-6])  # as if the cache had answered
    record = make_record(case, warm, reference("add", inputs), cold_compile=True)
    assert record.compile_s > 0.05  # numba compiling from nothing: far more than a call
    assert make_record(case, warm, reference("add", inputs)).compile_s == 0.0
    with pytest.raises(RuntimeError, match="(?s)the cold-start run failed: .*ZeroDivisionError"):
        cold_compile_s("1 / 0")

"""SpeedChart: reads teachgrad.bench result files, finds the crossover and the launch
floor, labels recorded GPU timings with device and date, never plots simulator timings.

The result files here are small inputs written by the tests with the bench schema
(teachgrad.bench.schema); the assertions check what the chart computes from them.
"""
import numpy as np
import pytest

from teachgrad.bench.schema import SCHEMA_VERSION, Header, Record, Results, SchemaError, save
from teachgrad.widgets import SpeedChart
from teachgrad.widgets.speed_chart import Series, chart_data, find_crossover, load_sources, plot

SIZES = [10**k for k in range(2, 8)]


def header(date, gpu_name=None, simulated=False):
    return Header(schema_version=SCHEMA_VERSION, created_utc=f"{date}T10:00:00+00:00",
                  command="python -m teachgrad.bench", simulated=simulated,
                  cpu_model="x86 CPU", cpu_count=2, cpu_threads=2, platform="Linux",
                  python="3.11", numpy="2.2", numba="0.61", gpu_name=gpu_name)


def record(backend, kernel, device, n, seconds, simulated=False, is_ceiling=False):
    return Record(op="add", backend=backend, kernel=kernel, device=device, dtype="float32",
                  size=n, shape=[[n], [n]], median_s=seconds, min_s=seconds, repeats=10,
                  compile_s=0.0, bytes=12 * n, flops=n, gbps=12 * n / seconds / 1e9,
                  simulated=simulated, is_ceiling=is_ceiling)


def gpu_results(simulated=False):
    # GPU: flat at a 10 µs launch floor, then 1e-11 s per element
    name = "CUDA simulator" if simulated else "NVIDIA H100 80GB HBM3"
    return Results(header("2026-03-01", name, simulated),
                   [record("cuda", "grid_stride", "cuda", n, max(1e-5, n * 1e-11), simulated)
                    for n in SIZES])


def cpu_results(date="2026-03-02", sizes=SIZES):
    # CPU: 1 ns per element for numpy, 1.5 ns for numba's parallel loop
    return Results(header(date), [
        record(backend, kernel, "cpu", n, n * 1e-9 * factor, is_ceiling=backend == "numpy")
        for backend, kernel, factor in (("numpy", "np.add", 1.0), ("numba", "parallel_zip", 1.5))
        for n in sizes])


@pytest.fixture
def results_dir(tmp_path):
    save(gpu_results(), tmp_path / "gpu.json")
    save(cpu_results(), tmp_path / "cpu.json")
    save(gpu_results(simulated=True), tmp_path / "sim.json")
    return tmp_path


def test_crossover_and_launch_floor(results_dir):
    data = chart_data(load_sources(results_dir), "add")
    # at 10^4 both take 10 µs (a tie); from 10^5 on the GPU wins
    assert data.crossover == 10**5
    assert data.floor == pytest.approx(1e-5)
    assert {s.label for s in data.series} == {
        "cuda grid_stride — NVIDIA H100 80GB HBM3, 2026-03-01",
        "numpy np.add (ceiling) — x86 CPU, 2026-03-02",
        "numba parallel_zip — x86 CPU, 2026-03-02"}


def test_simulator_timings_are_left_out_and_said_so(results_dir):
    data = chart_data(load_sources(results_dir), "add")
    assert not any("simulator" in s.label.lower() for s in data.series)
    assert any("6 timing(s) from numba's CUDA simulator left out" in n for n in data.notes)
    only_sim = chart_data(load_sources([results_dir / "sim.json", results_dir / "cpu.json"]), "add")
    assert only_sim.crossover is None and only_sim.floor is None
    assert [s.backend for s in only_sim.series] == ["numba", "numpy", "model"]
    assert only_sim.series[-1].model  # the simulator never stands in for a GPU; a model does
    assert any("No GPU timings" in n for n in only_sim.notes)


def test_crossover_is_where_the_gpu_wins_for_good():
    def series(seconds, backend):
        sizes = np.array([1, 2, 3, 4])
        seconds = np.array(seconds, float)
        return Series("s", backend, False, sizes, seconds, seconds)

    cpu = [series([1, 1, 1, 1], "numpy")]
    assert find_crossover(cpu, [series([0.5, 2, 0.5, 0.5], "cuda")]) == 3  # an early win is not it
    assert find_crossover(cpu, [series([0.5, 0.5, 0.5, 2], "cuda")]) is None
    assert find_crossover(cpu, [series([0.5, 0.5, 0.5, 0.5], "cuda")]) == 1


def test_throughput_is_the_recorded_gb_per_s(results_dir):
    data = chart_data(load_sources(results_dir), "add", metric="throughput")
    assert data.unit == "GB/s"
    numpy_series = next(s for s in data.series if s.backend == "numpy")
    np.testing.assert_allclose(numpy_series.values, 12.0)  # 12 bytes per element, 1 ns each


def test_widget_redraws_and_renders_static_pictures(results_dir):
    chart = SpeedChart(results_dir)
    assert chart.op_picker.options == ("add",) and chart.dtype_picker.value == "float32"
    png = chart.to_png()
    assert png.startswith(b"\x89PNG") and chart.image.value == png
    svg = chart.to_svg()
    assert "<svg" in svg and "GPU wins from 100000" in svg and "launch-overhead floor" in svg
    chart.metric_picker.value = "throughput"
    assert chart.data.metric == "throughput" and chart.to_png() != png
    assert "simulator left out" in chart.notes.value
    assert "image/png" in chart._repr_mimebundle_()


def test_live_cpu_measurements_sit_beside_recorded_gpu(tmp_path):
    save(gpu_results(), tmp_path / "gpu.json")
    calls = []

    def measure(op, dtype):
        calls.append((op, dtype))
        return cpu_results(date="2099-01-01", sizes=SIZES[:3])

    chart = SpeedChart(tmp_path / "gpu.json", live_cpu=measure)
    recorded_gpu = "cuda grid_stride — NVIDIA H100 80GB HBM3, 2026-03-01"
    assert [s.label for s in chart.data.series] == [recorded_gpu]
    chart.measure_button.click()
    chart.measure_button.click()  # a second measurement replaces the first
    assert calls == [("add", "float32")] * 2
    assert sorted(s.label for s in chart.data.series) == [
        recorded_gpu,
        "numba parallel_zip — this machine, now", "numpy np.add (ceiling) — this machine, now"]
    assert chart.data.crossover is None  # the GPU is not faster at the live sizes


def test_bad_inputs_get_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="run `python -m teachgrad.bench`"):
        load_sources(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text('{"header": {"schema_version": 1}, "records": []}')
    with pytest.raises(SchemaError, match="header lacks created_utc"):
        load_sources(tmp_path / "bad.json")
    sources = load_sources(cpu_results())
    with pytest.raises(ValueError, match="no timings of 'matmul'.*they have: add"):
        chart_data(sources, "matmul")
    with pytest.raises(ValueError, match="metric must be 'time' or 'throughput'"):
        chart_data(sources, "add", metric="speed")


def test_measure_cpu_now_runs_the_bench_suite_on_this_machine(tmp_path):
    from teachgrad.bench.suite import Plan, run

    def small_run(op, dtype):  # the default, quick_cpu_results, at two small sizes
        plan = Plan(ops=(op,), backends=("numpy", "numba"), dtype=dtype, sizes=(1024, 4096),
                    repeats=3)
        return run(plan, command="test", log=lambda line: None)

    save(gpu_results(), tmp_path / "gpu.json")
    chart = SpeedChart(tmp_path / "gpu.json", live_cpu=small_run)
    chart.measure_button.click()
    live = [s for s in chart.data.series if s.label.endswith("this machine, now")]
    assert sorted(s.backend for s in live) == ["numba", "numpy"]
    for s in live:
        assert s.sizes.tolist() == [1024, 4096] and (s.seconds > 0).all()
    assert chart.measure_button.description == "measure CPU now"


def test_without_result_files_it_can_start_from_a_live_measurement():
    def measure(op, dtype):
        return cpu_results(date="2099-01-01", sizes=SIZES[:2])

    chart = SpeedChart([], op="add", live_cpu=measure, measure_now=True)
    assert sorted(s.backend for s in chart.data.series) == ["model", "numba", "numpy"]
    assert any("No GPU timings" in n for n in chart.data.notes)
    with pytest.raises(ValueError, match="no timings to plot: run `python -m teachgrad.bench`"):
        SpeedChart([])


def test_without_a_measured_gpu_a_dashed_model_from_published_figures_stands_in(results_dir):
    from teachgrad.widgets.gpu_model import H100_SXM5

    data = chart_data(load_sources(results_dir / "cpu.json"), "add")
    [line] = [s for s in data.series if s.model]
    assert line.label == "NVIDIA H100 SXM5: model from published figures, not measured"
    assert line.sizes.tolist() == SIZES and not line.gpu
    # launch latency + bytes / bandwidth: 12 bytes per float32 add element
    expected = 17.6e-6 + 12 * np.array(SIZES) / 3.35e12
    np.testing.assert_allclose(line.seconds, expected)
    assert data.crossover is None and data.floor is None  # nothing measured on a GPU
    # numpy: 1 ns per element; the model beats it once 1e-9 n > 17.6e-6 + 3.6e-12 n
    assert data.model_crossover == 10**5
    [note] = [n for n in data.notes if "dashed line is a model" in n]
    assert "not a measurement" in note and "from 100,000 on" in note
    for source in ("NVIDIA H100 Tensor Core GPU datasheet", "NVIDIA/numba-cuda pull request 288",
                   "PCIe Gen5 x16"):
        assert source in note
    fig = plot(data)
    [drawn] = [l for l in fig.axes[0].get_lines() if l.get_label() == line.label]
    assert drawn.get_linestyle() == "--" and drawn.get_marker() in ("None", None, "")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "model (not measured): GPU would win from 100000" in texts
    # the model's own arithmetic, with the data starting on the host
    assert H100_SXM5.seconds("add", 1000, data_on_host=True) == pytest.approx(
        17.6e-6 + 12_000 / 3.35e12 + 12_000 / 64e9)
    assert H100_SXM5.seconds("matmul", 4096) == pytest.approx(17.6e-6 + 2 * 4096 ** 3 / 67e12)
    with pytest.raises(ValueError, match="no model for 'softmax'"):
        H100_SXM5.seconds("softmax", 10)


def test_a_recorded_gpu_replaces_the_model(results_dir):
    data = chart_data(load_sources([results_dir / "cpu.json", results_dir / "gpu.json"]), "add")
    assert not any(s.model for s in data.series) and data.model_crossover is None
    assert data.crossover == 10**5
    throughput = chart_data(load_sources(results_dir / "cpu.json"), "add", metric="throughput")
    [line] = [s for s in throughput.series if s.model]
    np.testing.assert_allclose(line.values, 12 * np.array(SIZES) / line.seconds / 1e9)

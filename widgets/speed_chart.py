"""SpeedChart: measured time (or throughput) against problem size, CPU against GPU.

It plots result files written by ``python -m teachgrad.bench`` (read with
:mod:`teachgrad.bench.schema`) and, optionally, a fresh measurement of the
CPU backends on this machine. On log-log axes it marks:

* the **crossover**: the smallest size from which teachgrad's best GPU kernel
  beats every CPU backend, at that size and all larger ones;
* the **launch-overhead floor**: the GPU kernels' fastest time at any size.
  A kernel cannot finish faster than it takes to start one, so the GPU curve
  lies flat on this line until there is enough work to hide the launch.

Every curve is labelled with the device and date it was measured on (or "this
machine, now"), so recorded GPU results can sit beside live CPU timings.
When no GPU timings of the op were loaded, a **modelled** GPU line stands in
(:mod:`.gpu_model`): computed from a named GPU's published figures, drawn
dashed, labelled "model from published figures, not measured", with its
sources in the notes, and its crossover marked as the model's. A results file
recorded on a real GPU replaces it.
Timings from numba's CUDA *simulator* are never drawn: the simulator runs
each GPU thread as a Python thread, so its times measure Python, not a GPU.
The chart says how many it left out.
"""
from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import ipywidgets as widgets
import numpy as np

from teachgrad.bench.cases import traffic
from teachgrad.bench.schema import Record, Results, load, load_dir

from .gpu_model import H100_SXM5, MODELLED_OPS, GPUModel

#: Where ``python -m teachgrad.bench`` writes result files in a teachgrad checkout.
DEFAULT_RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


@dataclass
class Series:
    """One curve: one backend and kernel, measured on one device at several sizes."""

    label: str
    backend: str  #: "numpy", "numba", "cuda" (teachgrad's GPU kernels), "cupy", "torch"
    ceiling: bool  #: a reference the others are compared with (numpy, memcpy, cuBLAS)
    sizes: np.ndarray
    seconds: np.ndarray  #: median time at each size
    values: np.ndarray  #: what is plotted: seconds, or GB/s / GFLOP/s
    model: bool = False  #: computed from published figures, not measured

    @property
    def gpu(self) -> bool:
        """One of teachgrad's own GPU kernels (vendor libraries are ceilings, not compared)."""
        return self.backend == "cuda"


@dataclass
class ChartData:
    """Everything the chart draws, computed from the records alone (tests read this)."""

    op: str
    dtype: str
    metric: str  #: "time" or "throughput"
    unit: str  #: the y axis label
    series: list[Series] = field(default_factory=list)
    crossover: int | None = None  #: size from which the GPU wins (None: it does not)
    floor: float | None = None  #: the GPU kernels' fastest time, in seconds
    notes: list[str] = field(default_factory=list)
    model_crossover: int | None = None  #: where the *modelled* GPU would win (not measured)


@dataclass
class Source:
    """A results file (or a live measurement) and how its curves are labelled."""

    results: Results
    where: str  #: e.g. "NVIDIA H100 80GB HBM3, 2026-05-20" or "this machine, now"
    live: bool = False


def load_sources(results: Any) -> list[Source]:
    """Sources from result files, folders of them, or :class:`Results` objects."""
    if isinstance(results, (str, Path, Results)):
        results = [results]
    sources = []
    for item in results:
        if isinstance(item, Results):
            found = [item]
        elif Path(item).is_dir():
            found = load_dir(item)
        elif Path(item).exists():
            found = [load(item)]
        else:
            raise FileNotFoundError(f"no benchmark results at {item}: run "
                                    "`python -m teachgrad.bench` to make some, or pass the right path")
        sources.extend(Source(r, r.header.label) for r in found)
    return sources


def quick_cpu_results(op: str, dtype: str = "float32") -> Results:
    """Time ``op`` on this machine's CPU backends (numpy and numba) with the bench suite's
    quick sizes: what *measure CPU now* runs (under a minute)."""
    from teachgrad.bench.suite import SUMMED_OPS, Plan, run

    plan = Plan(ops=(op if op in SUMMED_OPS else "add",), backends=("numpy", "numba"),
                dtype=dtype, quick=True)
    return run(plan, command=f"SpeedChart: quick CPU run of {op}", log=lambda line: None)


def _best_at(series: Iterable[Series]) -> dict[int, float]:
    """The fastest time at each size over several curves."""
    best: dict[int, float] = {}
    for s in series:
        for size, sec in zip(s.sizes.tolist(), s.seconds.tolist()):
            best[size] = min(sec, best.get(size, np.inf))
    return best


def find_crossover(cpu: list[Series], gpu: list[Series]) -> int | None:
    """Smallest size from which the best GPU time beats the best CPU time for good."""
    cpu_best, gpu_best = _best_at(cpu), _best_at(gpu)
    crossover = None
    for size in sorted(set(cpu_best) & set(gpu_best), reverse=True):  # from the largest down
        if gpu_best[size] >= cpu_best[size]:
            break
        crossover = size
    return crossover


def chart_data(sources: list[Source], op: str, dtype: str = "float32",
               metric: str = "time", model: GPUModel | None = H100_SXM5) -> ChartData:
    """Group the records of ``op`` into curves; find the crossover and the floor.

    Without measured GPU timings, ``model`` (None: none) adds a modelled GPU line.
    """
    if metric not in ("time", "throughput"):
        raise ValueError(f"metric must be 'time' or 'throughput', not {metric!r}")
    ops = sorted({r.op for s in sources for r in s.results.records})
    if op not in ops:
        raise ValueError(f"no timings of {op!r} in these results; "
                         f"they have: {', '.join(ops) or 'none'}")
    unit = "seconds (median)" if metric == "time" else ("GFLOP/s" if op == "matmul" else "GB/s")
    data = ChartData(op, dtype, metric, unit)
    groups: dict[str, list[Record]] = {}
    simulated = 0
    for source in sources:
        for r in source.results.select(op=op, dtype=dtype, include_simulated=True):
            if r.simulated or (r.device == "cuda" and source.results.header.simulated):
                simulated += 1
                continue
            name = f"{r.backend} {r.kernel}" + (" (ceiling)" if r.is_ceiling else "")
            groups.setdefault(f"{name} — {source.where}", []).append(r)
    if simulated:
        data.notes.append(
            f"{simulated} timing(s) from numba's CUDA simulator left out: it runs each GPU "
            "thread as a Python thread, so its times say nothing about GPU speed.")
    for label, records in sorted(groups.items()):
        records.sort(key=lambda r: r.size)
        seconds = np.array([r.median_s for r in records])
        values = seconds if metric == "time" else np.array(
            [np.nan if r.throughput is None else r.throughput for r in records])
        data.series.append(Series(label, records[0].backend, records[0].is_ceiling,
                                  np.array([r.size for r in records]), seconds, values))
    cpu = [s for s in data.series if s.backend in ("numpy", "numba")]
    gpu = [s for s in data.series if s.gpu]
    if gpu:
        data.floor = float(min(s.seconds.min() for s in gpu))
        if cpu:
            data.crossover = find_crossover(cpu, gpu)
            if data.crossover is None:
                data.notes.append("The GPU kernels are not faster than the CPU at the largest "
                                  "size measured.")
    else:
        data.notes.append("No GPU timings for this op: load a results file made by "
                          "`python -m teachgrad.bench` on a machine with a GPU.")
        if model is not None and cpu and op in MODELLED_OPS:
            _add_model(data, cpu, model)
    return data


def _add_model(data: ChartData, cpu: list[Series], model: GPUModel) -> None:
    """The modelled GPU line at the CPU's sizes, its crossover, and its sources in the notes."""
    sizes = np.unique(np.concatenate([s.sizes for s in cpu]))
    seconds = model.times(data.op, sizes, data.dtype)
    if data.metric == "time":
        values = seconds
    else:
        amounts = [traffic(data.op, int(n), np.dtype(data.dtype)) for n in sizes]
        per = np.array([flops if data.op == "matmul" else moved for moved, flops in amounts])
        values = per / seconds / 1e9
    line = Series(model.label, "model", False, sizes, seconds, values, model=True)
    data.series.append(line)
    data.model_crossover = find_crossover(cpu, [line])
    where = (f"from {data.model_crossover:,} on" if data.model_crossover is not None
             else "at none of the sizes measured")
    data.notes.append(
        f"The dashed line is a model of an {model.name} from published figures, not a "
        f"measurement: launch latency + max(bytes / bandwidth, FLOPs / FP32 peak), data "
        f"already on the GPU. It is a best case. By the model, that GPU would beat this "
        f"CPU {where}. Sources: " + "; ".join(model.sources()))


def plot(data: ChartData, ax: Any = None) -> Any:
    """Draw ``data`` on log-log axes with matplotlib; returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    if ax is None:
        fig = Figure(figsize=(8, 4.8), dpi=100)  # not pyplot: no stray figures in notebooks
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    colours = plt.get_cmap("tab10")
    for i, s in enumerate(data.series):
        if s.model:  # never to be mistaken for a measurement: dashed, no markers, grey
            ax.plot(s.sizes, s.values, ls="--", lw=2, color="dimgrey", label=s.label)
            continue
        style = ":" if s.ceiling else "-"
        ax.plot(s.sizes, s.values, marker="o" if s.gpu else "s", ms=4, ls=style,
                color=colours(i % 10), label=s.label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n for an n×n×n matmul" if data.op == "matmul" else "elements")
    ax.set_ylabel(data.unit)
    ax.set_title(f"{data.op} ({data.dtype}): {data.metric} against size")
    if data.floor is not None and data.metric == "time":
        ax.axhline(data.floor, color="grey", ls=":", lw=1)
        ax.annotate(f"launch-overhead floor ≈ {data.floor * 1e6:.3g} µs", (0.01, data.floor),
                    xycoords=("axes fraction", "data"), va="bottom", fontsize=8, color="grey")
    if data.crossover is not None:
        ax.axvline(data.crossover, color="crimson", ls="-.", lw=1)
        ax.annotate(f"GPU wins from {data.crossover}", (data.crossover, 0.97),
                    xycoords=("data", "axes fraction"), xytext=(3, 0), textcoords="offset points",
                    ha="left", va="top", fontsize=8, color="crimson", rotation=90)
    if data.model_crossover is not None:
        ax.axvline(data.model_crossover, color="dimgrey", ls="--", lw=1)
        ax.annotate(f"model (not measured): GPU would win from {data.model_crossover}",
                    (data.model_crossover, 0.97), xycoords=("data", "axes fraction"),
                    xytext=(3, 0), textcoords="offset points", ha="left", va="top", fontsize=8,
                    color="dimgrey", rotation=90)
    if data.series:
        ax.legend(fontsize=7, loc="best")
    ax.grid(True, which="both", alpha=0.25)
    fig.tight_layout()
    return fig


def figure_bytes(fig: Any, fmt: str = "png") -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt)
    return buffer.getvalue()


class SpeedChart(widgets.VBox):
    """Benchmark results as a log-log chart, with pickers for op, dtype and time/throughput.

    Args:
        results: result files, folders of them (default: ``benchmarks/results/``
            when it exists) or :class:`teachgrad.bench.schema.Results` objects.
        op: the operation shown first (default: matmul when present).
        dtype: ``"float32"`` or ``"float64"``.
        metric: ``"time"`` or ``"throughput"``.
        live_cpu: ``live_cpu(op, dtype)`` returns fresh :class:`Results` for this
            machine's CPU backends; *measure CPU now* calls it (default:
            :func:`quick_cpu_results`; None disables the button).
        measure_now: run ``live_cpu`` once right away (for ``op``, default matmul).
    """

    def __init__(self, results: Any = None, op: str | None = None, dtype: str = "float32",
                 metric: str = "time",
                 live_cpu: Callable[[str, str], Results] | None = quick_cpu_results,
                 measure_now: bool = False) -> None:
        if results is None:
            results = DEFAULT_RESULTS if DEFAULT_RESULTS.is_dir() else []
        self.sources = load_sources(results)
        self.live_cpu = live_cpu
        if measure_now:
            if live_cpu is None:
                raise ValueError("measure_now=True needs a live_cpu function to measure with")
            self.sources.append(Source(live_cpu(op or "matmul", dtype), "this machine, now", True))
        if not any(s.results.records for s in self.sources):
            raise ValueError("no timings to plot: run `python -m teachgrad.bench` first, pass result "
                             "files with results=, or measure this CPU with measure_now=True")
        self.op_picker = widgets.Dropdown(description="op")
        self.dtype_picker = widgets.Dropdown(description="dtype")
        self.metric_picker = widgets.ToggleButtons(options=["time", "throughput"], value=metric)
        self.measure_button = widgets.Button(description="measure CPU now", icon="clock-o",
                                             layout=widgets.Layout(width="auto"),
                                             disabled=live_cpu is None)
        self.image = widgets.Image(format="png")
        self.notes = widgets.HTML()
        pickers = [self.op_picker, self.dtype_picker, self.metric_picker, self.measure_button]
        super().__init__([widgets.HBox(pickers), self.image, self.notes])
        self._quiet = False  # True while the pickers' options are being refilled
        self._fill_pickers(op or "matmul", dtype)
        for picker in pickers[:3]:
            picker.observe(lambda change: None if self._quiet else self.redraw(), names="value")
        self.measure_button.on_click(lambda button: self.measure_cpu())
        self.redraw()

    def _fill_pickers(self, op: str, dtype: str) -> None:
        """Offer the ops and dtypes the sources have, keeping the choice when possible."""
        records = [r for s in self.sources for r in s.results.records]
        ops, dtypes = sorted({r.op for r in records}), sorted({r.dtype for r in records})
        self._quiet = True
        try:
            self.op_picker.options = ops
            self.op_picker.value = op if op in ops else ops[0]
            self.dtype_picker.options = dtypes
            self.dtype_picker.value = dtype if dtype in dtypes else dtypes[0]
        finally:
            self._quiet = False

    def redraw(self) -> None:
        """Recompute the curves for the chosen op, dtype and metric, and draw them."""
        self.data = chart_data(self.sources, self.op_picker.value, self.dtype_picker.value,
                               self.metric_picker.value)
        self.figure = plot(self.data)
        self.image.value = figure_bytes(self.figure, "png")
        notes = "".join(f"<li>{n}</li>" for n in self.data.notes)
        sources = "".join(f"<li>{s.where}: <code>{s.results.header.command}</code></li>"
                          for s in self.sources)
        self.notes.value = f"<ul>{notes}</ul><small>Measured by:<ul>{sources}</ul></small>"

    def measure_cpu(self) -> None:
        """Time the CPU backends now (replacing an earlier live measurement) and redraw."""
        op, dtype = self.op_picker.value, self.dtype_picker.value
        self.measure_button.description = "measuring…"
        try:
            measured = self.live_cpu(op, dtype)
        finally:
            self.measure_button.description = "measure CPU now"
        self.sources = [s for s in self.sources if not s.live] + [
            Source(measured, "this machine, now", live=True)]
        self._fill_pickers(op, dtype)
        self.redraw()

    def to_png(self) -> bytes:
        return bytes(self.image.value)  # the PNG redraw() made of the current figure

    def to_svg(self) -> str:
        return figure_bytes(self.figure, "svg").decode("utf-8")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["image/png"] = base64.b64encode(self.to_png()).decode("ascii")
        return bundle

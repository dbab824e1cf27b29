"""What the engine benchmarks share: the machine header, timing, the table, the JSON file.

The scripts next to this file compare teachgrad with PyTorch on the CPU, both
measured in the same run. PyTorch is optional: without it a script reports
teachgrad alone and says so.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

# environment variables that set how many threads numpy's BLAS, numba and PyTorch use
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMBA_NUM_THREADS")
# One thread each unless told otherwise (set before numpy loads its BLAS): the
# comparison is then of the code, not of two thread pools on a shared machine.
for _variable in THREAD_VARIABLES:
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

try:
    import teachgrad
except ImportError:  # run from a checkout without installing teachgrad
    sys.path.insert(0, str(HERE.parent))
    import teachgrad

from teachgrad.bench.harness import HostTimer, measure  # noqa: E402

#: The clocks a benchmark can time with: the wall clock, or the CPU time of the calling
#: thread, which leaves out the time the thread waits while other programs hold the cores
#: (on a crowded machine, a long call is preempted more often than a short one, which
#: wall-clock ratios then overstate; each library computes in the calling thread here).
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
from teachgrad.bench.system import cpu_model  # noqa: E402


def import_torch() -> Any:
    """PyTorch if it is installed, else None (the comparison is then skipped, and said so)."""
    try:
        import torch
    except ImportError:
        print("note: PyTorch is not installed: reporting teachgrad alone, without ratios")
        return None
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))  # as many as numpy's BLAS
    return torch


def header(torch: Any) -> dict:
    """Where and with what this run was made."""
    return {
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "teachgrad": teachgrad.__version__,
        "torch": torch.__version__ if torch is not None else None,
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "thread_settings": {k: os.environ.get(k) for k in THREAD_VARIABLES if k in os.environ},
        # how busy the machine was (1, 5, 15 minute load averages): timings on a busy
        # machine are slower and noisier; save() adds the load at the end of the run
        "load_average_before": list(os.getloadavg()),
    }


def seconds_per_call(works: dict[str, Callable[[], object]], loops: int, repeats: int,
                     in_turns: bool = True, clock: str = "wall") -> dict[str, dict[str, float]]:
    """Median and minimum time of one call of each work.

    Each timing runs a work ``loops`` times. With ``in_turns`` the works take
    turns, timing after timing, so that a change in the machine's load (other
    programs) hits all of them alike. Work that runs on several threads (BLAS)
    is better timed one work after the other: idle BLAS threads keep spinning
    for a while after a call, and in turns each library would wait for the
    other's (see "Measuring CPU cases" in NOTES.md). The median is the typical
    time on this machine as it was; the minimum is the closest to what the
    code costs on a quiet one.
    """
    def batch(work: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(loops):
                work()
        return run

    times: dict[str, list[float]] = {name: [] for name in works}
    timer = HostTimer(CLOCKS[clock])
    if in_turns:
        for name, work in works.items():  # warm-up (and first calls) outside the timings
            measure(batch(work), timer, warmup=1, repeats=1)
        for _ in range(repeats):
            for name, work in works.items():
                times[name].extend(measure(batch(work), timer, warmup=0, repeats=1).times_s)
    else:
        for name, work in works.items():
            times[name] = measure(batch(work), timer, warmup=2, repeats=repeats).times_s
    return {name: {"median": statistics.median(t) / loops, "min": min(t) / loops,
                   "max": max(t) / loops} for name, t in times.items()}


def ratio(ours: float, theirs: float | None) -> float | None:
    return None if theirs is None else ours / theirs


def compare(make_work: Callable[[Any], Callable[[], object]], torch: Any, *, loops: int,
            repeats: int, scale: float, unit: str, target: float,
            in_turns: bool = True, clock: str = "wall") -> dict[str, Any]:
    """Time ``make_work(teachgrad)`` and, when PyTorch is there, ``make_work(torch)``.

    Returns one row: ``teachgrad_<unit>_median``/``_min``/``_max`` (seconds per
    call times ``scale``), the same for torch, ``ratio_median``/``_min``/``_max``
    (teachgrad / torch, each statistic of one library over the same of the
    other) and ``target_met`` (the ratio of medians at most ``target``).
    """
    works = {"teachgrad": make_work(teachgrad)}
    if torch is not None:
        works["torch"] = make_work(torch)
    seconds = seconds_per_call(works, loops, repeats, in_turns=in_turns, clock=clock)
    row: dict[str, Any] = {}
    for stat in ("median", "min", "max"):
        ours = seconds["teachgrad"][stat] * scale
        theirs = seconds["torch"][stat] * scale if torch is not None else None
        row[f"teachgrad_{unit}_{stat}"] = ours
        row[f"torch_{unit}_{stat}"] = theirs
        row[f"ratio_{stat}"] = ratio(ours, theirs)
    row["target_met"] = None if torch is None else row["ratio_median"] <= target
    return row


def table_row(row: dict[str, Any], unit: str) -> list[Any]:
    """The columns every results table shows, from a :func:`compare` row."""
    return [row[f"teachgrad_{unit}_median"], row[f"torch_{unit}_median"], row["ratio_median"],
            row["target_met"], row[f"teachgrad_{unit}_min"], row[f"torch_{unit}_min"], row["ratio_min"]]


def table_columns(target: float) -> list[str]:
    return ["teachgrad", "torch", "ratio", f"<= {target}x", "tg min", "torch min", "ratio min"]


def add_clock_option(parser: Any) -> None:
    """``--clock wall|cpu``: the clock a step benchmark times with (see ``CLOCKS``)."""
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="time by the wall clock (default) or the thread's CPU time "
                             "(for a crowded machine: see CLOCKS in common.py)")


def parse_arguments(doc: str, argv: list[str] | None, *, loops: int, repeats: int,
                    quick: tuple[int, int], out: str, extra: Callable[[Any], None] | None = None) -> Any:
    """The options both scripts share: --loops, --repeats, --quick, --out (and ``extra``'s)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--loops", type=int, default=loops, help="calls per timing")
    parser.add_argument("--repeats", type=int, default=repeats,
                        help="timings (the median and the minimum are kept)")
    parser.add_argument("--quick", action="store_true", help="fewer loops and repeats")
    parser.add_argument("--out", default=str(RESULTS / out))
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.loops, args.repeats = quick
    return args


def print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.2f}"
        return str(v)

    texts = [[cell(v) for v in row] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in texts)) for i, c in enumerate(columns)]
    print(title)
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths)))
    for row in texts:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths)))


def save(result: dict, path: Path) -> Path:
    result["header"]["load_average_after"] = list(os.getloadavg())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    return path

"""What the distributed benchmarks share: how busy the CPUs were, and min/median/max.

A benchmark of several processes on a 2-core machine measures the machine's
load as much as the code, so each results file records the load average and
the share of CPU time other programs used just before the run (from
``/proc/stat``), next to the timings.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def cpu_busy_fraction(seconds: float = 2.0) -> float:
    """The share of all CPUs' time that was busy during the next ``seconds`` (0..1)."""
    busy0, total0 = _cpu_times()
    time.sleep(seconds)
    busy1, total1 = _cpu_times()
    return (busy1 - busy0) / max(total1 - total0, 1)


def stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "count": len(values)}

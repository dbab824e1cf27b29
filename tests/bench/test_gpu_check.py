"""benchmarks/gpu_check.sh, the one run a GPU machine gets, in its --dry-run form.

A GPU machine is lent rarely and briefly, so the script must not fail there on a typo.
Its dry run goes through every step here, in numba's CUDA simulator at tiny sizes:
the cuda test files are collected (so every path in the script exists), a GPU chapter
runs with its checkers, the bench and the runtime probe write their files.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_dry_run_goes_through_every_step(tmp_path: Path):
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop("TEACHGRAD_CUDA", None)
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run",
                           str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    log = (tmp_path / "log.txt").read_text()
    summary = (tmp_path / "summary.txt").read_text().splitlines()
    assert [line.split(":")[0] for line in summary] == [
        "describe", "tests", "chapters", "bench", "runtime", "cuda-graphs"], summary
    assert all(": exit 0," in line for line in summary), (summary, log[-3000:])
    assert done.returncode == 0, done.stderr

    collected = [line for line in log.splitlines() if "::" in line]
    assert any(line.startswith("tests/kernels/") for line in collected)
    assert "simulator" in log.splitlines()[1]  # describe: never a GPU in a dry run
    chapters = json.loads((tmp_path / "chapters.json").read_text())
    assert chapters["simulated"] is True
    [chapter] = chapters["chapters"]
    assert chapter["error"] is None and chapter["cells"] > 10
    assert chapter["verdicts"] and all("solved" in v for v in chapter["verdicts"].values())
    runtime = json.loads((tmp_path / "runtime.json").read_text())
    assert runtime["simulated"] is True and runtime["device"] == "CUDA simulator"
    assert {"launch_and_wait_us", "h2d_pinned_GBps", "kernel_overlap"} <= set(runtime["records"])
    [bench] = tmp_path.glob("sim-*.json")  # simulator results are never named as a GPU's
    assert json.loads(bench.read_text())["header"]["simulated"] is True

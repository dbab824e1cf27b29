"""teachgrad.distributed on real ranks: jobs started with MPICH's mpiexec from pytest.

Each test launches a script from tests/scale/distributed_scripts/ on 2 or 3 ranks
(``dist.launch``, which kills the job at its timeout, so nothing here can hang)
and reads what each rank printed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import teachgrad.distributed as dist

SCRIPTS = Path(__file__).resolve().parent / "distributed_scripts"
ROOT = Path(__file__).resolve().parents[2]
QUICK_FAULTS = {"TEACHGRAD_DIST_TIMEOUT": "3", "TEACHGRAD_DIST_FAULT_GRACE": "2"}


def run_ranks(script: str, n: int, *args: str, env: dict | None = None) -> list[dict]:
    """Launch ``script`` on ``n`` ranks; return each rank's JSON line (the job must succeed)."""
    result = dist.launch(SCRIPTS / script, n=n, args=args, timeout=90, env=env)
    assert result.ok, f"job failed (rank {result.failed_rank}): {''.join(result.stderr)[-3000:]}"
    return [json.loads(out.strip().splitlines()[-1]) for out in result.stdout]


@pytest.mark.parametrize("n", [2, 3])
def test_collectives_match_numpy_and_ring_matches_mpi(n):
    for rank, report in enumerate(run_ranks("collectives.py", n)):
        assert report["rank"] == rank
        assert report["cases"] > 90
        assert report["problems"] == []
        assert report["initialized_after_destroy"] is False


@pytest.mark.parametrize("n, algorithm", [(2, "mpi"), (3, "mpi"), (2, "ring")])
def test_ddp_reaches_the_full_batch_parameters_on_every_rank(n, algorithm):
    reports = run_ranks("ddp_equivalence.py", n, algorithm)
    for report in reports:
        assert report["buckets"] == 3
        assert report["identical"] is True            # bit-identical on every rank, every step
        assert report["max_difference"] < 1e-5        # = one process on the full batch


def test_no_sync_accumulates_locally_then_averages_the_sums():
    for report in run_ranks("no_sync.py", 2):
        assert report["sent_inside_no_sync"] == 0
        assert report["local_difference"] == 0.0     # inside no_sync: this rank's gradient only
        assert report["sent_after"] == 1             # one bucket, one all-reduce
        assert report["difference"] < 1e-6


@pytest.mark.parametrize("mode, n, rank, message", [
    ("raise", 3, 1, "ValueError: bad batch on purpose"),
    ("shape", 2, 0, "all_reduce: the ranks passed different tensors (rank 0: shape [3] float32 "
                    "(sum); rank 1: shape [4] float32 (sum))"),
    ("missing", 2, 0, "all_reduce (shape check) timed out after 3 s"),
    ("ddp_shapes", 2, 0, "the model on rank 1 differs from rank 0's: rank 0 has parameter "
                         "'weight' of shape [4, 4]"),
    ("ddp_unused", 2, 0, "parameters without a gradient: ['1.bias', '1.weight']"),
])
def test_faults_end_the_job_with_an_error_naming_the_rank(mode, n, rank, message):
    result = dist.launch(SCRIPTS / "faults.py", n=n, args=[mode], timeout=60, env=QUICK_FAULTS)
    assert not result.ok and not result.timed_out
    assert result.failed_rank == rank
    assert message in result.failure
    assert "finished" not in result.stdout[rank]
    with pytest.raises(dist.DistributedError, match=f"rank {rank} failed with"):
        result.raise_for_status()


def test_when_one_rank_raises_the_others_say_which():
    result = dist.launch(SCRIPTS / "faults.py", n=3, args=["raise"], timeout=60, env=QUICK_FAULTS)
    for other in (0, 2):
        assert (f"RankFailedError: rank 1 failed with ValueError: bad batch on purpose; rank "
                f"{other} stops too") in result.stderr[other]


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **QUICK_FAULTS)
    return subprocess.run([sys.executable, "-m", "teachgrad.distributed.run", *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def test_the_launcher_runs_a_script_on_n_ranks(tmp_path):
    script = tmp_path / "hello.py"
    script.write_text("import sys, teachgrad.distributed as dist\n"
                      "dist.init_process_group('mpi')\n"
                      "line = f'rank {dist.get_rank()} of {dist.get_world_size()} {sys.argv[1:]}'\n"
                      "sys.stdout.write(line + '\\n')  # one write: ranks' lines never mix\n")
    done = _cli("-n", "3", str(script), "--lr", "0.1")
    assert done.returncode == 0, done.stderr
    for r in range(3):
        assert f"rank {r} of 3 ['--lr', '0.1']" in done.stdout


def test_the_launcher_reports_a_failed_job_and_stops_a_stuck_one(tmp_path):
    failed = _cli("-n", "2", str(SCRIPTS / "faults.py"), "raise")
    assert failed.returncode != 0
    assert "[teachgrad.distributed] rank 1 failed with ValueError: bad batch" in failed.stderr
    assert "the job failed" in failed.stderr
    stuck = tmp_path / "stuck.py"
    stuck.write_text("import time\ntime.sleep(60)\n")
    stopped = _cli("-n", "2", "--timeout", "2", str(stuck), timeout=30)
    assert stopped.returncode == 124
    assert "the job timed out; all ranks were stopped" in stopped.stderr
    assert "no script at" in _cli("-n", "2", "missing.py").stderr

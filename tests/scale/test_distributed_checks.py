"""DDP refuses replicas that differ in what they train; a timeout names the rank that left;
the launcher forwards whole lines. Jobs run under MPICH's mpiexec (killed at their timeout)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import teachgrad.distributed as dist

SCRIPTS = Path(__file__).resolve().parent / "distributed_scripts"
ROOT = Path(__file__).resolve().parents[2]
QUICK_FAULTS = {"TEACHGRAD_DIST_TIMEOUT": "3", "TEACHGRAD_DIST_FAULT_GRACE": "2"}


@pytest.mark.parametrize("mode, message", [
    ("frozen", "the model on rank 1 differs from rank 0's: rank 0 has parameter '2.bias' of shape "
               "[2] (teachgrad.float32, trained), rank 1 has parameter '2.bias' of shape [2] "
               "(teachgrad.float32, frozen) (4 trainable parameters on rank 0, 3 on rank 1)"),
    ("bucket_cap", "bucket_cap_mb is 1e-05 on rank 1 but 25 on rank 0"),
])
def test_ddp_refuses_differing_replicas_on_every_rank(mode, message):
    result = dist.launch(SCRIPTS / "ddp_checks.py", n=3, args=[mode], timeout=60, env=QUICK_FAULTS)
    assert not result.ok and not result.timed_out
    for rank in range(3):  # each rank found the difference itself, at construction
        assert f"[teachgrad.distributed] rank {rank} failed with ValueError: " in result.stderr[rank]
        assert message in result.stderr[rank]
        assert "finished" not in result.stdout[rank]


def test_equal_replicas_still_train_together():
    result = dist.launch(SCRIPTS / "ddp_checks.py", n=2, args=["same"], timeout=60, env=QUICK_FAULTS)
    assert result.ok, "".join(result.stderr)[-2000:]
    grads = {out.splitlines()[0] for out in result.stdout}
    assert len(grads) == 1 and grads.pop().startswith("grad")  # the same averaged gradient


def test_timeout_names_the_rank_that_left():
    result = dist.launch(SCRIPTS / "ddp_checks.py", n=3, args=["early_exit"], timeout=60,
                         env=QUICK_FAULTS)
    assert not result.ok and result.failed_rank in (0, 2)
    assert "rank 1 finished" in result.stdout[1]
    assert re.search(r"all_reduce \(shape check\) timed out after 3 s: rank 1 left the job without "
                     r"joining it \(rank 1: its script ended\)", result.failure)
    for rank in (0, 2):  # each waiting rank names rank 1, in its own timeout or via the other's
        assert "rank 1 left the job without joining it" in result.stderr[rank]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **QUICK_FAULTS)
    return subprocess.run([sys.executable, "-m", "teachgrad.distributed.run", *args],
                          capture_output=True, text=True, timeout=90, env=env, cwd=ROOT)


def test_launcher_forwards_whole_lines_under_a_pipe():
    done = _cli("-n", "3", str(SCRIPTS / "chatty.py"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 * 201
    for line in lines:
        rank, body = re.fullmatch(r"\[rank (\d)\] (.*)", line).groups()
        if body == f"rank {rank} unfinished last line":  # a last line without "\n" still comes
            continue
        pieces = body.split(";")[:-1]
        assert len(pieces) == 40 and all(p.startswith(f"r{rank}-") for p in pieces), line
    plain = _cli("-n", "2", "--no-prefix", str(SCRIPTS / "chatty.py"))
    assert plain.stdout.splitlines()[0].startswith("r") and "[rank" not in plain.stdout

"""The part ``distributed.ring_all_reduce`` on real ranks: a ring plugged into every rank
runs all_reduce(algorithm="ring") and DDP; a wrong one is stopped naming the part; one
that raises names the part and its line, and every other rank stops naming that rank.
"""
from __future__ import annotations

import json
import linecache
from pathlib import Path

import nbformat
import numpy as np
import pytest

import teachgrad as tg
import teachgrad.distributed as dist
from teachgrad.distributed import p2p, shipping
from teachgrad.exercises import ch14, ring_ddp

SCRIPTS = Path(__file__).resolve().parent / "distributed_scripts"
QUICK_FAULTS = {"TEACHGRAD_DIST_TIMEOUT": "10", "TEACHGRAD_DIST_FAULT_GRACE": "2"}


def launch(mode: str, n: int) -> dist.RunResult:
    return dist.launch(SCRIPTS / "plugged_ring.py", n=n, args=[mode], timeout=90,
                       env=QUICK_FAULTS)


@pytest.mark.parametrize("n", [2, 3])
def test_a_plugged_ring_runs_all_reduce_and_ddp_for_sum_and_avg_not_max(n):
    job = launch("ok", n)
    assert job.ok, "".join(job.stderr)[-3000:]
    reports = [json.loads(out.strip().splitlines()[-1]) for out in job.stdout]
    for rank, report in enumerate(reports):
        assert report["rank"] == rank
        assert report["sum"] == (n * np.arange(10.0) + n * (n - 1) / 2).tolist()
        assert report["after_sum"] == 1                   # all_reduce(algorithm="ring"), SUM
        assert report["max"] == (np.arange(5.0) * n).tolist()
        assert report["after_max"] == 1                   # MAX: the engine's ring, not the part
        assert report["avg"] == [(n - 1) / 2] * 7
        assert report["after_avg"] == 2                   # AVG through the group's ring
        assert report["ddp_calls"] == 2 * report["buckets"] and report["buckets"] >= 2
        assert report["identical"] is True                # the replicas stayed equal


@pytest.mark.parametrize("mode, expected", [
    ("new", "your distributed.ring_all_reduce (plugged with tg.exercises.plug) returned a new "
            "array (float64, 10 values); expected None: write the sum into data itself"),
    ("nan", "returned NaN at 10 of 10 positions (first at 0) where no rank's input had one"),
])
def test_a_wrong_ring_is_stopped_naming_the_part(mode, expected):
    job = launch(mode, 2)
    assert not job.ok and job.failed_rank == 0
    assert job.failure.startswith("PartError: ") and expected in job.failure, job.failure


@pytest.mark.parametrize("n", [2, 3])
def test_an_exception_in_the_ring_names_the_part_and_line_and_stops_every_rank(n):
    job = launch("raise", n)
    assert not job.ok and not job.timed_out and job.wall_time < 30
    assert job.failed_rank == 1
    assert job.failure.startswith("PartError: in your distributed.ring_all_reduce")
    assert "ZeroDivisionError" in job.failure
    assert "(at plugged_ring.py, line " in job.failure and "the learner's line" in job.failure
    for rank in range(n):
        if rank != 1:
            assert (f"[teachgrad.distributed] rank {rank} failed with RankFailedError: rank 1 "
                    "failed with PartError") in job.stderr[rank], job.stderr[rank][-2000:]


NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "14_data_parallelism.ipynb"


def learners_ring(slip: bool):
    """The chapter's solution of 14.3, defined from its source as a notebook cell is; with
    ``slip``, rank 0 adds in the all-gather (a ring only that rank gets wrong)."""
    [source] = [c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells
                if "solution" in c.metadata.get("tags", [])
                and c.source.startswith("def ring_all_reduce(")]
    if slip:
        copy = "            else:\n                data[r0:r1] = incoming"
        source = source.replace(copy, "            elif rank == 0:\n"
                                      "                data[r0:r1] += incoming\n" + copy)
        assert "elif rank == 0" in source
    filename = f"<learner's ring {slip}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = p2p.ring_namespace()
    exec(compile(source, filename, "exec"), namespace)
    return namespace["ring_all_reduce"]


@pytest.mark.parametrize("n", [2, 3])
def test_the_chapters_workload_ships_the_learners_source_to_every_rank(n):
    job, reports = ch14.ddp_with_your_ring(learners_ring(slip=False), n=n)
    assert job.ok and [r["rank"] for r in reports] == list(range(n))
    for report in reports:
        assert report["ddp_calls"] > 0 and report["calls"] == report["ddp_calls"] + 1
        assert report["messages"] == report["calls"] * 2 * (n - 1)
        assert report["from_engines_ring"] == 0.0  # the engine's order of sums: bit for bit
        assert report["from_full_batch"] < 1e-5
        assert report["all_reduce_error"] == 0.0


def test_a_ring_wrong_on_one_rank_only_is_reported_by_the_workload():
    job, reports = ch14.ddp_with_your_ring(learners_ring(slip=True), n=3)
    assert job.ok  # nothing an engine can see on one rank: the sums are just wrong
    assert reports[0]["from_engines_ring"] > 1e-3 and reports[0]["all_reduce_error"] > 0
    wrong = ring_ddp.on_real_ranks(learners_ring(slip=True), 3)
    with pytest.raises(ch14.Mismatch, match="rank 0"):
        wrong.run()


def test_what_the_ranks_cannot_define_is_refused_before_launching():
    scale = 3.0

    def with_closure(data, comm):
        data *= scale

    with pytest.raises(shipping.ShippingError, match="top level"):
        ch14.ddp_with_your_ring(with_closure)
    assert tg is not None

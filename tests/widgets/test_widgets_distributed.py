"""RankTimeline and RingView, drawn from what real ranks recorded."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import teachgrad.distributed as dist
from teachgrad.widgets import RankTimeline, RingView
from teachgrad.widgets.ring_view import contributors

SCRIPT = Path(__file__).resolve().parent / "distributed_scripts" / "record_ring_and_ddp.py"


@pytest.fixture(scope="module")
def job():
    result = dist.launch(SCRIPT, n=3, timeout=90)
    assert result.ok, "".join(result.stderr)[-2000:]
    return result


def test_ring_view_draws_the_recorded_steps(job):
    reports = [json.loads(out.strip().splitlines()[-1]) for out in job.stdout]
    assert all(r["final"] == [7.0] * 7 for r in reports)  # 1 + 2 + 4 on every rank
    view = RingView([r["steps"] for r in reports], [[2.0 ** r] * 7 for r in range(3)])
    svg = view.to_svg()
    assert svg.count("reduce-scatter") == 2 and svg.count("all-gather") == 2
    # the start row shows each rank alone; after the last step every chunk has all three
    assert "rank 1, chunk 0: ranks [1] added in" in svg
    assert svg.count("ranks [0, 1, 2] added in") >= 3 * 3  # final row: 3 ranks x 3 chunks
    view.slider.value = 1  # first step only: after it, no chunk holds all three yet
    assert "ranks [0, 1, 2] added in" not in view.to_svg()
    assert contributors(5.0) == [0, 2]


def test_rank_timeline_shows_compute_and_each_bucket(job):
    timeline = RankTimeline(job)
    svg = timeline.to_svg()
    for rank in range(3):
        assert f"rank {rank}" in svg
    bars = re.findall(r"<title>([^<]*)</title>", svg)
    assert sum(b.startswith("forward+backward") for b in bars) == 2 * 3
    assert sum(b.startswith("all_reduce bucket") for b in bars) >= 2 * 2 * 3  # 2 buckets x 2 steps
    assert "of marked time in communication" in timeline.summary.value


def test_rank_timeline_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="no rank recorded anything"):
        RankTimeline([[], []])
    with pytest.raises(TypeError, match="RunResult from dist.launch"):
        RankTimeline("job")

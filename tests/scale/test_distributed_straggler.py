"""A straggler's partners wait inside the collective, and the timeline records that wait.

Chapter 14 shows rank 1 made slower than rank 0 and tells the reader that rank 0's
communication bars stretch to cover the wait: every collective's recorded interval
starts when the collective is called (its shape check already waits for every rank).
"""
from __future__ import annotations

import teachgrad.distributed as dist
from teachgrad.widgets.rank_timeline import totals

STRAGGLER = """
import time
import teachgrad as tg
import teachgrad.distributed as dist

dist.init_process_group("mpi")
rank = dist.get_rank()
grad = tg.ones(1000)
pieces = [tg.zeros(1000) for _ in range(2)]
for step in range(3):
    with dist.span("compute"):
        time.sleep(0.01 + (0.08 if rank == 1 else 0.0))
    dist.all_reduce(grad, op=dist.ReduceOp.AVG)
    with dist.span("compute"):
        time.sleep(0.01 + (0.08 if rank == 1 else 0.0))
    dist.all_gather(pieces, grad)
"""


def test_the_fast_rank_waits_inside_the_recorded_collectives():
    job = dist.launch(source=STRAGGLER, n=2, timeout=90)
    assert job.ok, "".join(job.stderr)[-3000:]
    fast, slow = (totals(events) for events in job.timelines)
    # rank 0 waits about 6 x 80 ms for rank 1: at least half of that is recorded as comm
    assert fast["comm"] > 0.24, fast
    assert fast["comm"] / (fast["comm"] + fast["compute"]) > 0.5
    assert slow["comm"] < fast["comm"] / 2
    names = {e["name"] for e in job.timelines[0] if e["kind"] == "comm"}
    assert {"all_reduce", "all_gather"} <= names

"""Chapter 14's workload for a learner's ring: DDP on real ranks with the ring plugged in.

:func:`ddp_with_your_ring` starts ``n`` ranks under ``mpiexec``. The rank script is
fixed (:data:`RANK_SCRIPT`); the learner's function travels as data (its source, in
the script's arguments) and each rank defines it among the names the ranks provide
(:func:`teachgrad.distributed.shipping.define`). Each rank then

1. trains a small model with DDP on the engine's own ring (``allreduce="ring"``);
2. trains it again, from the same start, with the learner's function plugged into
   ``distributed.ring_all_reduce`` (every bucket's all-reduce runs it), and sums one
   tensor with ``dist.all_reduce(..., algorithm="ring")``;
3. trains it in one process on the whole batch (what data parallelism must equal),

and prints one JSON line: how often the part ran, what it sent, and how far apart
the three sets of parameters are.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Callable

from ..distributed import launch, p2p, shipping
from ..distributed.launcher import RunResult
from .core import Mismatch, Test, expect_true

RANK_SCRIPT = '''
import json
import sys

import numpy as np

import teachgrad as tg
import teachgrad.distributed as dist
from teachgrad.distributed import p2p, process_group, shipping
from teachgrad.nn.parallel import DistributedDataParallel as DDP
from teachgrad.utils.data import DistributedSampler

shipped = shipping.ShippedFunction(**json.loads(sys.argv[1]))
STEPS, N = int(sys.argv[2]), 30
dist.init_process_group("mpi", allreduce="ring")
rank, p = dist.get_rank(), dist.get_world_size()
yours = shipping.define(shipped, p2p.ring_namespace())

rng = np.random.default_rng(0)
X = tg.tensor(rng.normal(size=(N, 4)), dtype=tg.float32)
y = tg.tensor(rng.integers(0, 3, size=N))
mine = tg.tensor(np.array(list(DistributedSampler(range(N), shuffle=False))))
loss_fn = tg.nn.CrossEntropyLoss()


def make_model():
    tg.manual_seed(0)
    return tg.nn.Sequential(tg.nn.Linear(4, 16), tg.nn.Tanh(), tg.nn.Linear(16, 3))


def train(model, rows):
    optimizer = tg.optim.SGD(model.parameters(), lr=0.5)
    for step in range(STEPS):
        optimizer.zero_grad()
        loss_fn(model(X[rows]), y[rows]).backward()
        optimizer.step()
    return np.concatenate([q.detach().numpy().ravel() for q in model.parameters()])


def ddp():
    return DDP(make_model(), bucket_cap_mb=20 * 4 / 2**20)   # a few buckets, of ragged sizes


engines = train(ddp(), mine)
with tg.exercises.plugged("distributed.ring_all_reduce", yours) as part:
    with dist.span("DDP with your ring"):
        with_yours = train(ddp(), mine)
    ddp_calls = part.calls
    summed = tg.tensor(np.arange(7, dtype=np.float64) * (rank + 1))
    dist.all_reduce(summed, algorithm="ring")
    calls = part.calls
full_batch = train(make_model(), tg.tensor(np.arange(N)))
sent = p2p.point_to_point(process_group.group())
print(json.dumps({
    "rank": rank, "calls": calls, "ddp_calls": ddp_calls,
    "messages": sent.messages_sent, "values": sent.values_sent,
    "all_reduce_error": float(np.max(np.abs(summed.numpy()
                                            - np.arange(7) * p * (p + 1) / 2))),
    "from_engines_ring": float(np.max(np.abs(with_yours - engines))),
    "from_full_batch": float(np.max(np.abs(with_yours - full_batch))),
    "parameters": with_yours.tolist()}))
'''


def ddp_with_your_ring(ring_all_reduce: Callable, n: int = 3, steps: int = 3,
                       timeout: float = 60.0) -> tuple[RunResult, list[dict]]:
    """Train with DDP on ``n`` ranks with ``ring_all_reduce`` plugged into every rank.

    Returns the job (each rank's output and timeline, for ``RankTimeline``) and each
    rank's report (an empty list if the job failed: ``job.failed_rank`` says where).
    Raises :class:`~teachgrad.distributed.shipping.ShippingError` if the function
    cannot be sent to the ranks.
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    shipped = shipping.ship(ring_all_reduce, p2p.ring_namespace())
    job = launch(source=RANK_SCRIPT, n=n, args=[json.dumps(asdict(shipped)), str(steps)],
                 timeout=timeout, env={"TEACHGRAD_DIST_TIMEOUT": "20"})
    if not job.ok:
        return job, []
    return job, [json.loads(out.strip().splitlines()[-1]) for out in job.stdout]


def on_real_ranks(ring_all_reduce: Callable, n: int) -> Test:
    """The chapter's workload as a checker's test: DDP on ``n`` ranks with the learner's
    ring, against the engine's ring and full-batch training, the part run on every rank."""
    def run() -> None:
        job, reports = ddp_with_your_ring(ring_all_reduce, n=n)
        if not job.ok:
            raise Mismatch(f"on {n} real ranks the job failed"
                           + (f": rank {job.failed_rank}: {job.failure}" if job.failed_rank
                              is not None else f" (exit code {job.returncode})"),
                           hint="the simulated ranks passed: read the rank's error above",
                           show_values=False)
        for report in reports:
            rank = report["rank"]
            expect_true(report["ddp_calls"] > 0, f"DDP never called your ring on rank {rank}",
                        hint="it was plugged into distributed.ring_all_reduce")
            expect_true(report["all_reduce_error"] < 1e-9,
                        f"dist.all_reduce(algorithm='ring') with your ring gave sums off by "
                        f"{report['all_reduce_error']:.3g} on rank {rank}")
            expect_true(report["from_engines_ring"] < 1e-5,
                        f"after 3 DDP steps with your ring, rank {rank}'s parameters differ "
                        f"from those trained on the engine's ring by "
                        f"{report['from_engines_ring']:.3g}")
            expect_true(report["from_full_batch"] < 1e-5,
                        f"after 3 DDP steps rank {rank}'s parameters differ from one "
                        f"process's full-batch training by {report['from_full_batch']:.3g}")
            expect_true(report["parameters"] == reports[0]["parameters"],
                        f"ranks 0 and {rank} ended with different parameters")
    return Test(f"DDP on {n} real ranks (mpiexec), 3 steps, your ring plugged into every "
                "rank", run)

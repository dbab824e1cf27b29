"""Run under mpiexec: a ring all-reduce written in this script, plugged into every rank.

``mode`` (argv[1]):
  ok       the ring is used by all_reduce(algorithm="ring") and by DDP (init_process_group
           (allreduce="ring")) for SUM and AVG, not for MAX/MIN; prints one JSON line
  new      the ring returns a new array instead of summing in place (rejected)
  nan      the ring leaves NaN in data (rejected)
  raise    the ring raises on rank 1 only (a PartError there; the others stop)
"""
import json
import sys

import numpy as np

import teachgrad as tg
import teachgrad.distributed as dist
from teachgrad.distributed import p2p
from teachgrad.nn.parallel import DistributedDataParallel as DDP

MODE = sys.argv[1]


def my_ring(data, comm):
    """The part's own function (the engine's ring through the point-to-point calls), plugged
    as a learner's would be: it must give what the unplugged engine gives."""
    p2p.ring_sum(data, comm)


def new_array(data, comm):
    my_ring(data.copy(), comm)
    return data * 2


def leaves_nan(data, comm):
    data[:] = np.nan


def raises_on_rank_1(data, comm):
    if comm.Get_rank() == 1:
        return data.size / 0  # the learner's line
    my_ring(data, comm)


dist.init_process_group("mpi", allreduce="ring")
rank, p = dist.get_rank(), dist.get_world_size()
plugged = {"ok": my_ring, "new": new_array, "nan": leaves_nan, "raise": raises_on_rank_1}[MODE]
part = tg.exercises.plug("distributed.ring_all_reduce", plugged)

t = tg.tensor(np.arange(10.0) + rank)
dist.all_reduce(t, algorithm="ring")
summed = t.tolist()
after_sum = part.calls
m = tg.tensor(np.arange(5.0) * (rank + 1))
dist.all_reduce(m, op=dist.ReduceOp.MAX, algorithm="ring")   # the engine's ring: no call
after_max = part.calls
a = tg.tensor(np.full(7, float(rank)))
dist.all_reduce(a, op=dist.ReduceOp.AVG)                     # the group's algorithm: ring
after_avg = part.calls

tg.manual_seed(0)
model = DDP(tg.nn.Sequential(tg.nn.Linear(3, 5), tg.nn.Tanh(), tg.nn.Linear(5, 2)),
            bucket_cap_mb=12 * 4 / 2**20)
optimizer = tg.optim.SGD(model.parameters(), lr=0.1)
X = tg.tensor(np.random.default_rng(rank).normal(size=(4, 3)), dtype=tg.float32)
for step in range(2):
    optimizer.zero_grad()
    model(X).sum().backward()
    optimizer.step()
flat = np.concatenate([q.detach().numpy().ravel() for q in model.parameters()])
gathered = [tg.zeros(flat.size) for _ in range(p)]
dist.all_gather(gathered, tg.tensor(flat))
tg.exercises.unplug("distributed.ring_all_reduce")
print(json.dumps({
    "rank": rank, "sum": summed, "max": m.tolist(), "avg": a.tolist(),
    "after_sum": after_sum, "after_max": after_max, "after_avg": after_avg,
    "ddp_calls": part.calls - after_avg, "buckets": len(model.buckets),
    "identical": all(np.array_equal(g.numpy(), gathered[0].numpy()) for g in gathered)}))

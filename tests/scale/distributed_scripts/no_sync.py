"""Run under mpiexec: gradient accumulation with no_sync() against one process.

Two micro-batches per step: the first under no_sync() (no communication, the
gradient stays local), the second synchronised, which averages the accumulated
sums. The result must equal one process's gradient of the summed losses over
everyone's micro-batches, divided by the number of ranks.
"""
import json

import numpy as np

import teachgrad as tg
import teachgrad.distributed as dist
from teachgrad.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
rank, p = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(3)
X = tg.tensor(rng.normal(size=(p, 2, 6, 3)), dtype=tg.float32)  # rank, micro-batch, rows, cols
Y = tg.tensor(rng.normal(size=(p, 2, 6, 1)), dtype=tg.float32)
tg.manual_seed(0)
model = DDP(tg.nn.Linear(3, 1))
loss_fn = tg.nn.MSELoss()
sent_before = len([e for e in dist.timeline.events() if e["name"].startswith("all_reduce")])
with model.no_sync():
    loss_fn(model(X[rank, 0]), Y[rank, 0]).backward()
local_after_first = [q.grad.numpy().copy() for q in model.parameters()]
sent_inside = len([e for e in dist.timeline.events() if e["name"].startswith("all_reduce")])
loss_fn(model(X[rank, 1]), Y[rank, 1]).backward()
sent_after = len([e for e in dist.timeline.events() if e["name"].startswith("all_reduce")])

tg.manual_seed(0)
reference = tg.nn.Linear(3, 1)
for r in range(p):
    for micro in range(2):
        loss_fn(reference(X[r, micro]), Y[r, micro]).backward()
difference = max(float(np.max(np.abs(a.grad.numpy() - b.grad.numpy() / p)))
                 for a, b in zip(model.parameters(), reference.parameters()))
tg.manual_seed(0)
alone = tg.nn.Linear(3, 1)
loss_fn(alone(X[rank, 0]), Y[rank, 0]).backward()
local_difference = max(float(np.max(np.abs(a - b.grad.numpy())))
                       for a, b in zip(local_after_first, alone.parameters()))
print(json.dumps({"rank": rank, "difference": difference, "local_difference": local_difference,
                  "sent_inside_no_sync": sent_inside - sent_before,
                  "sent_after": sent_after - sent_inside}))

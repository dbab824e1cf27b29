"""Run under mpiexec: record a ring all-reduce (start value 2**rank) and two DDP steps
with marked compute, for the widgets. Prints each rank's ring steps as a JSON line."""
import json

import numpy as np

import teachgrad as tg
import teachgrad.distributed as dist
from teachgrad.distributed import ring
from teachgrad.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
rank = dist.get_rank()
data = np.full(7, 2.0 ** rank)
steps = []
ring.ring_all_reduce(data, np.add, record=steps)

tg.manual_seed(0)
model = DDP(tg.nn.Sequential(tg.nn.Linear(8, 16), tg.nn.ReLU(), tg.nn.Linear(16, 2)),
            bucket_cap_mb=100 / 2**20)  # two buckets: the last layer, then the first
for _ in range(2):
    with dist.span("forward+backward"):
        model(tg.randn(4, 8)).sum().backward()
print(json.dumps({"rank": rank, "steps": steps, "final": data.tolist()}))

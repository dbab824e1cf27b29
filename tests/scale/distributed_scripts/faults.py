"""Run under mpiexec with one argument naming the fault; every fault must end the job
with an error (never a hang). The test reads each rank's stderr."""
import sys
import time

import teachgrad as tg
import teachgrad.distributed as dist
from teachgrad.nn.parallel import DistributedDataParallel as DDP

mode = sys.argv[1]
dist.init_process_group("mpi")
rank = dist.get_rank()

if mode == "raise":  # rank 1 fails while the others wait in all_reduce
    if rank == 1:
        time.sleep(0.2)
        raise ValueError("bad batch on purpose")
    dist.all_reduce(tg.zeros(3))
elif mode == "shape":
    dist.all_reduce(tg.zeros(3 + (rank == 1)))
elif mode == "missing":  # rank 1 leaves without joining: the others time out
    if rank != 1:
        dist.all_reduce(tg.zeros(3))
elif mode == "ddp_shapes":
    DDP(tg.nn.Linear(4, 5 if rank == 1 else 4))
elif mode == "ddp_unused":
    model = tg.nn.Sequential(tg.nn.Linear(2, 2), tg.nn.Linear(2, 2))
    ddp = DDP(model)
    model[0](tg.ones(1, 2)).sum().backward()  # the second layer gets no gradient
    ddp(tg.ones(1, 2))
print("rank", rank, "finished")

"""Run under mpiexec with one argument naming a mismatch between ranks; each must end the
job with an error on every rank, naming what differs (or which rank left)."""
import sys

import teachgrad as tg
import teachgrad.distributed as dist
from teachgrad.nn.parallel import DistributedDataParallel as DDP

mode = sys.argv[1]
dist.init_process_group("mpi")
rank = dist.get_rank()
tg.manual_seed(0)
model = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.ReLU(), tg.nn.Linear(4, 2))

if mode == "frozen":  # the same shapes, but rank 1 trains one parameter fewer
    if rank == 1:
        model[2].bias.requires_grad_(False)
    DDP(model)
elif mode == "bucket_cap":  # the same model, cut into buckets of another size on rank 1
    DDP(model, bucket_cap_mb=25.0 if rank != 1 else 1e-5)
elif mode == "early_exit":  # rank 1's script ends before the all-reduce the others wait in
    if rank != 1:
        dist.all_reduce(tg.zeros(3))
elif mode == "same":  # the control: equal replicas train together
    ddp = DDP(model)
    ddp(tg.ones(2, 3) * (rank + 1)).sum().backward()
    print("grad", model[0].weight.grad.sum().item())
print("rank", rank, "finished")

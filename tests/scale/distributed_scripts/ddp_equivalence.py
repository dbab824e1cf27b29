"""Run under mpiexec: DDP on p ranks against one process training on the full batch.

Prints one JSON line per rank: whether the parameters were identical on every
rank after every step, and the largest difference from the single-process run.
"""
import json
import sys

import numpy as np

import teachgrad as tg
import teachgrad.distributed as dist
from teachgrad.nn.parallel import DistributedDataParallel as DDP
from teachgrad.utils.data import DistributedSampler

ALGORITHM = sys.argv[1] if len(sys.argv) > 1 else "mpi"
STEPS, N = 6, 24


def make_model(seed):
    tg.manual_seed(seed)
    return tg.nn.Sequential(tg.nn.Linear(4, 16), tg.nn.Tanh(), tg.nn.Linear(16, 3))


dist.init_process_group("mpi", allreduce=ALGORITHM)
rank, p = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(0)
X = tg.tensor(rng.normal(size=(N, 4)), dtype=tg.float32)
y = tg.tensor(rng.integers(0, 3, size=N))
loss_fn = tg.nn.CrossEntropyLoss()

# every rank starts from a different model: DDP must broadcast rank 0's
model = DDP(make_model(seed=rank), bucket_cap_mb=16 * 4 / 2**20)  # tiny buckets: several of them
optimizer = tg.optim.SGD(model.parameters(), lr=0.5)
sampler = DistributedSampler(range(N), shuffle=False)
mine = tg.tensor(np.array(list(sampler)))
identical_every_step = True
for step in range(STEPS):
    optimizer.zero_grad()
    loss_fn(model(X[mine]), y[mine]).backward()
    optimizer.step()
    flat = np.concatenate([q.detach().numpy().ravel() for q in model.parameters()])
    gathered = [tg.zeros(flat.size) for _ in range(p)]
    dist.all_gather(gathered, tg.tensor(flat))
    identical_every_step &= all(np.array_equal(g.numpy(), gathered[0].numpy()) for g in gathered)

reference = make_model(seed=0)
ref_opt = tg.optim.SGD(reference.parameters(), lr=0.5)
for step in range(STEPS):
    ref_opt.zero_grad()
    loss_fn(reference(X), y).backward()
    ref_opt.step()
difference = max(float(np.max(np.abs(a.detach().numpy() - b.detach().numpy())))
                 for a, b in zip(model.module.parameters(), reference.parameters()))
print(json.dumps({"rank": rank, "buckets": len(model.buckets), "identical": identical_every_step,
                  "max_difference": difference}))

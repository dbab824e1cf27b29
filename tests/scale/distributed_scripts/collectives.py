"""Run under mpiexec: every collective, on both all-reduce algorithms, against numpy.

Each rank draws its data from a generator seeded by its rank, so every rank can
also draw everyone's data and compute the expected result with numpy. Prints
one JSON line per rank with the list of cases that went wrong (empty = all good).
"""
import json

import numpy as np

import teachgrad as tg
import teachgrad.distributed as dist
from teachgrad.distributed import ReduceOp

dist.init_process_group("mpi")
rank, p = dist.get_rank(), dist.get_world_size()
problems = []
NUMPY = {ReduceOp.SUM: np.sum, ReduceOp.MAX: np.max, ReduceOp.MIN: np.min,
         ReduceOp.AVG: np.mean, ReduceOp.PRODUCT: np.prod}


def data_of(r, shape, dtype, case):
    rng = np.random.default_rng([case, r])
    if np.dtype(dtype).kind == "i":
        return rng.integers(-50, 50, size=shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def expect(name, got, expected, exact=False):
    ok = np.array_equal(got, expected) if exact else np.allclose(got, expected, rtol=1e-5,
                                                                  atol=1e-6)
    if not ok:
        problems.append(name)


case = 0
for algorithm in ("mpi", "ring"):
    for shape in [(1,), (7,), (2, 3, 5), (1000,), (0,)]:
        for dtype in ("float32", "int64"):
            for op in ReduceOp:
                if op is ReduceOp.AVG and dtype == "int64":
                    continue
                case += 1
                everyone = np.stack([data_of(r, shape, dtype, case) for r in range(p)])
                t = tg.tensor(everyone[rank])
                same_object = t._array
                dist.all_reduce(t, op=op, algorithm=algorithm)
                name = f"all_reduce {algorithm} {shape} {dtype} {op.name}"
                expect(name, t.numpy(), NUMPY[op](everyone, axis=0), exact=dtype == "int64"
                       and op is not ReduceOp.PRODUCT)
                if t._array is not same_object:
                    problems.append(name + " not in place")

# the ring against MPI's own Allreduce on the same data, ragged sizes
for n in (1, 2, 3, 5, 1001, 65537):
    case += 1
    results = {}
    for algorithm in ("mpi", "ring"):
        t = tg.tensor(data_of(rank, (n,), "float32", case))
        dist.all_reduce(t, algorithm=algorithm)
        results[algorithm] = t.numpy()
    expect(f"ring vs mpi, {n} floats", results["ring"], results["mpi"])

# a transposed (non-contiguous) view is reduced in place into its own storage
case += 1
base = tg.tensor(data_of(rank, (3, 4), "float64", case))
view = base.t()
dist.all_reduce(view, algorithm="ring")
expect("all_reduce of a transposed view",
       base.numpy(), sum(data_of(r, (3, 4), "float64", case) for r in range(p)))

# async_op returns a Work; the data is there after wait()
t = tg.tensor([float(rank + 1)] * 5)
work = dist.all_reduce(t, op=ReduceOp.SUM, async_op=True)
work.wait()
expect("all_reduce async", t.numpy(), [p * (p + 1) / 2] * 5)
expect("work completed", work.is_completed(), True, exact=True)

for src in range(p):
    t = tg.tensor(data_of(rank, (4, 2), "float32", 1000 + src))
    dist.broadcast(t, src=src)
    expect(f"broadcast from {src}", t.numpy(), data_of(src, (4, 2), "float32", 1000 + src), True)

mine = tg.tensor(data_of(rank, (2, 3), "float32", 2000))
out = [tg.zeros(2, 3) for _ in range(p)]
dist.all_gather(out, mine)
for r in range(p):
    expect(f"all_gather slot {r}", out[r].numpy(), data_of(r, (2, 3), "float32", 2000), True)

for op in (ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX):
    inputs = [tg.tensor(data_of(rank, (3,), "float64", 3000 + k)) for k in range(p)]
    result = tg.zeros(3, dtype=tg.float64)
    dist.reduce_scatter(result, inputs, op=op)
    expected = NUMPY[op](np.stack([data_of(r, (3,), "float64", 3000 + rank) for r in range(p)]),
                         axis=0)
    expect(f"reduce_scatter {op.name}", result.numpy(), expected)

dist.barrier()
comm_events = [e for e in dist.timeline.events() if e["kind"] == "comm"]
if len(comm_events) < case:
    problems.append(f"timeline recorded {len(comm_events)} collectives, expected >= {case}")
dist.destroy_process_group()
print(json.dumps({"rank": rank, "cases": case, "problems": problems,
                  "initialized_after_destroy": dist.is_initialized()}))

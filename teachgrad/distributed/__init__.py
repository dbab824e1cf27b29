"""``teachgrad.distributed``: data-parallel training across processes, after ``torch.distributed``.

Every rank runs the same script; MPI (MPICH through mpi4py) starts the ranks
and moves the bytes::

    import teachgrad.distributed as dist
    dist.init_process_group(backend="mpi")
    t = tg.tensor([float(dist.get_rank())])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)    # in place: 0 + 1 + ... + (p-1)

Start it with ``python -m teachgrad.distributed.run -n 2 script.py``, or from a
notebook with :func:`launch`, which also gathers each rank's output and
timeline. The lesson's own ring all-reduce lives in :mod:`.ring`; choose it with
``init_process_group(allreduce="ring")`` or ``all_reduce(..., algorithm="ring")``;
it is also an engine part, ``distributed.ring_all_reduce``, which a learner's own ring
can replace on every rank (:mod:`.p2p` is the communicator it receives, :mod:`.shipping`
how a notebook's function reaches the ranks).
"""
from .collectives import ReduceOp, Work, all_gather, all_reduce, barrier, broadcast, reduce_scatter
from .launcher import RunResult, launch
from .process_group import (
    DistributedError, RankFailedError, destroy_process_group, get_rank, get_world_size,
    init_process_group, is_available, is_initialized,
)
from . import p2p, ring, shipping, timeline
from .timeline import span

__all__ = [
    "DistributedError", "RankFailedError", "ReduceOp", "RunResult", "Work", "all_gather",
    "all_reduce", "barrier", "broadcast", "destroy_process_group", "get_rank",
    "get_world_size", "init_process_group", "is_available", "is_initialized", "launch",
    "reduce_scatter", "span",
]

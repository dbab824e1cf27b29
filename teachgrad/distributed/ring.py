"""The ring all-reduce: reduce-scatter, then all-gather, over point-to-point messages.

Cut the data into ``p`` chunks. The ranks stand in a ring; at every step each
rank sends one chunk to its right neighbour and receives one from its left.

* **Reduce-scatter** (``p - 1`` steps): rank ``r`` sends chunk ``(r - s) mod p``
  at step ``s`` and adds the chunk it receives into its own copy. Afterwards
  rank ``r`` holds the fully reduced chunk ``(r + 1) mod p``.
* **All-gather** (``p - 1`` steps): rank ``r`` sends chunk ``(r + 1 - s) mod p``,
  a finished one, and overwrites its copy with the one it receives.

Each rank sends ``2 (p - 1)`` chunks of ``n / p`` elements: ``2 (p - 1) / p`` of
the data, almost ``2n`` however many ranks there are. That is why the ring is
bandwidth-optimal, and why its time barely grows with ``p`` (the number of
steps, each paying a latency, does).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

PHASES = ("reduce-scatter", "all-gather")
_RING_TAG = 41


@dataclass(frozen=True)
class RingStep:
    """What one rank does at one step of the ring (plain data for pictures and checks)."""

    phase: str   # "reduce-scatter" or "all-gather"
    step: int    # 0 .. p-2 within the phase
    rank: int
    send: int    # the chunk this rank sends to rank + 1
    recv: int    # the chunk it receives from rank - 1


def send_chunk(phase: str, step: int, rank: int, world_size: int) -> int:
    """Which chunk ``rank`` sends to its right neighbour at ``step`` of ``phase``."""
    if phase == "reduce-scatter":
        return (rank - step) % world_size
    if phase == "all-gather":
        return (rank + 1 - step) % world_size
    raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")


def recv_chunk(phase: str, step: int, rank: int, world_size: int) -> int:
    """Which chunk ``rank`` receives: the one its left neighbour sends."""
    return send_chunk(phase, step, (rank - 1) % world_size, world_size)


def ring_schedule(world_size: int) -> list[RingStep]:
    """Every rank's every step, in order: phase, step, then rank."""
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    return [RingStep(phase, step, rank, send_chunk(phase, step, rank, world_size),
                     recv_chunk(phase, step, rank, world_size))
            for phase in PHASES for step in range(world_size - 1) for rank in range(world_size)]


def chunk_bounds(n: int, world_size: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of each chunk: as equal as possible, the first ones longer by 1."""
    base, extra = divmod(n, world_size)
    bounds, start = [], 0
    for k in range(world_size):
        stop = start + base + (1 if k < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def bytes_sent_per_rank(nbytes: int, world_size: int) -> float:
    """The ring's traffic per rank: ``2 (p - 1) / p`` of the data."""
    return 2 * (world_size - 1) / world_size * nbytes


def modelled_time(nbytes: int, world_size: int, bandwidth: float, latency: float) -> float:
    """The ring's time in the alpha-beta model: ``2 (p-1)`` latencies plus its bytes / bandwidth.

    ``bandwidth`` (bytes/s) and ``latency`` (s) are fitted to measured times by
    the benchmark; this is a model, and is labelled so wherever it is drawn.
    """
    return 2 * (world_size - 1) * latency + bytes_sent_per_rank(nbytes, world_size) / bandwidth


Wait = Callable[[Sequence[Any], str], None]


def _wait_all(requests: Sequence[Any], what: str) -> None:
    from mpi4py import MPI
    MPI.Request.Waitall(list(requests))


def ring_all_reduce(data: np.ndarray, reduce: Callable = np.add, comm: Any = None,
                    wait: Wait | None = None, record: list | None = None) -> None:
    """Reduce the 1-D contiguous ``data`` across the ranks of ``comm``, in place.

    Args:
        data: this rank's values; on return every rank holds the reduction.
        reduce: the elementwise reduction, e.g. ``np.add`` or ``np.maximum``.
        comm: an MPI communicator (mpi4py); by default the process group's.
        wait: how to wait for the messages; by default the process group's
            (which never hangs) with its communicator, else MPI's ``Waitall``.
        record: if a list, one dict per step is appended: phase, step, chunks
            sent and received, and a copy of ``data`` after the step.
    """
    if data.ndim != 1 or not data.flags.c_contiguous:
        raise ValueError("ring_all_reduce works on a 1-D contiguous array: pass arr.reshape(-1)")
    if comm is None:
        from . import process_group
        comm, wait = process_group.group().comm, wait or process_group.wait
    wait = wait or _wait_all
    rank, p = comm.Get_rank(), comm.Get_size()
    bounds = chunk_bounds(data.size, p)
    right, left = (rank + 1) % p, (rank - 1) % p
    incoming = np.empty(max(stop - start for start, stop in bounds), dtype=data.dtype)
    for phase in PHASES:
        for step in range(p - 1):
            s0, s1 = bounds[send_chunk(phase, step, rank, p)]
            r0, r1 = bounds[recv_chunk(phase, step, rank, p)]
            got = incoming[:r1 - r0]
            requests = [comm.Irecv(got, source=left, tag=_RING_TAG),
                        comm.Isend(data[s0:s1], dest=right, tag=_RING_TAG)]
            wait(requests, f"ring all_reduce ({phase} step {step})")
            if phase == "reduce-scatter":
                reduce(data[r0:r1], got, out=data[r0:r1])
            else:
                data[r0:r1] = got
            if record is not None:
                record.append({"phase": phase, "step": step, "rank": rank,
                               "send": send_chunk(phase, step, rank, p),
                               "recv": recv_chunk(phase, step, rank, p),
                               "data": data.tolist()})

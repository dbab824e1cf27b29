"""The process group: which rank am I, how many are we, and waiting without hanging.

Every rank of a job runs the same script under ``mpiexec``; MPI (MPICH, through
mpi4py) numbers them 0..p-1 and moves the bytes. This module keeps the state
``init_process_group`` sets up, and the one place where a rank waits for
messages: :func:`wait`, which gives up with an error instead of hanging when

* another rank raised (its exception hook sends every rank a short notice,
  see :func:`_report_failure`), or
* nothing arrived within the group's timeout (a rank died or is stuck).
"""
from __future__ import annotations

import atexit
import os
import pickle
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Sequence

import numpy as np

from . import timeline

#: What the lesson's algorithms are called; "mpi" is MPI's own Allreduce.
ALLREDUCE_ALGORITHMS = ("mpi", "ring")
DEFAULT_TIMEOUT = timedelta(minutes=5)
_FAULT_TAG = 77
_EXIT_TAG = 78  # "I am leaving": sent by a rank whose script ends (or that leaves the group)
_CHECK_EVERY = 0.01  # seconds between looks for fault notices while spinning


class DistributedError(RuntimeError):
    """A collective could not complete: a rank failed, timed out, or disagreed."""


class RankFailedError(DistributedError):
    """Another rank raised; this one stops too. ``failed_rank`` says which."""

    def __init__(self, message: str, failed_rank: int) -> None:
        super().__init__(message)
        self.failed_rank = failed_rank


@dataclass
class _Group:
    comm: Any          # a duplicate of MPI.COMM_WORLD for the collectives
    faults: Any        # another duplicate, only for fault notices
    rank: int
    size: int
    timeout: float     # seconds
    allreduce: str     # "mpi" or "ring"
    p2p: Any = None    # the point-to-point communicator a plugged ring receives (see p2p)


_group: _Group | None = None
_failed_ranks: dict[int, str] = {}
_exited_ranks: dict[int, str] = {}  # rank -> how it left, from its exit notice


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError:  # pragma: no cover - the extra is installed in the test environment
        raise ImportError(
            "teachgrad.distributed needs mpi4py and an MPI library. Fix: "
            "pip install 'teachgrad[distributed]' (the mpich and mpi4py wheels)") from None
    return MPI


def init_process_group(backend: str = "mpi", init_method: str | None = None,
                       timeout: timedelta | float | None = None, world_size: int = -1,
                       rank: int = -1, *, allreduce: str = "mpi") -> None:
    """Join the job's process group (call once per rank, before any collective).

    Args:
        backend: only ``"mpi"``: ranks are the processes ``mpiexec`` started.
        init_method: accepted for PyTorch compatibility; must be None or ``"env://"``
            (MPI already knows where every rank is).
        timeout: how long a collective may wait before raising (default 5 minutes).
        world_size, rank: if given, checked against what ``mpiexec`` set up.
        allreduce: ``"mpi"`` (MPI's own Allreduce) or ``"ring"`` (the lesson's ring).
    """
    global _group
    if backend != "mpi":
        raise ValueError(
            f"backend {backend!r} is not available: teachgrad.distributed runs on MPI only. "
            'Fix: init_process_group(backend="mpi") and start the script with '
            "python -m teachgrad.distributed.run -n N script.py")
    if init_method not in (None, "env://"):
        raise ValueError(f"init_method {init_method!r} is not supported: MPI finds the ranks "
                         "itself; leave init_method out")
    if allreduce not in ALLREDUCE_ALGORITHMS:
        raise ValueError(f"allreduce must be one of {ALLREDUCE_ALGORITHMS}, got {allreduce!r}")
    seconds = _seconds(timeout if timeout is not None else _default_timeout())
    if _group is not None:
        raise RuntimeError("trying to initialize the default process group twice. "
                           "Fix: call destroy_process_group() first")
    MPI = _mpi()
    world = MPI.COMM_WORLD
    if world_size not in (-1, world.Get_size()) or rank not in (-1, world.Get_rank()):
        raise ValueError(
            f"world_size={world_size}, rank={rank} disagree with mpiexec, which started "
            f"{world.Get_size()} ranks and made this one rank {world.Get_rank()}. "
            "Fix: leave them out, or change -n")
    _group = _Group(world.Dup(), world.Dup(), world.Get_rank(), world.Get_size(), seconds,
                    allreduce)
    _failed_ranks.clear()
    _exited_ranks.clear()
    sys.excepthook = _report_failure
    atexit.register(_announce_exit, "its script ended")  # runs before mpi4py's MPI_Finalize
    timeline.start(_group.rank, _group.size)


def _default_timeout() -> float:
    env = os.environ.get("TEACHGRAD_DIST_TIMEOUT")
    return float(env) if env else DEFAULT_TIMEOUT.total_seconds()


def _seconds(timeout: timedelta | float) -> float:
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if not seconds > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    return seconds


def is_initialized() -> bool:
    return _group is not None


def is_available() -> bool:
    """True when mpi4py can be imported (as ``torch.distributed.is_available``)."""
    try:
        _mpi()
    except ImportError:
        return False
    return True


def group() -> _Group:
    if _group is None:
        raise RuntimeError("Default process group has not been initialized, please make sure "
                           "to call init_process_group.")
    return _group


def get_rank() -> int:
    return group().rank


def get_world_size() -> int:
    return group().size


def get_allreduce_algorithm() -> str:
    return group().allreduce


def destroy_process_group() -> None:
    """Leave the group (the MPI library itself stays up until the process exits)."""
    global _group
    g = group()
    _announce_exit("it called destroy_process_group()")
    timeline.stop()
    g.comm.Free()
    g.faults.Free()
    _group = None
    sys.excepthook = sys.__excepthook__


# --- waiting without hanging --------------------------------------------------------------

def wait(requests: Sequence[Any], what: str) -> None:
    """Wait for MPI ``requests``; raise if another rank failed or the timeout passes.

    It spins on ``Testall`` (MPICH moves large messages forward only while some
    MPI call runs, so sleeping here would slow the transfer), yielding the core
    to other processes between tries (ranks may outnumber cores), and looks for
    fault notices every few milliseconds.
    """
    MPI = _mpi()
    g = group()
    start = time.perf_counter()
    next_look = start
    while not MPI.Request.Testall(requests):
        now = time.perf_counter()
        if now >= next_look:
            raise_if_a_rank_failed(what)
            if now - start > g.timeout:
                raise DistributedError(f"rank {g.rank}: {what} timed out after {g.timeout:g} s: "
                                       + _who_is_missing(g))
            next_look = now + _CHECK_EVERY
        os.sched_yield()


def _who_is_missing(g: _Group) -> str:
    """The end of a timeout's message: the ranks that left the job, if any said so."""
    _collect_notices(g)
    gone = sorted(r for r in _exited_ranks if r != g.rank)
    if gone:
        how = "; ".join(f"rank {r}: {_exited_ranks[r]}" for r in gone)
        names = ", ".join(str(r) for r in gone)
        return (f"rank{'s' if len(gone) > 1 else ''} {names} left the job without joining it "
                f"({how}). Fix: make every rank call the same collectives in the same order "
                "(an early return or a rank-dependent if skips one on some ranks)")
    return ("another rank never joined it (it may have died, be stuck, or be running a "
            "different collective). Fix: make every rank call the same collectives in the same "
            "order; raise the timeout in init_process_group(timeout=...) if a rank is just slow")


def _announce_exit(how: str) -> None:
    """Tell every other rank that this one is leaving (once), so that a rank still waiting
    for it can name it when its collective times out."""
    g = _group
    if g is None or g.rank in _exited_ranks:
        return
    _exited_ranks[g.rank] = how
    requests = [g.faults.isend(how, dest=other, tag=_EXIT_TAG)
                for other in range(g.size) if other != g.rank]
    deadline = time.perf_counter() + 1.0  # a short message: sent at once unless MPI is gone
    MPI = _mpi()
    while requests and not MPI.Request.Testall(requests) and time.perf_counter() < deadline:
        time.sleep(0.001)


def raise_if_a_rank_failed(what: str) -> None:
    """Raise :class:`RankFailedError` if a fault notice from another rank has arrived."""
    g = group()
    _collect_notices(g)
    if _failed_ranks:
        # name the rank that failed on its own, not one that stopped because of it
        originals = [r for r, text in _failed_ranks.items()
                     if not text.startswith(RankFailedError.__name__)]
        failed = min(originals or _failed_ranks)
        raise RankFailedError(
            f"rank {failed} failed with {_failed_ranks[failed]}; rank {g.rank} stops too "
            f"(its {what} cannot complete without rank {failed})", failed)


def _collect_notices(g: _Group) -> None:
    MPI = _mpi()
    status = MPI.Status()
    while g.faults.Iprobe(source=MPI.ANY_SOURCE, tag=_FAULT_TAG, status=status):
        source = status.Get_source()
        _failed_ranks[source] = g.faults.recv(source=source, tag=_FAULT_TAG)
    while g.faults.Iprobe(source=MPI.ANY_SOURCE, tag=_EXIT_TAG, status=status):
        source = status.Get_source()
        _exited_ranks[source] = g.faults.recv(source=source, tag=_EXIT_TAG)


def _report_failure(exc_type: type, exc: BaseException, tb: Any) -> None:
    """The exception hook of a rank: print, tell the other ranks, then end the job.

    Every rank that fails — the first one, and those stopped because of it —
    prints its error, sends every other rank a notice, and waits until all the
    others have sent theirs (so that every rank has printed its own error) or
    ``TEACHGRAD_DIST_FAULT_GRACE`` seconds have passed (default 5: a rank busy
    computing, or already gone). Then it calls ``MPI_Abort``, so that no rank is
    left waiting forever.
    """
    MPI = _mpi()
    g = _group
    traceback.print_exception(exc_type, exc, tb)
    if g is None:
        MPI.COMM_WORLD.Abort(1)
        return
    summary = f"{exc_type.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    sys.stderr.write(f"[teachgrad.distributed] rank {g.rank} failed with {summary}\n")
    sys.stderr.flush()
    sys.stdout.flush()
    for other in range(g.size):
        if other != g.rank:
            g.faults.isend(summary, dest=other, tag=_FAULT_TAG)
    deadline = time.perf_counter() + float(os.environ.get("TEACHGRAD_DIST_FAULT_GRACE", 5))
    while time.perf_counter() < deadline:
        _collect_notices(g)
        if len(_failed_ranks) == g.size - 1:
            break
        time.sleep(0.01)
    timeline.dump()
    g.comm.Abort(1)


# --- small helpers for the collectives ------------------------------------------------------

def allgather_object(obj: Any, what: str) -> list[Any]:
    """Every rank's ``obj`` (pickled), gathered on every rank, with :func:`wait`'s safety."""
    g = group()
    data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    sizes = np.empty(g.size, dtype=np.int64)
    wait([g.comm.Iallgather(np.array([data.size], dtype=np.int64), sizes)], what)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    gathered = np.empty(int(sizes.sum()), dtype=np.uint8)
    MPI = _mpi()
    wait([g.comm.Iallgatherv(data, [gathered, (sizes, offsets), MPI.BYTE])], what)
    return [pickle.loads(gathered[o:o + s].tobytes()) for o, s in zip(offsets, sizes)]

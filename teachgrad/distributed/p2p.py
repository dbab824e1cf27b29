"""Point-to-point messages only: the communicator a learner's ring all-reduce receives.

A ring all-reduce is built from the calls every rank makes to its neighbours:
``Sendrecv``, or ``Isend``/``Irecv`` and a wait. :class:`PointToPoint` offers exactly
those calls of an mpi4py communicator, with mpi4py's names and arguments, and
nothing else (no ``Allreduce``: that is what the learner is building). Every wait goes
through the process group's :func:`~.process_group.wait`, so a rank whose partner
failed stops with an error naming that partner instead of hanging, and a message
that never comes is a timeout, not a frozen job.

It also counts what this rank sent (messages and values), which the chapter prints
to show that a plugged ring really ran on every rank.

``MPI`` here is the little of mpi4py's ``MPI`` a ring needs: ``ANY_SOURCE``,
``ANY_TAG`` and ``MPI.Request.Waitall(requests)``, which works on these requests and on
the simulated ranks' of the chapter's checker alike (it waits for each in turn).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from . import ring

#: The calls a learner's ring may make on its communicator.
CALLS = ("Get_rank", "Get_size", "Sendrecv", "Isend", "Irecv")
_ANY_SOURCE, _ANY_TAG = -2, -1  # MPICH's values (translated below for any MPI library)


class _RequestCalls:
    """``MPI.Request``'s class methods a ring uses."""

    @staticmethod
    def Waitall(requests: Sequence[Any], statuses: Any = None) -> None:
        for request in requests:
            request.Wait()


class MPI:
    """The part of mpi4py's ``MPI`` a learner's ring may use."""

    ANY_SOURCE = _ANY_SOURCE
    ANY_TAG = _ANY_TAG
    Request = _RequestCalls


def no_such_call(name: str) -> str:
    """The message for a call the communicator does not offer."""
    return (f"comm.{name} is not offered here: the ring all-reduce is built from "
            f"point-to-point messages, and the communicator it receives has only "
            f"{', '.join(CALLS)} (and .Wait() on what Isend/Irecv return)")


def buffer_of(buf: Any, call: str) -> np.ndarray:
    """The numpy array of a message buffer (an array, or mpi4py's ``[array, type]``)."""
    if isinstance(buf, (list, tuple)) and buf:
        buf = buf[0]
    if not isinstance(buf, np.ndarray):
        raise TypeError(f"{call}: a message buffer is a numpy array, got {type(buf).__name__}")
    if not buf.flags.c_contiguous:
        raise ValueError(f"{call}: the buffer is not contiguous (MPI sends contiguous memory): "
                         "send a slice of a 1-D array, or np.ascontiguousarray(...) a copy")
    return buf


class Request:
    """An ``Isend``/``Irecv`` under way; ``Wait()`` finishes it (never hangs)."""

    def __init__(self, request: Any, wait: Callable, what: str) -> None:
        self._request, self._wait, self._what = request, wait, what

    def Wait(self, status: Any = None) -> bool:
        self._wait([self._request], self._what)
        return True

    def Test(self, status: Any = None) -> bool:
        return bool(self._request.Test())

    Waitall = staticmethod(_RequestCalls.Waitall)


class PointToPoint:
    """The point-to-point calls of an mpi4py communicator, each wait safe from hangs.

    Args:
        comm: an mpi4py communicator (the process group's).
        wait: ``wait(requests, what)`` that raises instead of hanging; by default the
            process group's.
    """

    def __init__(self, comm: Any, wait: Callable | None = None) -> None:
        if wait is None:
            from .process_group import wait
        self._comm, self._wait = comm, wait
        self.messages_sent = 0
        self.values_sent = 0

    def Get_rank(self) -> int:
        return self._comm.Get_rank()

    def Get_size(self) -> int:
        return self._comm.Get_size()

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        array = buffer_of(buf, "Isend")
        self.messages_sent += 1
        self.values_sent += array.size
        return Request(self._comm.Isend(array, dest=dest, tag=tag), self._wait,
                       f"Isend to rank {dest} in the plugged ring")

    def Irecv(self, buf: Any, source: int = _ANY_SOURCE, tag: int = _ANY_TAG) -> Request:
        from mpi4py import MPI as real
        array = buffer_of(buf, "Irecv")
        source = real.ANY_SOURCE if source == _ANY_SOURCE else source
        tag = real.ANY_TAG if tag == _ANY_TAG else tag
        return Request(self._comm.Irecv(array, source=source, tag=tag), self._wait,
                       f"receive from rank {source} in the plugged ring")

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = _ANY_SOURCE, recvtag: int = _ANY_TAG, status: Any = None) -> None:
        if recvbuf is None:
            raise TypeError("Sendrecv needs a recvbuf: the array the incoming chunk lands in")
        MPI.Request.Waitall([self.Irecv(recvbuf, source, recvtag),
                             self.Isend(sendbuf, dest, sendtag)])

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(no_such_call(name))


def ring_sum(data: np.ndarray, comm: Any) -> None:
    """The engine's ring, summing ``data`` in place over the ranks of ``comm`` (a
    :class:`PointToPoint` or anything with its calls): what the part
    ``distributed.ring_all_reduce`` runs when nothing is plugged."""
    ring.ring_all_reduce(data, np.add, comm, lambda requests, what: MPI.Request.Waitall(requests))


def ring_namespace(mpi: Any = MPI) -> dict:
    """The global names a learner's ring finds on a rank (and in the chapter's checker):
    numpy as ``np``, ``math``, the engine's ``chunk_bounds``, ``send_chunk`` and
    ``recv_chunk`` (the schedule of exercise 14.2) and ``MPI`` (see the module's text)."""
    return {"np": np, "math": math, "chunk_bounds": ring.chunk_bounds,
            "send_chunk": ring.send_chunk, "recv_chunk": ring.recv_chunk, "MPI": mpi}


def point_to_point(group: Any) -> PointToPoint:
    """The process group's :class:`PointToPoint` (one per group: its counts add up)."""
    if group.p2p is None:
        group.p2p = PointToPoint(group.comm)
    return group.p2p

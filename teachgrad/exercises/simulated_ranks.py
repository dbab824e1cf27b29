"""Ranks in one process: a thread per rank and a communicator that watches every message.

The checker of the ring all-reduce (14.3) runs the learner's function on ``p``
simulated ranks, many times, on inputs drawn by hypothesis. Starting MPI jobs for
each would take minutes; threads take milliseconds. :class:`SimulatedComm` offers
the calls a real rank's communicator offers the learner
(:data:`teachgrad.distributed.p2p.CALLS`), with MPI's semantics where a ring
depends on them:

* sends are buffered (they complete at once, as MPI's small messages do), so a
  ring whose ranks all send before receiving works, as it does on MPI;
* a receive takes the first message from its source with a matching tag, and
  receives match in the order they were posted (MPI's non-overtaking rule);
* a message longer than its receive buffer, or of another dtype, is an error.

What real MPI cannot give is also recorded: every message's sender, receiver and
size (is this a ring?), and a **deadlock** is seen the moment it happens: when
every rank still running waits for a message nobody queued, the run stops with a
:class:`~.core.Mismatch` saying who waited for whom, instead of hanging.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..distributed import p2p
from .core import Mismatch


@dataclass
class Message:
    source: int
    dest: int
    tag: int
    data: np.ndarray
    taken: bool = False


@dataclass
class _Receive:
    """A posted receive, waiting for its message."""

    rank: int
    source: int
    tag: int
    buffer: np.ndarray
    call: int           # the rank's communication call that posted it (1, 2, ...)
    done: bool = False


class Deadlock(Mismatch):
    """Every running rank waits for a message that nobody will send."""


class TooSlow(Mismatch):
    """A rank neither returned nor communicated within the time allowed."""


class _Stop(BaseException):
    """Ends a rank's thread when another rank failed (not the learner's doing)."""


@dataclass
class World:
    """The shared state of ``size`` simulated ranks."""

    size: int
    timeout: float = 10.0
    lock: threading.Condition = field(default_factory=threading.Condition)
    queued: list = field(default_factory=list)       # every Message, in the order sent
    posted: list = field(default_factory=list)       # every _Receive, in the order posted
    waiting: dict = field(default_factory=dict)      # rank -> the _Receives it waits for
    finished: set = field(default_factory=set)
    failure: BaseException | None = None
    calls: list = field(default_factory=list)        # per rank: communication calls made

    def __post_init__(self) -> None:
        self.calls = [0] * self.size

    def sent_by(self, rank: int) -> list[Message]:
        return [m for m in self.queued if m.source == rank]

    # --- under the lock ------------------------------------------------------------------

    def _match(self) -> None:
        """Give posted receives their messages: in the order posted, the oldest first."""
        for receive in self.posted:
            if receive.done:
                continue
            for message in self.queued:
                if (not message.taken and message.dest == receive.rank
                        and receive.source in (p2p.MPI.ANY_SOURCE, message.source)
                        and receive.tag in (p2p.MPI.ANY_TAG, message.tag)):
                    _deliver(message, receive)
                    break

    def wait(self, rank: int, receives: list[_Receive]) -> None:
        """Block ``rank`` until ``receives`` are done; raise on a deadlock or a failure."""
        deadline = time.monotonic() + self.timeout
        with self.lock:
            while True:
                self._match()
                if self.failure is not None:
                    raise _Stop()
                if all(r.done for r in receives):
                    self.waiting.pop(rank, None)
                    return
                self.waiting[rank] = [r for r in receives if not r.done]
                running = set(range(self.size)) - self.finished
                blocked = {r for r, pending in self.waiting.items()
                           if not all(x.done for x in pending)}
                if running <= blocked:
                    raise self._deadlock(rank)
                if time.monotonic() > deadline:
                    raise TooSlow(f"rank {rank} waited {self.timeout:g} s for a message",
                                   hint="a rank kept computing without sending (a loop that "
                                        "never ends?)", show_values=False)
                self.lock.wait(0.05)

    def _deadlock(self, rank: int) -> Deadlock:
        def waits(r: int) -> str:
            receive = self.waiting[r][0]
            source = ("any rank" if receive.source == p2p.MPI.ANY_SOURCE
                      else f"rank {receive.source}")
            return (f"rank {r} waited for a message from {source} that never came "
                    f"(its communication call {receive.call})")
        others = [waits(r) for r in sorted(self.waiting) if r != rank]
        done = sorted(self.finished)
        ended = f"; rank{'s' if len(done) > 1 else ''} {', '.join(map(str, done))} had " \
                "already returned" if done else ""
        return Deadlock(f"deadlock: {waits(rank)}" + "".join(f"; {o}" for o in others) + ended,
                        hint="each send needs a receive on the rank it goes to, at the same "
                             "step: at every step of the ring, send to the right neighbour "
                             "and receive from the left one (Sendrecv does both at once)",
                        show_values=False)

    def fail(self, error: BaseException) -> None:
        with self.lock:
            if self.failure is None:
                self.failure = error
            self.lock.notify_all()

    def finish(self, rank: int) -> None:
        with self.lock:
            self.finished.add(rank)
            self.lock.notify_all()


def _deliver(message: Message, receive: _Receive) -> None:
    if message.data.dtype != receive.buffer.dtype:
        raise Mismatch(f"rank {message.source} sent {message.data.dtype} values to rank "
                       f"{receive.rank}, which received them into a {receive.buffer.dtype} "
                       "buffer", hint="receive into a buffer of data's dtype "
                                      "(np.empty(size, dtype=data.dtype))", show_values=False)
    if message.data.size > receive.buffer.size:
        raise Mismatch(f"rank {message.source} sent {message.data.size} values to rank "
                       f"{receive.rank}, whose receive buffer holds {receive.buffer.size} "
                       "(MPI: message truncated)",
                       hint="receive each chunk into a buffer of that chunk's length "
                            "(chunk_bounds gives each chunk's start and stop)",
                       show_values=False)
    receive.buffer[:message.data.size] = message.data
    message.taken = receive.done = True


class _SimulatedRequest:
    def __init__(self, world: World, rank: int, receive: _Receive | None) -> None:
        self._world, self._rank, self._receive = world, rank, receive

    def Wait(self, status: Any = None) -> bool:
        if self._receive is not None:
            self._world.wait(self._rank, [self._receive])
        return True

    def Test(self, status: Any = None) -> bool:
        with self._world.lock:
            self._world._match()
            return self._receive is None or self._receive.done

    Waitall = staticmethod(p2p.MPI.Request.Waitall)


class SimulatedComm:
    """One simulated rank's communicator: mpi4py's point-to-point calls, watched."""

    def __init__(self, world: World, rank: int) -> None:
        self._world, self._rank = world, rank

    def Get_rank(self) -> int:
        return self._rank

    def Get_size(self) -> int:
        return self._world.size

    def _check_rank(self, rank: Any, what: str) -> int:
        if not isinstance(rank, (int, np.integer)) or not (
                0 <= rank < self._world.size or (what == "source"
                                                 and rank == p2p.MPI.ANY_SOURCE)):
            raise ValueError(f"{what}={rank!r} is not a rank: they run from 0 to "
                             f"{self._world.size - 1}")
        return int(rank)

    def _count_call(self) -> int:
        with self._world.lock:
            self._world.calls[self._rank] += 1
            return self._world.calls[self._rank]

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> _SimulatedRequest:
        array = p2p.buffer_of(buf, "Isend").copy()  # buffered: the sender may reuse buf
        dest = self._check_rank(dest, "dest")
        self._count_call()
        with self._world.lock:
            self._world.queued.append(Message(self._rank, dest, tag, array))
            self._world.lock.notify_all()
        return _SimulatedRequest(self._world, self._rank, None)

    def Irecv(self, buf: Any, source: int = p2p.MPI.ANY_SOURCE,
              tag: int = p2p.MPI.ANY_TAG) -> _SimulatedRequest:
        array = p2p.buffer_of(buf, "Irecv")
        source = self._check_rank(source, "source")
        receive = _Receive(self._rank, source, tag, array, self._count_call())
        with self._world.lock:
            self._world.posted.append(receive)
        return _SimulatedRequest(self._world, self._rank, receive)

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = p2p.MPI.ANY_SOURCE, recvtag: int = p2p.MPI.ANY_TAG,
                 status: Any = None) -> None:
        if recvbuf is None:
            raise TypeError("Sendrecv needs a recvbuf: the array the incoming chunk lands in")
        receive = self.Irecv(recvbuf, source, recvtag)
        self.Isend(sendbuf, dest, sendtag)
        receive.Wait()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise Mismatch(f"your ring called comm.{name}", hint=p2p.no_such_call(name),
                       show_values=False)


def run_ranks(fn: Callable, arrays: list[np.ndarray], timeout: float = 10.0
              ) -> tuple[World, list[Any]]:
    """Run ``fn(arrays[r], comm_r)`` on ``len(arrays)`` simulated ranks, one thread each.

    Returns the world (its messages) and each rank's return value. The first error
    of any rank is raised here: the learner's exception as it is, or a Mismatch.
    """
    world = World(len(arrays), timeout)
    results: list[Any] = [None] * len(arrays)

    def rank_main(rank: int) -> None:
        try:
            results[rank] = fn(arrays[rank], SimulatedComm(world, rank))
        except _Stop:
            return
        except BaseException as error:  # noqa: BLE001  (handed to the checking thread)
            world.fail(error)
            return
        world.finish(rank)

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True,
                                name=f"simulated rank {r}") for r in range(len(arrays))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 1.0)
    if world.failure is not None:
        raise world.failure
    if any(thread.is_alive() for thread in threads):
        world.fail(_Stop())
        stuck = [r for r, t in enumerate(threads) if t.is_alive()]
        raise TooSlow(f"rank{'s' if len(stuck) > 1 else ''} {', '.join(map(str, stuck))} "
                       f"did not return within {timeout:g} s", hint="a loop that never ends?",
                       show_values=False)
    return world, results

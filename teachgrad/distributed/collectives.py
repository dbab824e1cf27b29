"""Collectives on tensors, spelt as in ``torch.distributed``: all_reduce, broadcast, ...

Each works **in place** on CPU tensors (MPI sends the bytes of their numpy
arrays), checks first that every rank passed the same shape and dtype, and
waits through :func:`process_group.wait`, so a failed or missing rank
surfaces as an error instead of a hang. ``async_op=True`` returns a
:class:`Work` to ``wait()`` on later, as in PyTorch.
"""
from __future__ import annotations

import time
from enum import Enum
from typing import Any, Callable, Sequence

import numpy as np

from ..autograd import parts
from . import p2p
from . import process_group as pg
from . import ring, timeline


class ReduceOp(Enum):
    """How ``all_reduce`` combines the ranks' values."""

    SUM = "sum"
    AVG = "avg"   # MPI has no average: a sum, then a division by the world size
    MAX = "max"
    MIN = "min"
    PRODUCT = "product"


_UFUNCS = {"sum": np.add, "avg": np.add, "max": np.maximum, "min": np.minimum,
           "product": np.multiply}


def _mpi_op(op: ReduceOp) -> Any:
    MPI = pg._mpi()
    return {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN,
            "product": MPI.PROD}[op.value]


class Work:
    """A collective under way; ``wait()`` finishes it (copies results into place)."""

    def __init__(self, name: str, requests: list, finish: Callable[[], None], nbytes: int,
                 called: float | None = None) -> None:
        self._name, self._requests, self._finish = name, requests, finish
        self._nbytes = nbytes
        # the recorded interval starts when the collective was called: its shape check
        # already waits for every rank, and a straggler's partners wait there
        self._start = time.perf_counter() if called is None else called
        self._done = False

    def is_completed(self) -> bool:
        if not self._done and self._requests:
            return bool(pg._mpi().Request.Testall(self._requests))
        return self._done or not self._requests

    def wait(self, timeout: Any = None) -> bool:
        if not self._done:
            pg.wait(self._requests, self._name)
            self._finish()
            self._done = True
            timeline.record("comm", self._name, self._start, time.perf_counter(), self._nbytes)
        return True


def _check_tensor(tensor: Any, what: str) -> np.ndarray:
    from ..tensor import Tensor
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{what} expects a teachgrad Tensor, got {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise ValueError(
            f"{what}: the mpi backend sends CPU tensors only, and this one is on "
            f"{tensor.device}. Fix: pass tensor.cpu() and copy the result back")
    return tensor._array


def _check_group(group: Any) -> None:
    if group is not None:
        raise ValueError("only the default group (group=None) exists in teachgrad.distributed")


def _check_same_everywhere(what: str, arrays: Sequence[np.ndarray], extra: Any = None) -> None:
    """Raise on every rank, with every rank's shapes, if the ranks disagree."""
    shapes = " ".join(str(list(a.shape)) for a in arrays)
    mine = f"shape {shapes} {arrays[0].dtype if arrays else ''}"
    if extra is not None:
        mine += f" ({extra})"
    everyone = pg.allgather_object(mine, f"{what} (shape check)")
    if any(other != everyone[0] for other in everyone):
        listing = "; ".join(f"rank {r}: {text}" for r, text in enumerate(everyone))
        raise ValueError(
            f"{what}: the ranks passed different tensors ({listing}). Every rank must call "
            f"{what} with tensors of the same shape and dtype")


def _contiguous(array: np.ndarray) -> np.ndarray:
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def _finish_into(tensor: Any, array: np.ndarray, buffer: np.ndarray,
                 scale: float | None = None) -> Callable[[], None]:
    """What ``wait()`` does at the end: scale (AVG), copy back if a copy was sent."""
    def finish() -> None:
        if scale is not None:
            np.divide(buffer, scale, out=buffer, casting="unsafe")
        if buffer is not array:
            array[...] = buffer
        tensor._bump_version()
    return finish


def _done_or_wait(work: Work, async_op: bool) -> Work | None:
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, group: Any = None,
               async_op: bool = False, *, algorithm: str | None = None) -> Work | None:
    """Combine ``tensor`` across all ranks, in place: every rank ends with the result.

    ``algorithm`` is ``"mpi"`` (MPI's Allreduce) or ``"ring"`` (the lesson's own
    ring); by default the one chosen in ``init_process_group(allreduce=...)``.
    """
    called = time.perf_counter()
    array = _check_tensor(tensor, "all_reduce")
    _check_group(group)
    if not isinstance(op, ReduceOp):
        raise TypeError(f"op must be a ReduceOp (ReduceOp.SUM, AVG, MAX, MIN), got {op!r}")
    algorithm = algorithm or pg.get_allreduce_algorithm()
    if algorithm not in pg.ALLREDUCE_ALGORITHMS:
        raise ValueError(f"algorithm must be one of {pg.ALLREDUCE_ALGORITHMS}, got {algorithm!r}")
    if op is ReduceOp.AVG and array.dtype.kind not in "fc":
        raise ValueError(f"ReduceOp.AVG needs a floating-point tensor, got {tensor.dtype}")
    _check_same_everywhere("all_reduce", [array], op.value)
    work = launch_all_reduce(tensor, op, algorithm, "all_reduce", called)
    return _done_or_wait(work, async_op)


def launch_all_reduce(tensor: Any, op: ReduceOp, algorithm: str, name: str,
                      called: float | None = None) -> Work:
    """Start an all-reduce of a tensor already checked (DDP's buckets come straight here);
    ``called`` is when the caller's collective began (its recorded interval starts there)."""
    pg.raise_if_a_rank_failed(name)
    array = tensor._array
    buffer = _contiguous(array)
    scale = pg.get_world_size() if op is ReduceOp.AVG else None
    finish = _finish_into(tensor, array, buffer, scale)
    if algorithm == "ring":  # runs to the end now: the lesson's ring is not asynchronous
        work = Work(f"{name} (ring)", [], finish, buffer.nbytes, called)
        if RING_PART.fn is not None and op in (ReduceOp.SUM, ReduceOp.AVG):
            _learners_ring(buffer.reshape(-1))
        else:
            ring.ring_all_reduce(buffer.reshape(-1), _UFUNCS[op.value], pg.group().comm, pg.wait)
        return work
    MPI = pg._mpi()
    request = pg.group().comm.Iallreduce(MPI.IN_PLACE, buffer, _mpi_op(op))
    return Work(name, [request], finish, buffer.nbytes, called)


# --- the learner's ring (tg.exercises.plug("distributed.ring_all_reduce", fn)) ------------

RING_PART = parts.declare(
    "distributed.ring_all_reduce",
    receives="(data, comm): this rank's 1-D contiguous float array and a communicator with "
             "mpi4py's point-to-point calls (Get_rank, Get_size, Sendrecv, Isend, Irecv)",
    returns="None (or data itself): data summed over the ranks, in place, on every rank; "
            "all_reduce(algorithm='ring') and DDP run it for SUM and AVG (AVG divides "
            "afterwards), the engine's ring for MAX, MIN and PRODUCT",
    engine=p2p.ring_sum)


def _learners_ring(data: np.ndarray) -> None:
    """Sum ``data`` with the plugged ring, then check what can be checked on one rank."""
    had_nan = bool(np.isnan(data).any())
    try:
        result = RING_PART.call(data, p2p.point_to_point(pg.group()))
    except parts.PartError as error:
        if isinstance(error.__cause__, pg.RankFailedError):
            raise error.__cause__ from None  # another rank failed first: name that one
        raise
    if result is not None and not (isinstance(result, np.ndarray) and result.shape == data.shape
                                   and result.dtype == data.dtype
                                   and np.shares_memory(result, data)):
        got = (f"a new array ({result.dtype}, {result.size} values)"
               if isinstance(result, np.ndarray) else f"a {type(result).__name__}")
        raise RING_PART.reject(got, "None: write the sum into data itself, in place (DDP "
                                    "reads its buckets back from there)")
    if not had_nan and np.isnan(data).any():
        where = np.flatnonzero(np.isnan(data))
        raise RING_PART.reject(f"NaN at {where.size} of {data.size} positions (first at "
                               f"{where[0]}) where no rank's input had one",
                               "the elementwise sum of the ranks' data (a chunk received into "
                               "memory never written?)")


def broadcast(tensor: Any, src: int, group: Any = None, async_op: bool = False) -> Work | None:
    """Copy rank ``src``'s ``tensor`` into every other rank's ``tensor``, in place."""
    called = time.perf_counter()
    array = _check_tensor(tensor, "broadcast")
    _check_group(group)
    _check_rank(src, "src")
    _check_same_everywhere("broadcast", [array], src)
    buffer = _contiguous(array)
    request = pg.group().comm.Ibcast(buffer, root=src)
    return _done_or_wait(Work("broadcast", [request], _finish_into(tensor, array, buffer),
                              buffer.nbytes, called), async_op)


def all_gather(tensor_list: list, tensor: Any, group: Any = None,
               async_op: bool = False) -> Work | None:
    """Fill ``tensor_list[r]`` with rank ``r``'s ``tensor``, on every rank."""
    called = time.perf_counter()
    array = _check_tensor(tensor, "all_gather")
    _check_group(group)
    outputs = _check_list(tensor_list, array, "all_gather", "tensor_list")
    _check_same_everywhere("all_gather", [array])
    gathered = np.empty((len(outputs),) + array.shape, dtype=array.dtype)
    request = pg.group().comm.Iallgather(_contiguous(array), gathered)

    def finish() -> None:
        for out, piece in zip(tensor_list, gathered):
            out._array[...] = piece
            out._bump_version()
    return _done_or_wait(Work("all_gather", [request], finish, gathered.nbytes, called),
                         async_op)


def reduce_scatter(output: Any, input_list: list, op: ReduceOp = ReduceOp.SUM,
                   group: Any = None, async_op: bool = False) -> Work | None:
    """Reduce ``input_list[r]`` across ranks into rank ``r``'s ``output``."""
    called = time.perf_counter()
    array = _check_tensor(output, "reduce_scatter")
    _check_group(group)
    if not isinstance(op, ReduceOp):
        raise TypeError(f"op must be a ReduceOp, got {op!r}")
    inputs = _check_list(input_list, array, "reduce_scatter", "input_list")
    _check_same_everywhere("reduce_scatter", [array], op.value)
    send = np.ascontiguousarray(np.stack(inputs))
    buffer = _contiguous(array)
    request = pg.group().comm.Ireduce_scatter_block(send, buffer, _mpi_op(op))
    scale = pg.get_world_size() if op is ReduceOp.AVG else None
    return _done_or_wait(Work("reduce_scatter", [request],
                              _finish_into(output, array, buffer, scale), send.nbytes, called),
                         async_op)


def barrier(group: Any = None, async_op: bool = False) -> Work | None:
    """Wait until every rank has reached this call."""
    _check_group(group)
    request = pg.group().comm.Ibarrier()
    return _done_or_wait(Work("barrier", [request], lambda: None, 0), async_op)


def _check_rank(rank: Any, name: str) -> None:
    size = pg.get_world_size()
    if not isinstance(rank, (int, np.integer)) or not 0 <= rank < size:
        raise ValueError(f"{name}={rank!r} is not a rank of this group (0..{size - 1})")


def _check_list(tensors: Any, like: np.ndarray, what: str, name: str) -> list[np.ndarray]:
    size = pg.get_world_size()
    if not isinstance(tensors, (list, tuple)) or len(tensors) != size:
        got = len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__
        raise ValueError(f"{what}: {name} must be a list of world_size={size} tensors, got {got}")
    arrays = [_check_tensor(t, what) for t in tensors]
    for r, a in enumerate(arrays):
        if a.shape != like.shape or a.dtype != like.dtype:
            raise ValueError(f"{what}: {name}[{r}] has shape {list(a.shape)} {a.dtype}, but the "
                             f"tensor has shape {list(like.shape)} {like.dtype}: they must match")
    return arrays

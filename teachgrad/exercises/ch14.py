"""Checkers for chapter 14, *Data parallelism*: a gradient average, the ring's schedule,
the ring all-reduce itself (which then runs inside DDP), a sampler's shards.

Most run in the notebook's own process: each checks the learner's function against
teachgrad's own implementation on the cases the chapter shows plus randomised ones,
and names the usual mistakes. The ring all-reduce (14.3) is property-tested on
simulated ranks (threads, :mod:`.simulated_ranks`), then runs on real ranks under
``mpiexec`` inside DDP (:mod:`.ring_ddp`).
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import numpy as np

import teachgrad as tg
from teachgrad.autograd import parts
from teachgrad.distributed import p2p, ring, shipping
from teachgrad.utils.data import DistributedSampler

from .building import property_test
from .core import (
    Feedback, Mismatch, Test, check, counting_backward, expect_close, expect_true, to_numpy,
    unseen_rng,
)
from .ring_ddp import ddp_with_your_ring, on_real_ranks  # noqa: F401  (the chapter calls it)
from .simulated_ranks import TooSlow, World, run_ranks
from .withheld import withheld


def _random_sizes(count: int, low: int, high: int) -> list[int]:
    """Sizes drawn afresh on every run: inputs the learner has not seen."""
    return unseen_rng().integers(low, high, size=count).tolist()


# --- 14.1 the gradient average ----------------------------------------------------------

def _mse_gradient(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    return 2 * X.T @ (X @ w - y) / len(y)


def _average_hint(got: np.ndarray, X: np.ndarray, y: np.ndarray, w0: np.ndarray, p: int,
                  backwards: int) -> str:
    shards = [_mse_gradient(X[r::p], y[r::p], w0) for r in range(p)]
    average, full = np.mean(shards, axis=0), _mse_gradient(X, y, w0)
    if got.shape != average.shape:
        return "return one gradient of w's shape: the average over the ranks"
    if np.allclose(got, p * average):
        return "you summed the ranks' gradients: divide by world_size (ReduceOp.AVG)"
    if np.allclose(got, full) and not np.allclose(full, average):
        return ("that is the full-batch gradient: here the shards have different sizes "
                f"({', '.join(str(len(y[r::p])) for r in range(p))} rows), and the ranks "
                "average their own gradients, which then differs from it")
    if np.allclose(got, np.cumsum(shards, axis=0).mean(axis=0)) or np.allclose(
            got, np.mean(shards, axis=0) + 1.0 / p):
        return ("w.grad kept adding up: each rank starts from a zero gradient (w.grad = None "
                "before each backward)")
    if np.allclose(got, average / p):
        return ("each rank's loss is the mean over *its* shard: average the ranks' gradients "
                "once, not twice")
    if any(np.allclose(got, g) for g in shards):
        return "that is one rank's gradient: average all of them"
    if backwards != p:
        return f"one backward() per rank: {p} in all, you ran {backwards}"
    return "each rank: rows r, r + p, ...; the gradient of the mean loss over them; then average"


@contextlib.contextmanager
def _counting_gradient_passes() -> Iterator[list[int]]:
    """Count backward passes: ``.backward()`` and ``tg.autograd.grad`` calls alike."""
    from teachgrad import autograd

    original = autograd.grad
    with counting_backward() as count:
        def counted_grad(*args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            return original(*args, **kwargs)
        autograd.grad = counted_grad
        try:
            yield count
        finally:
            autograd.grad = original


def check_data_parallel_gradient(data_parallel_gradient: Callable) -> Feedback:
    """Exercise 14.1: the average of the per-rank gradients, each from its own backward."""

    def make(n: int, d: int, p: int, seed: int, stale: bool) -> Test:
        rng = np.random.default_rng(seed)
        X, y, w0 = rng.normal(size=(n, d)), rng.normal(size=n), rng.normal(size=d)

        def run() -> None:
            w = tg.tensor(w0, dtype=tg.float64, requires_grad=True)
            if stale:  # a gradient left over from an earlier step
                (w * w).sum().backward()
            with _counting_gradient_passes() as backwards:
                got = data_parallel_gradient(w, tg.tensor(X), tg.tensor(y), p)
            expect_true(got is not None, "your function returned None",
                        hint="return the averaged gradient (a tensor or array of w's shape)")
            got_np = np.asarray(to_numpy(got), dtype=np.float64)
            want = np.mean([_mse_gradient(X[r::p], y[r::p], w0) for r in range(p)], axis=0)
            if got_np.shape != want.shape or not np.allclose(got_np, want, rtol=1e-6, atol=1e-9):
                raise Mismatch("wrong averaged gradient", want, got_np,
                               _average_hint(got_np, X, y, w0, p, backwards[0]))
            expect_true(backwards[0] == p,
                        f"the right numbers, from {backwards[0]} backward pass(es) for {p} ranks",
                        hint="play every rank: one backward() of its own mean loss each")
        sizes = sorted({len(y[r::p]) for r in range(p)})
        shape = "equal shards" if len(sizes) == 1 else f"shards of {sizes[0]} and {sizes[-1]} rows"
        return Test(f"{n} samples, {d} weights, {p} ranks ({shape})"
                    + (", w.grad not empty at the start" if stale else ""), run)

    rng = unseen_rng()
    fixed = [(8, 3, 2, 0, False), (12, 2, 3, 1, False), (10, 3, 4, 2, False), (9, 2, 3, 3, True)]
    randomised = [(int(rng.integers(p, 4 * p)), int(rng.integers(1, 6)), p,
                   int(rng.integers(1 << 30)), bool(p % 2)) for p in _random_sizes(3, 2, 7)]
    return check("14.1", [make(*c) for c in fixed + randomised], candidate=data_parallel_gradient,
                 solved="the ranks' gradients, averaged: with equal shards it is the full-batch "
                        "gradient, and synchronous data parallelism is ordinary SGD on the "
                        "whole batch.")


# --- 14.2 the ring's schedule -----------------------------------------------------------

def _schedule_hint(send_chunk: Callable, phase: str, step: int, rank: int, p: int) -> str:
    got = send_chunk(phase, step, rank, p)
    if isinstance(got, (int, np.integer)) and not 0 <= got < p:
        return f"chunk numbers run from 0 to {p - 1}: take the result modulo world_size"
    if phase == "all-gather" and got == ring.send_chunk("reduce-scatter", step, rank, p):
        return ("in the all-gather each rank starts with the chunk it has just finished, "
                "(rank + 1) mod p, not its own: shift the reduce-scatter formula by one")
    if got == (rank + step) % p or got == (rank + 1 + step) % p:
        return ("the data travels to the right, so at each step a rank passes on what it "
                "received from its left: subtract the step, don't add it")
    return ("at step s of the reduce-scatter, rank r sends chunk (r - s) mod p; in the "
            "all-gather it sends (r + 1 - s) mod p")


def check_ring_send_chunk(send_chunk: Callable) -> Feedback:
    """Exercise 14.2: which chunk rank ``rank`` sends at ``step`` of ``phase``."""

    def schedule(p: int) -> Test:
        def run() -> None:
            for phase in ring.PHASES:
                for step in range(p - 1):
                    for rank in range(p):
                        want = ring.send_chunk(phase, step, rank, p)
                        with _withhold_ring():
                            got = send_chunk(phase, step, rank, p)
                        if got != want:
                            raise Mismatch(
                                f"wrong chunk for rank {rank} at {phase} step {step}", want,
                                got, _schedule_hint(send_chunk, phase, step, rank, p))
            with _withhold_ring():
                _ring_reduces_everything(send_chunk, p)
        return Test(f"world_size = {p}: every phase, step and rank", run)

    sizes = [2, 3, 4, 16] + _random_sizes(3, 5, 40)
    return check("14.2", [schedule(p) for p in sizes], candidate=send_chunk,
                 solved="your schedule sends every chunk round the ring once to be summed and "
                        "once to be shared: every rank ends with the full sum.")


def _withhold_ring():
    return withheld((ring, "send_chunk", "ring.send_chunk"),
                    (ring, "ring_schedule", "ring.ring_schedule"))


def _ring_reduces_everything(send_chunk: Callable, p: int) -> None:
    """Play the learner's schedule (numpy, one value per chunk): every rank must get the sum."""
    values = [np.eye(p)[r] * (r + 1) for r in range(p)]  # rank r holds r+1 in chunk r
    for phase in ring.PHASES:
        for step in range(p - 1):
            sent = [(send_chunk(phase, step, r, p), values[r].copy()) for r in range(p)]
            for r in range(p):
                chunk, message = sent[(r - 1) % p]
                if phase == "reduce-scatter":
                    values[r][chunk] += message[chunk]
                else:
                    values[r][chunk] = message[chunk]
    expect_close(values[0], np.arange(1, p + 1), what="sum rank 0 holds after the ring",
                 hint="each chunk must visit every rank once in each phase")


# --- 14.3 the ring all-reduce, then inside DDP ----------------------------------------

RING_PART = "distributed.ring_all_reduce"


def _as_the_ranks_run_it(ring_all_reduce: Callable) -> Callable:
    """The learner's function defined from its source among the names the ranks provide,
    exactly as each rank of the DDP workload will define it."""
    try:
        shipped = shipping.ship(ring_all_reduce, p2p.ring_namespace())
    except shipping.ShippingError as error:
        raise Mismatch("your function cannot be sent to the ranks", hint=str(error),
                       show_values=False) from None
    return _called_as_the_engine_calls(shipping.define(shipped, p2p.ring_namespace()))


def _called_as_the_engine_calls(ring_all_reduce: Callable) -> Callable:
    """Call the learner's ring through a :class:`Part`, as the engine does: an exception
    in it is reported naming the part and the learner's line (the checker's own findings,
    a deadlock or a call the communicator lacks, pass through as they are)."""
    declared = parts.get(RING_PART)
    part = parts.Part(RING_PART, declared.receives, declared.returns, declared.engine,
                      fn=ring_all_reduce)

    def call(data: np.ndarray, comm: Any) -> Any:
        try:
            return part.call(data, comm)
        except parts.PartError as error:
            if isinstance(error.__cause__, Mismatch):
                raise error.__cause__ from None
            raise
    return call


def _ring_on_simulated_ranks(ring_all_reduce: Callable, arrays: list[np.ndarray]) -> None:
    """Run the learner's ring on ``len(arrays)`` simulated ranks; check sums and messages."""
    p, n, dtype = len(arrays), arrays[0].size, arrays[0].dtype
    datas = [a.copy() for a in arrays]
    with withheld((ring, "ring_all_reduce", "ring.ring_all_reduce"),
                  (p2p, "ring_sum", "the engine's ring")):
        world, returned = run_ranks(ring_all_reduce, datas)
    for rank, result in enumerate(returned):
        expect_true(result is None or result is datas[rank],
                    f"rank {rank}'s function returned {type(result).__name__} {result!r:.40}",
                    hint="sum into data in place and return None: DDP reads the sum from "
                         "the buffer it passed")
    want = np.sum(np.stack(arrays).astype(np.float64), axis=0)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    for rank, got in enumerate(datas):
        if not np.allclose(got, want, rtol=tolerance, atol=tolerance):
            raise Mismatch(f"rank {rank} holds the wrong values after your ring ({p} ranks, "
                           f"{n} {dtype} values)", want.astype(dtype), got,
                           _ring_hint(got, arrays, rank))
    for rank, got in enumerate(datas):
        expect_true(np.array_equal(got, datas[0]), f"ranks 0 and {rank} hold sums that differ "
                    f"in the last bits ({p} ranks, {n} values)",
                    hint="every chunk is summed once, on the ring, then copied to every rank "
                         "(the all-gather): then all replicas get the same bits and DDP's "
                         "models stay identical")
    _expect_a_ring(world, n, p)


def _replay_ring(arrays: list[np.ndarray], all_gather: str) -> list[np.ndarray]:
    """Each rank's data after the ring in numpy, the all-gather done as ``all_gather`` says:
    "copy" (right), "add" (a usual slip) or "skip" (left out)."""
    p, bounds = len(arrays), ring.chunk_bounds(arrays[0].size, len(arrays))
    datas = [a.astype(np.float64) for a in arrays]
    for phase in ring.PHASES:
        if phase == "all-gather" and all_gather == "skip":
            break
        for step in range(p - 1):
            sent = [datas[r][slice(*bounds[ring.send_chunk(phase, step, r, p)])].copy()
                    for r in range(p)]
            for r in range(p):
                chunk = slice(*bounds[ring.recv_chunk(phase, step, r, p)])
                if phase == "reduce-scatter" or all_gather == "add":
                    datas[r][chunk] += sent[(r - 1) % p]
                else:
                    datas[r][chunk] = sent[(r - 1) % p]
    return datas


def _ring_hint(got: np.ndarray, arrays: list[np.ndarray], rank: int) -> str:
    if np.array_equal(got, arrays[rank]):
        return ("data came back unchanged: write into data itself (data[a:b] += incoming), "
                "not into a new array")
    if np.allclose(got, _replay_ring(arrays, "skip")[rank], rtol=1e-5, atol=1e-5):
        return ("after the reduce-scatter each rank holds one finished chunk only: the "
                "all-gather passes the finished chunks round the ring (p - 1 more steps)")
    if np.allclose(got, _replay_ring(arrays, "add")[rank], rtol=1e-5, atol=1e-5):
        return ("in the all-gather the incoming chunk is already the full sum: copy it "
                "(data[a:b] = incoming), don't add it")
    return ("reduce-scatter: at step s send chunk send_chunk('reduce-scatter', s, rank, p) to "
            "the right and add the one from the left into data; all-gather: the same, copying")


def _expect_a_ring(world: World, n: int, p: int) -> None:
    """The messages of a ring all-reduce: to a neighbour only, 2(p - 1) of them per rank,
    each one chunk (at most ceil(n / p) values)."""
    biggest = -(-n // p)
    for rank in range(p):
        sent = world.sent_by(rank)
        strangers = sorted({m.dest for m in sent} - {(rank + 1) % p, (rank - 1) % p})
        expect_true(not strangers, f"not a ring: rank {rank} sent messages to rank "
                    f"{', '.join(map(str, strangers))}, which is not its neighbour ({p} ranks)",
                    hint="in a ring each rank talks to its neighbours only: it sends to "
                         "(rank + 1) % p and receives from (rank - 1) % p; gathering at one "
                         "rank makes that rank's link carry everything")
        expect_true(len(sent) <= 2 * (p - 1), f"rank {rank} sent {len(sent)} messages on "
                    f"{p} ranks; the ring sends 2(p - 1) = {2 * (p - 1)}",
                    hint="p - 1 steps of reduce-scatter, then p - 1 of all-gather: one chunk "
                         "per step")
        size = max((m.data.size for m in sent), default=0)
        expect_true(size <= biggest, f"rank {rank} sent a message of {size} values, but "
                    f"{n} values cut into {p} chunks hold at most {biggest}",
                    hint="send one chunk per step (chunk_bounds(n, p) gives each chunk's "
                         "start and stop), not the whole array: that is why the ring sends "
                         "only 2(p - 1)/p of the data")


def _ring_case(strategies):
    """(ranks, values per rank, dtype, seed): n below, at and above p, ragged chunks."""
    return strategies.tuples(strategies.integers(1, 5), strategies.integers(1, 23),
                             strategies.sampled_from(["float32", "float64"]),
                             strategies.integers(0, 2**16))


def _arrays(p: int, n: int, dtype: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=n).astype(dtype) for _ in range(p)]


def check_ring_all_reduce(ring_all_reduce: Callable) -> Feedback:
    """Exercise 14.3: the ring all-reduce, on simulated ranks, then inside DDP on real ones."""
    def as_ranks_run_it() -> Callable:
        return _as_the_ranks_run_it(ring_all_reduce)

    def chapters_case() -> None:
        _ring_on_simulated_ranks(as_ranks_run_it(), [np.full(6, 2.0 ** r) for r in range(3)])

    too_slow: list[TooSlow] = []

    def random(case: tuple) -> None:
        if too_slow:  # (a ring stuck in a loop: don't wait that long again while shrinking)
            raise too_slow[0]
        try:
            _ring_on_simulated_ranks(as_ranks_run_it(), _arrays(*case))
        except TooSlow as error:
            too_slow.append(error)
            raise

    def ragged(p: int, n: int, dtype: str) -> Test:
        return Test(f"{p} simulated ranks, {n} {dtype} values (chunks of "
                    f"{', '.join(str(b - a) for a, b in ring.chunk_bounds(n, p))})",
                    lambda: _ring_on_simulated_ranks(as_ranks_run_it(), _arrays(p, n, dtype, n)))

    tests = [Test("3 simulated ranks, 6 values, rank r holds 2^r (the picture above)",
                  chapters_case), ragged(4, 10, "float32"), ragged(5, 3, "float64"),
             property_test("1 to 5 simulated ranks, 1 to 23 values (fewer than the ranks, "
                           "not divisible by them), float32 and float64", _ring_case, random),
             on_real_ranks(ring_all_reduce, 2), on_real_ranks(ring_all_reduce, 3)]
    return check("14.3", tests, candidate=ring_all_reduce,
                 solved="your ring summed every rank's data with 2(p - 1) messages of one "
                        "chunk per rank, and DDP trained on 2 and 3 ranks with it, to the "
                        "parameters of full-batch training.")


# --- 14.4 a sampler's shards ------------------------------------------------------------

def check_shard_indices(shard_indices: Callable) -> Feedback:
    """Exercise 14.4: the indices rank ``rank`` reads (DistributedSampler without shuffle)."""

    def make(n: int, p: int, drop_last: bool) -> Test:
        def run() -> None:
            want = [list(DistributedSampler(range(n), p, r, shuffle=False, drop_last=drop_last))
                    for r in range(p)]
            with withheld((DistributedSampler, "__iter__", "DistributedSampler")):
                shards = [shard_indices(n, p, r, drop_last) for r in range(p)]
            for r, (got, expected) in enumerate(zip(shards, want)):
                got = [int(i) for i in got] if got is not None else None
                if got == expected:
                    continue
                raise Mismatch(f"wrong indices for rank {r}", expected, got,
                               _shard_hint(shards, want, n, p, drop_last))
        return Test(f"n = {n}, num_replicas = {p}, drop_last = {drop_last}", run)

    fixed = [(10, 3, False), (10, 3, True), (8, 4, False), (2, 5, False), (3, 4, True),
             (1, 3, False), (7, 7, True)]
    randomised = [(n, p, bool(n % 2)) for n, p in zip(_random_sizes(3, 5, 40),
                                                      _random_sizes(3, 2, 9))]
    return check("14.4", [make(*c) for c in fixed + randomised], candidate=shard_indices,
                 solved="every rank reads the same number of samples, rank r every p-th one "
                        "from r, with the tail padded (or dropped) as DistributedSampler does.")


def _shard_hint(shards: list, want: list, n: int, p: int, drop_last: bool) -> str:
    if any(s is None for s in shards):
        return "return a list of indices"
    first = [int(i) for i in shards[0]]
    if len(first) > 1 and first == list(range(len(first))):
        return "rank r takes indices r, r + p, r + 2p, ... (strided), not one contiguous block"
    if len({len(s) for s in shards}) > 1 and not drop_last and n < p:
        return ("with fewer samples than ranks, one round of padding is not enough: repeat "
                "the indices until the length is a multiple of num_replicas")
    if len({len(s) for s in shards}) > 1:
        return ("the ranks got different numbers of samples: one would wait forever for the "
                "others at the gradient all-reduce. Pad by repeating indices from the start "
                "(or cut the tail with drop_last)")
    if len(first) != len(want[0]):
        return ("with drop_last=True cut the tail so that the length divides by num_replicas; "
                "without it, pad up to the next multiple")
    order = [int(shards[r][k]) for k in range(len(first)) for r in range(p)]
    if not drop_last and order[:n] == list(range(n)):
        return "pad by repeating the first indices (0, 1, 2, ...), not one index over and over"
    return "pad (or cut) first, then rank r takes every num_replicas-th index starting at r"

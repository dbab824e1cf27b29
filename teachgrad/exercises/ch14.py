"""Checkers for chapter 14, *Data parallelism*: the ring's schedule, a gradient average,
a sampler's shards.

They run in the notebook's own process (no ranks to start): each checks the
learner's function against teachgrad's own implementation on the cases the
chapter shows plus randomised ones, and names the usual mistakes.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

import teachgrad as tg
from teachgrad.distributed import ring
from teachgrad.utils.data import DistributedSampler

from .core import Feedback, Mismatch, Test, check, expect_close, expect_true, to_numpy

_RNG_SEED = 1414


def _random_sizes(count: int, low: int, high: int) -> list[int]:
    return np.random.default_rng(_RNG_SEED).integers(low, high, size=count).tolist()


# --- 14.1 the ring's schedule -----------------------------------------------------------

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
    """Exercise 14.1: which chunk rank ``rank`` sends at ``step`` of ``phase``."""

    def schedule(p: int) -> Test:
        def run() -> None:
            for phase in ring.PHASES:
                for step in range(p - 1):
                    for rank in range(p):
                        got = send_chunk(phase, step, rank, p)
                        want = ring.send_chunk(phase, step, rank, p)
                        if got != want:
                            raise Mismatch(
                                f"wrong chunk for rank {rank} at {phase} step {step}", want,
                                got, _schedule_hint(send_chunk, phase, step, rank, p))
            _ring_reduces_everything(send_chunk, p)
        return Test(f"world_size = {p}: every phase, step and rank", run)

    sizes = [2, 3, 4] + _random_sizes(3, 5, 12)
    return check("14.1", [schedule(p) for p in sizes], candidate=send_chunk,
                 solved="your schedule sends every chunk round the ring once to be summed and "
                        "once to be shared: every rank ends with the full sum.")


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


# --- 14.2 the gradient average ----------------------------------------------------------

def _mse_gradient(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    return 2 * X.T @ (X @ w - y) / len(y)


def check_data_parallel_gradient(data_parallel_gradient: Callable) -> Feedback:
    """Exercise 14.2: average per-rank gradients = the full-batch gradient."""

    def make(n: int, d: int, p: int, seed: int) -> Test:
        rng = np.random.default_rng(seed)
        X, y, w0 = rng.normal(size=(n, d)), rng.normal(size=n), rng.normal(size=d)

        def run() -> None:
            w = tg.tensor(w0, dtype=tg.float64, requires_grad=True)
            got = data_parallel_gradient(w, tg.tensor(X), tg.tensor(y), p)
            expect_true(got is not None, "your function returned None",
                        hint="return the averaged gradient (a tensor or array of w's shape)")
            got_np = np.asarray(to_numpy(got), dtype=np.float64)
            full = _mse_gradient(X, y, w0)
            shards = [_mse_gradient(X[r::p], y[r::p], w0) for r in range(p)]
            accumulated = np.cumsum(shards, axis=0)
            hint = "each rank: the gradient of the mean loss over its own shard; then average"
            if got_np.shape == full.shape:
                if np.allclose(got_np, p * full):
                    hint = "you summed the ranks' gradients: divide by world_size (ReduceOp.AVG)"
                elif np.allclose(got_np, full / p):
                    hint = ("each rank's loss is the mean over *its* shard: with that, the "
                            "average over ranks is already the full-batch mean")
                elif np.allclose(got_np, accumulated.mean(axis=0)):
                    hint = ("w.grad kept adding up from one rank to the next: each rank starts "
                            "from a zero gradient (w.grad = None before each backward)")
                elif np.allclose(got_np, shards[0]) or np.allclose(got_np, shards[-1]):
                    hint = "that is one rank's gradient: average all of them"
            expect_close(got_np, full, what="averaged gradient", hint=hint, rtol=1e-6)
        return Test(f"{n} samples, {d} weights, {p} ranks", run)

    fixed = [(8, 3, 2, 0), (12, 2, 3, 1)]
    randomised = [(p * k, d, p, 100 + p) for p, k, d in
                  zip(_random_sizes(2, 2, 6), _random_sizes(2, 2, 5), _random_sizes(2, 1, 5))]
    return check("14.2", [make(*c) for c in fixed + randomised], candidate=data_parallel_gradient,
                 solved="the average of the ranks' gradients is the full-batch gradient: "
                        "synchronous data parallelism is ordinary SGD on the whole batch.")


# --- 14.3 a sampler's shards ------------------------------------------------------------

def check_shard_indices(shard_indices: Callable) -> Feedback:
    """Exercise 14.3: the indices rank ``rank`` reads (DistributedSampler without shuffle)."""

    def make(n: int, p: int, drop_last: bool) -> Test:
        def run() -> None:
            shards = [shard_indices(n, p, r, drop_last) for r in range(p)]
            want = [list(DistributedSampler(range(n), p, r, shuffle=False, drop_last=drop_last))
                    for r in range(p)]
            for r, (got, expected) in enumerate(zip(shards, want)):
                got = [int(i) for i in got] if got is not None else None
                if got == expected:
                    continue
                raise Mismatch(f"wrong indices for rank {r}", expected, got,
                               _shard_hint(shards, want, n, p, drop_last))
        return Test(f"n = {n}, num_replicas = {p}, drop_last = {drop_last}", run)

    fixed = [(10, 3, False), (10, 3, True), (8, 4, False)]
    randomised = [(n, p, bool(n % 2)) for n, p in zip(_random_sizes(3, 5, 40),
                                                      _random_sizes(3, 2, 7))]
    return check("14.3", [make(*c) for c in fixed + randomised], candidate=shard_indices,
                 solved="every rank reads the same number of samples, rank r every p-th one "
                        "from r, with the tail padded (or dropped) as DistributedSampler does.")


def _shard_hint(shards: list, want: list, n: int, p: int, drop_last: bool) -> str:
    if any(s is None for s in shards):
        return "return a list of indices"
    first = [int(i) for i in shards[0]]
    if len(first) > 1 and first == list(range(len(first))):
        return "rank r takes indices r, r + p, r + 2p, ... (strided), not one contiguous block"
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

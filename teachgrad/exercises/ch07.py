"""Checkers for chapter 7, *Reductions, shared memory and barriers*.

Both exercises are block-level tree reductions: block ``b`` of a launch of
``ceil(n / threads)`` blocks reduces ``x[b*threads : (b+1)*threads]`` into
``out[b]``. The checkers launch the learner's kernel on ragged sizes and
compare with numpy, then run teachgrad's race check on it: a kernel that
misses a barrier can still give the right answer in the simulator by luck,
but not past the race check.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .core import Feedback, Mismatch, Test, check
from .kernel_runs import first_index, is_stub, launch_on_host_arrays

#: Threads per block the chapter's kernels are written for (a power of two).
THREADS = 32

#: (elements, what the case is about)
SIZES = [
    (32, "exactly one full block"),
    (100, "four blocks, the last one partly empty"),
    (7, "one block, mostly empty"),
    (1, "a single element"),
]


def block_chunks(x: np.ndarray, threads: int = THREADS) -> list[np.ndarray]:
    """The pieces of ``x`` that the blocks of the launch reduce, one per block."""
    return [x[start:start + threads] for start in range(0, x.size, threads)]


def run_block_reduction(kernel, x: np.ndarray, threads: int = THREADS) -> np.ndarray:
    """Launch ``kernel[ceil(n / threads), threads](x, out)`` and return ``out``."""
    blocks = -(-x.size // threads)
    out = np.full(blocks, np.nan)  # a slot the kernel forgets stays NaN
    _, got = launch_on_host_arrays(kernel, blocks, threads, x, out)
    return got


RACE_INPUT = f"2 blocks of {THREADS} threads, x = 1, 2, ..., {2 * THREADS}"


def first_race(kernel) -> str | None:
    """teachgrad's race check on ``kernel``: the first race it reports, in words (None: no race)."""
    from ..kernels.race import race_check

    report = race_check(kernel, 2, THREADS, np.arange(1.0, 2 * THREADS + 1), np.zeros(2))
    return None if report.ok else report.races[0].describe()


def race_test(kernel, exercise_hint: str) -> Test:
    """A test that fails if teachgrad's race check reports a race in ``kernel``."""
    def run() -> None:
        race = first_race(kernel)
        if race is not None:
            raise Mismatch(f"the race check found a race: {race}", hint=exercise_hint,
                           show_values=False)

    return Test(f"race check: {RACE_INPUT}", run)


def blame_race(kernel, wrong: Mismatch) -> Mismatch:
    """``wrong``, pointing at a race when the race check finds one (a wrong answer by bad timing)."""
    race = first_race(kernel)
    if race is not None:
        wrong.hint = (f"the race check found a race, which explains a wrong answer that "
                      f"comes and goes: {race}. A cuda.syncthreads() is missing")
    return wrong


# -- exercise 7.1: a block-level max ----------------------------------------------------------

def check_block_max(block_max: Callable) -> Feedback:
    """Exercise 7.1: ``block_max(x, out)``, one tree reduction per block, with max."""
    rng = np.random.default_rng(7)

    def make(n: int, about: str, values: np.ndarray) -> Test:
        def run() -> None:
            if is_stub(block_max):
                raise NotImplementedError
            got = run_block_reduction(block_max, values)
            expected = np.array([chunk.max() for chunk in block_chunks(values)])
            if np.array_equal(got, expected):
                return
            b = first_index(got != expected)
            chunk = block_chunks(values)[b]
            if np.isnan(got[b]):
                hint = "out[blockIdx.x] was never written: let thread 0 write partial[0] at the end"
            elif got[b] == 0 and chunk.max() < 0:
                hint = ("every number here is negative, so padding the empty slots with 0 wins "
                        "the max: pad with -inf (math.inf from the math module) instead")
            elif np.isclose(got[b], chunk.sum()):
                hint = "that is the sum: combine with max(a, b), not a + b"
            else:
                hint = ("each level, thread t < step keeps the larger of partial[t] and "
                        "partial[t + step]; a barrier separates the levels")
            raise blame_race(block_max, Mismatch(
                f"wrong max for block {b} (elements {b * THREADS} to {b * THREADS + chunk.size - 1})",
                expected[b], got[b], hint))

        return Test(f"n = {n} ({about})", run,
                    hint="a thread whose element is past the end must not read x: check i < x.size")

    tests = [make(n, about, rng.normal(size=n).round(3)) for n, about in SIZES]
    tests.append(make(45, "all negative: the padding must not win", -1.0 - np.arange(45.0)))
    tests.append(race_test(block_max, "a cuda.syncthreads() must separate every write to "
                                      "shared memory from the reads of other threads"))
    return check("7.1", tests, candidate=block_max,
                 solved="your tree finds each block's max, with the barriers where they belong.")


# -- exercise 7.2: fix the broken kernel ------------------------------------------------------

def check_fixed_block_sum(fixed_block_sum: Callable) -> Feedback:
    """Exercise 7.2: the block sum with its missing barrier put back."""
    def make(n: int, about: str) -> Test:
        def run() -> None:
            if is_stub(fixed_block_sum):
                raise NotImplementedError
            values = np.arange(1.0, n + 1)  # integers: every sum is exact
            got = run_block_reduction(fixed_block_sum, values)
            expected = np.array([chunk.sum() for chunk in block_chunks(values)])
            if not np.array_equal(got, expected):
                b = first_index(got != expected)
                raise blame_race(fixed_block_sum, Mismatch(
                    f"wrong sum for block {b}", expected[b], got[b],
                    "keep the kernel as it was and only add the missing barrier"))

        return Test(f"n = {n} ({about})", run)

    tests = [make(n, about) for n, about in SIZES]
    tests.append(race_test(fixed_block_sum, "look at the tree loop: between one level's writes "
                                            "and the next level's reads, every thread must wait"))
    return check("7.2", tests, candidate=fixed_block_sum,
                 solved="no race left: every level of the tree waits for the one before.")

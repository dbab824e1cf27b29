"""Checkers for chapter 7, *Reductions, shared memory and barriers*.

Both exercises are block-level tree reductions: block ``b`` of a launch of
``ceil(n / threads)`` blocks reduces ``x[b*threads : (b+1)*threads]`` into
``out[b]``. The checkers launch the learner's kernel on ragged sizes and
compare with numpy, then run teachgrad's race check on it: a kernel that
misses a barrier can still give the right answer in the simulator by luck,
but not past the race check, and neither can a barrier that some threads
skip (one inside ``if t < step:``). The race check's log also shows *how*
the work was done, so a serial loop in thread 0 is not taken for a tree.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Callable

import numpy as np

from .building import property_test
from .core import Feedback, Mismatch, Test, check, unseen_rng
from .kernel_runs import (first_index, is_stub, launch_on_host_arrays, launch_within_bounds,
                          negative_index_test, python_function)

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


def _race_report(kernel):
    from ..kernels.race import race_check

    return race_check(kernel, 2, THREADS, np.arange(1.0, 2 * THREADS + 1), np.zeros(2))


def first_race(kernel) -> str | None:
    """teachgrad's race check on ``kernel``: the first problem it reports, in words (None: none)."""
    return _race_report(kernel).first_problem()


def race_test(kernel, exercise_hint: str, report_of=_race_report, about: str = RACE_INPUT) -> Test:
    """A test that fails if the race check finds a race or a barrier some threads skip."""
    def run() -> None:
        report = report_of(kernel)
        if report.barrier_mismatches:
            raise Mismatch("a barrier is not reached by every thread of the block: "
                           + report.barrier_mismatches[0].describe(),
                           hint="put cuda.syncthreads() after the `if`, at the level of the "
                                "loop, where every thread passes it", show_values=False)
        if report.races:
            raise Mismatch(f"the race check found a race: {report.races[0].describe()}",
                           hint=exercise_hint, show_values=False)

    return Test(f"race check: {about}", run)


def tree_test(kernel, report_of=_race_report, about: str = RACE_INPUT) -> Test:
    """A test that the block's threads shared the work as a tree in shared memory.

    A tree over ``THREADS`` slots has ``log2(THREADS)`` levels, each closed by a
    barrier, and half the threads combine at the first level. A loop in thread
    0 gives the same answer but none of that, and the log shows it.
    """
    levels = THREADS.bit_length() - 1

    def run() -> None:
        report = report_of(kernel)
        shared = [a for a in report.accesses if a.kind in "RW"]
        if not shared:
            raise Mismatch("your kernel never used shared memory", show_values=False,
                           hint="each thread copies its element into a cuda.shared.array, then "
                                "the block combines the slots as a tree")
        first_block = report.accesses[0].block
        combining = {a.thread for a in shared
                     if a.kind == "W" and a.epoch >= 1 and a.block == first_block}
        if len(combining) < THREADS // 2 or report.barriers < levels + 1:
            who = ("only thread 0" if combining <= {(0, 0, 0)}
                   else f"only {len(combining)} thread(s)")
            raise Mismatch(
                f"{who} combined values after the copy, with {report.barriers} barrier(s): "
                "that is a loop, not a tree", show_values=False,
                hint=f"a tree of {THREADS} slots has {levels} levels: at each level the first "
                     f"`step` threads combine partial[t] with partial[t + step] "
                     f"({THREADS // 2} threads at the first level), then everyone waits at a "
                     "barrier")

    return Test(f"how the work was shared: {about}", run)


def blame_race(kernel, wrong: Mismatch) -> Mismatch:
    """``wrong``, pointing at a race or a skipped barrier when the race check finds one."""
    problem = _race_report(kernel).first_problem()
    if problem is not None:
        wrong.hint = (f"the race check found a problem, which explains a wrong answer that "
                      f"comes and goes: {problem}")
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
    unseen = unseen_rng()
    size = int(unseen.integers(33, 130))
    tests.append(make(size, "unseen random values", unseen.normal(size=size).round(3) * 10))
    tests.append(race_test(block_max, "a cuda.syncthreads() must separate every write to "
                                      "shared memory from the reads of other threads"))
    tests.append(tree_test(block_max))
    return check("7.1", tests, candidate=block_max,
                 solved="your tree finds each block's max, with the barriers where they belong.")


# -- exercise 7.2: find and fix a missing barrier --------------------------------------------

#: The kernel exercise 7.2 starts from, exactly as the chapter shows it. It differs
#: from the chapter's block_sum twice over: it sums squares, and its tree pairs
#: neighbours first (stride 1, 2, 4, ...). One barrier is missing.
BROKEN_SUM_OF_SQUARES = '''\
@cuda.jit
def broken_sum_of_squares(x, out):
    """out[b] = (x[b*THREADS : (b+1)*THREADS] ** 2).sum(), with one barrier missing."""
    partial = cuda.shared.array(THREADS, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] * x[i] if i < x.size else 0.0

    stride = 1
    while stride < THREADS:
        if t % (2 * stride) == 0:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride *= 2

    if t == 0:
        out[cuda.blockIdx.x] = partial[0]
'''


def _without_barriers(source: str) -> tuple[str, int]:
    """The kernel's body as an AST dump with every barrier and the docstring taken out,
    and how many ``cuda.syncthreads()`` calls were taken out."""
    tree = ast.parse(textwrap.dedent(source))
    kernel = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef))
    removed = 0

    def is_barrier(statement: ast.stmt) -> bool:
        return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
                and ast.unparse(statement.value.func) == "cuda.syncthreads")

    for node in ast.walk(kernel):
        for name in ("body", "orelse"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                kept = [s for s in block if not is_barrier(s)]
                removed += len(block) - len(kept)
                setattr(node, name, kept or [ast.Pass()])
    body = kernel.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(ast.Module(body=body, type_ignores=[])), removed


def _kernel_source(kernel) -> str | None:
    try:
        return inspect.getsource(python_function(kernel))
    except (OSError, TypeError):
        return None  # defined where Python keeps no source: the other tests still apply


def check_fixed_sum_of_squares(fixed_sum_of_squares: Callable) -> Feedback:
    """Exercise 7.2: ``broken_sum_of_squares`` with its missing barrier put back."""
    def make(n: int, about: str) -> Test:
        def run() -> None:
            if is_stub(fixed_sum_of_squares):
                raise NotImplementedError
            values = np.arange(1.0, n + 1)  # integers: every sum is exact
            got = run_block_reduction(fixed_sum_of_squares, values)
            expected = np.array([(chunk ** 2).sum() for chunk in block_chunks(values)])
            if not np.array_equal(got, expected):
                b = first_index(got != expected)
                hint = "keep the kernel as it was and only add the missing barrier"
                if np.isclose(got[b], block_chunks(values)[b].sum()):
                    hint = ("that is the plain sum: start from broken_sum_of_squares (which "
                            "squares each element), not from block_sum")
                raise blame_race(fixed_sum_of_squares, Mismatch(
                    f"wrong sum of squares for block {b}", expected[b], got[b], hint))

        return Test(f"n = {n} ({about})", run)

    def unchanged() -> Test:
        def run() -> None:
            source = _kernel_source(fixed_sum_of_squares)
            if source is None:
                return
            want, barriers = _without_barriers(BROKEN_SUM_OF_SQUARES)
            got, got_barriers = _without_barriers(source)
            if got != want:
                raise Mismatch("apart from barriers, your kernel differs from "
                               "broken_sum_of_squares", show_values=False,
                               hint="copy broken_sum_of_squares as it is and only add one "
                                    "cuda.syncthreads(); the bug is a missing barrier, "
                                    "nothing else")
            if got_barriers != barriers + 1:
                raise Mismatch(f"your kernel has {got_barriers} barrier(s); the broken one "
                               f"has {barriers}, and one is missing", barriers + 1,
                               got_barriers, "add exactly one cuda.syncthreads(), where the "
                                             "race check says the conflict is")

        return Test("your kernel against broken_sum_of_squares", run)

    tests = [make(n, about) for n, about in SIZES]
    tests.append(make(int(unseen_rng().integers(33, 130)), "an unseen size"))
    tests.append(unchanged())
    tests.append(race_test(fixed_sum_of_squares,
                           "read the race report: the slot was written by one thread and read "
                           "by another with no barrier in between; add one there"))
    return check("7.2", tests, candidate=fixed_sum_of_squares,
                 solved="no race left: every read of a neighbour's slot waits for its write.")


# -- exercise 7.3: the reduction the cuda device runs --------------------------------------

#: (rows, elements per row, extra blocks, what the case is about)
ROW_SUM_CASES = [
    (1, 32, 0, "one full block"),
    (3, 100, 0, "three rows of four blocks, the last block partly empty"),
    (2, 7, 0, "one block per row, mostly empty"),
    (1, 1, 0, "a single element"),
    (2, 45, 1, "more blocks than needed: the extra block sums nothing, 0"),
]


def _row_sum_values(rows: int, n: int, seed: int) -> np.ndarray:
    """Mixed signs, a row whose sum is exactly 0, integers (every sum exact)."""
    values = np.random.default_rng(seed).integers(-9, 10, size=(rows, n)).astype(np.float64)
    if rows > 1:
        values[1] = np.concatenate([values[0][: n // 2], -values[0][: n // 2],
                                    np.zeros(n % 2)])  # sums to 0 exactly
    return values


def run_row_sums(block_sum, values: np.ndarray, extra_blocks: int = 0) -> np.ndarray:
    """``block_sum[(blocks, rows), THREADS](x, out)``, out filled with NaN; returns ``out``."""
    rows, n = values.shape
    blocks = -(-n // THREADS) + extra_blocks
    out = np.full((rows, blocks), np.nan)
    _, got = launch_within_bounds(
        block_sum, (blocks, rows), THREADS, values, out,
        hint="a thread whose element i is past the end of its row (i >= x.shape[1]) puts 0 in "
             "its slot instead of reading x")
    return got


def check_row_sums(block_sum, rows: int, n: int, extra: int, seed: int = 0) -> None:
    """``block_sum`` on ``rows`` rows of ``n`` integers (with ``extra`` blocks past the end)
    against numpy; a :class:`Mismatch` naming the first wrong block sum, and why."""
    values = _row_sum_values(rows, n, seed)
    got = run_row_sums(block_sum, values, extra)
    padded = np.pad(values, ((0, 0), (0, got.shape[1] * THREADS - n)))
    expected = padded.reshape(rows, got.shape[1], THREADS).sum(axis=2)
    if np.array_equal(got, expected):
        return
    r, b = first_index(got != expected)
    if np.isnan(got[r, b]) and r > 0 and not np.isnan(got[0]).any():
        hint = (f"row {r} was never written while row 0 was: block (b, r) sums row r, "
                "and r is cuda.blockIdx.y")
    elif np.isnan(got[r, b]):
        hint = ("out[row, blockIdx.x] was never written: thread 0 writes partial[0] at the "
                "end, for every block (blockIdx.x) and row (blockIdx.y)")
    elif r > 0 and got[r, b] == expected[0, b]:
        hint = "row r gave row 0's sum: block (b, r) sums row r, and r is cuda.blockIdx.y"
    else:
        hint = ("each level, thread t < step adds partial[t + step] into partial[t]; a "
                "barrier (at the loop's level, outside the `if`) separates the levels")
    raise blame_row_race(block_sum, Mismatch(
        f"wrong sum for row {r}, block {b} (elements {b * THREADS} to "
        f"{min((b + 1) * THREADS, n) - 1}) of {rows} row(s) of {n}, launched as "
        f"[({-(-n // THREADS) + extra}, {rows}), {THREADS}]", expected[r, b], got[r, b], hint))


def row_sum_test(block_sum, rows: int, n: int, extra: int, about: str, seed: int = 0) -> Test:
    def run() -> None:
        if is_stub(block_sum):
            raise NotImplementedError
        check_row_sums(block_sum, rows, n, extra, seed)

    return Test(f"{rows} row(s) of {n}, launched as [({-(-n // THREADS) + extra}, {rows}), "
                f"{THREADS}] ({about})", run)


def row_sum_property_test(block_sum) -> Test:
    """Rows, ragged lengths and grids with blocks to spare, drawn by hypothesis."""
    def strategy(st):
        return st.tuples(st.integers(1, 3), st.integers(1, 2 * THREADS + 6), st.integers(0, 2),
                         st.integers(0, 2**16))

    return property_test(f"1 to 3 rows of 1 to {2 * THREADS + 6}, 0 to 2 blocks to spare",
                         strategy, lambda case: check_row_sums(block_sum, *case),
                         examples=15, shrink=False)


ROW_RACE_INPUT = f"2 rows of 45 (ragged), launched as [(2, 2), {THREADS}]"


def _row_race_report(block_sum):
    from ..kernels.race import race_check

    return race_check(block_sum, (2, 2), THREADS, _row_sum_values(2, 45, 1), np.zeros((2, 2)))


def blame_row_race(block_sum, wrong: Mismatch) -> Mismatch:
    problem = _row_race_report(block_sum).first_problem()
    if problem is not None:
        wrong.hint = f"the race check found a problem, which explains a wrong answer: {problem}"
    return wrong


def row_sum_spread_test(block_sum) -> Test:
    """From a recorded ragged launch: no negative index, and each block's sum written once,
    by one thread (32 threads storing the same value is 31 stores too many)."""
    def run() -> None:
        from ..kernels.record import record_accesses

        if is_stub(block_sum):
            raise NotImplementedError
        record = record_accesses(block_sum, (2, 2), THREADS, _row_sum_values(2, 45, 1),
                                 np.zeros((2, 2)))
        negative_index_test(record)
        out = list(record.arrays)[1]
        writers = record.per_thread("W", out)
        if (writers > 1).any() or (record.counts(out, "W") > 1).any():
            many = int((writers > 0).sum())
            raise Mismatch(f"{many} threads wrote into {out} for 4 block sums: each block's "
                           "sum is written once, by one thread", 4, many,
                           "after the tree, let thread 0 alone (if t == 0:) write partial[0]")

    return Test(f"who wrote what: {ROW_RACE_INPUT}, recorded", run)


def check_block_sum(block_sum: Callable) -> Feedback:
    """Exercise 7.3: ``block_sum(x, out)`` over the rows of ``x``, the ``cuda`` device's
    sum: plugged into ``cuda.reduce``, it sums a small MLP's loss and bias gradients."""
    from .kernel_workloads import plugged_training_test

    rng = unseen_rng()
    unseen = (int(rng.integers(1, 4)), int(rng.integers(33, 130)), int(rng.integers(0, 2)),
              "an unseen size")
    tests = [row_sum_test(block_sum, *case) for case in ROW_SUM_CASES]
    tests.append(row_sum_test(block_sum, *unseen, seed=int(rng.integers(2**31))))
    tests.append(race_test(block_sum, "a cuda.syncthreads() must separate every write to shared "
                                      "memory from the reads of other threads",
                           _row_race_report, ROW_RACE_INPUT))
    tests.append(tree_test(block_sum, _row_race_report, ROW_RACE_INPUT))
    tests.append(row_sum_spread_test(block_sum))
    tests.append(row_sum_property_test(block_sum))
    tests.append(plugged_training_test("cuda.reduce", block_sum, "block_sum kernel"))
    return check("7.3", tests, candidate=block_sum,
                 solved="your tree reduction is the kernel the cuda device sums with: the MLP's "
                        "loss and gradients came out of it.")

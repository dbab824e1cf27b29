"""Checkers for chapter 8, *Matrix multiplication on the GPU*.

* Exercise 8.1 asks for a formula, the number of global-memory reads of the
  tiled kernel; the checker compares it with the counts teachgrad's tiled
  kernel records during real launches on ragged sizes.
* Exercise 8.2 asks for the missing piece of a tiled kernel, its load step;
  the checker plugs it into :func:`tiled_matmul_with` and compares the
  product with numpy.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np
from numba import cuda, float64  # module level: the simulator swaps `cuda` in a kernel's globals

from ..kernels._simulator import uninitialised_shared
from .building import property_test
from .core import Feedback, Mismatch, Test, check, expect_true, unseen_rng
from .kernel_runs import (first_index, is_device_function, is_stub, launch_on_host_arrays,
                          launch_within_bounds, negative_index_test)

#: (M, K, N, tile): square multiples of the tile, then ragged shapes.
READ_CASES = [(8, 8, 8, 4), (10, 13, 7, 4), (5, 3, 9, 4), (1, 1, 1, 4), (6, 9, 4, 2), (7, 5, 3, 8)]


def recorded_global_reads(M: int, K: int, N: int, tile: int) -> int:
    """Global reads of one real launch of teachgrad's tiled kernel, counted by its threads."""
    from ..kernels.record import record_tiled_matmul

    return record_tiled_matmul(M, K, N, tile=tile).counts["global_reads"]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# -- exercise 8.1: global reads of the tiled kernel ------------------------------------------

def check_tiled_global_reads(tiled_global_reads: Callable) -> Feedback:
    """Exercise 8.1: ``tiled_global_reads(M, K, N, tile)``, checked against recorded launches."""
    def make(M: int, K: int, N: int, tile: int) -> Test:
        def run() -> None:
            got = tiled_global_reads(M, K, N, tile)
            expect_true(got is not None, "your function returned None",
                        hint="did you forget a `return`?")
            expected = recorded_global_reads(M, K, N, tile)
            if isinstance(got, float) and got.is_integer():
                got = int(got)
            if got == expected:
                return
            if got == 2 * M * K * N // tile or got == 2 * M * K * N / tile:
                hint = ("2MNK/tile holds only when every side is a multiple of the tile; at the "
                        "edges threads skip the reads that fall outside A or B")
            elif got == 2 * M * K * N:
                hint = "that is the naive kernel's count: with tiles, each element is read once per tile"
            elif got == M * K * _ceil_div(M, tile) + K * N * _ceil_div(N, tile):
                hint = ("A's elements are re-read once per block *column* (N / tile of them), "
                        "B's once per block *row* (M / tile)")
            else:
                hint = ("count per matrix: every element of A is read once by each block in its "
                        "block row, i.e. ceil(N / tile) times; every element of B ceil(M / tile) times")
            raise Mismatch("wrong number of global reads", expected, got, hint)

        return Test(f"A {M}x{K} @ B {K}x{N}, tile {tile}", run)

    rng = unseen_rng()
    unseen = tuple(int(v) for v in rng.integers(3, 12, size=3)) + (int(rng.choice([2, 4])),)
    return check("8.1", [make(*case) for case in READ_CASES + [unseen]],
                 candidate=tiled_global_reads,
                 solved="your formula matches the reads counted in real launches, ragged sizes too.")


# -- exercise 8.2: the tiled kernel's load step -----------------------------------------------

@functools.lru_cache(maxsize=32)
def tiled_matmul_with(load_phase: Callable, tile: int):
    """The chapter's tiled kernel for 2-D float64 matrices, with its load step left to ``load_phase``.

    ``load_phase(A, B, a_tile, b_tile, row, col, phase)`` must fill this
    thread's slot of both shared tiles for the given phase (zeros past an edge).
    """
    @cuda.jit
    def tiled_matmul(A, B, C):
        a_tile = cuda.shared.array((tile, tile), float64)
        b_tile = cuda.shared.array((tile, tile), float64)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * tile + ty  # the output this thread computes
        col = cuda.blockIdx.x * tile + tx
        acc = 0.0
        for phase in range((A.shape[1] + tile - 1) // tile):
            load_phase(A, B, a_tile, b_tile, row, col, phase)  # 1. copy the tiles in
            cuda.syncthreads()                                 #    ... all of them
            for k in range(tile):                              # 2. multiply from shared memory
                acc += a_tile[ty, k] * b_tile[k, tx]
            cuda.syncthreads()                                 #    before the next overwrite
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc

    return tiled_matmul


LOAD_CASES = [(8, 8, 8, 4), (10, 13, 7, 4), (3, 5, 2, 4), (6, 2, 9, 2), (5, 7, 6, 2), (5, 3, 4, 4)]


def check_load_phase(load_phase: Callable) -> Feedback:
    """Exercise 8.2: the load step of the tiled kernel, ``load_phase(A, B, a_tile, b_tile, row, col, phase)``."""
    def make(M: int, K: int, N: int, tile: int, seed: int | None = None) -> Test:
        seed = M * 100 + K * 10 + N if seed is None else seed

        def run() -> None:
            if is_stub(load_phase):
                raise NotImplementedError
            if not is_device_function(load_phase):
                raise Mismatch("load_phase must be a device function", show_values=False,
                               hint="decorate it with @cuda.jit(device=True): kernels call it, "
                                    "the host never launches it")
            rng = np.random.default_rng(seed)
            A, B = rng.integers(-4, 5, size=(M, K)).astype(np.float64), \
                rng.integers(-4, 5, size=(K, N)).astype(np.float64)
            grid = (_ceil_div(N, tile), _ceil_div(M, tile))
            with uninitialised_shared():  # as on a GPU: a slot never written is garbage
                *_, got = launch_on_host_arrays(tiled_matmul_with(load_phase, tile), grid,
                                                (tile, tile), A, B, np.full((M, N), np.nan))
            expected = A @ B
            if np.array_equal(got, expected):
                return
            r, c = first_index(got != expected)
            hint = ("thread (ty, tx) copies A[row, phase*tile + tx] into a_tile[ty, tx] and "
                    "B[phase*tile + ty, col] into b_tile[ty, tx]")
            if K % tile:
                hint += "; slots past the edge of A or B must be set to 0, not left as they were"
            raise Mismatch(f"wrong value at C[{r}, {c}]", expected[r, c], got[r, c], hint)

        ragged = " (ragged: not multiples of the tile)" if (M % tile or K % tile or N % tile) else ""
        return Test(f"A {M}x{K} @ B {K}x{N}, tile {tile}{ragged}", run,
                    hint="check the guards: read A[row, k] only when row < A.shape[0] and "
                         "k < A.shape[1] (and likewise for B)")

    rng = unseen_rng()
    unseen = tuple(int(v) for v in rng.integers(2, 11, size=3)) + (int(rng.choice([2, 4])),)
    tests = [make(*case) for case in LOAD_CASES] + [make(*unseen, int(rng.integers(2**31)))]
    return check("8.2", tests, candidate=load_phase,
                 solved="the tiled kernel multiplies correctly with your load step, at ragged "
                        "sizes too.")


# -- exercise 8.3: the tiled matmul the cuda device runs ------------------------------------

#: (M, K, N, tile, extra blocks per axis): multiples of the tile, ragged shapes, a tile
#: larger than the matrices, and a grid with more blocks than the output needs.
MATMUL_CASES = [(8, 8, 8, 4, 0), (10, 13, 7, 4, 0), (5, 3, 9, 2, 0), (1, 1, 1, 4, 0),
                (7, 5, 3, 8, 0), (6, 9, 4, 4, 1)]
#: The ragged product the race check and the recorded launch use.
RECORDED = (6, 7, 5, 4)


def _operands(M: int, K: int, N: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)  # small integers: every product exact
    return (rng.integers(-4, 5, size=(M, K)).astype(np.float64),
            rng.integers(-4, 5, size=(K, N)).astype(np.float64))


def _grid(M: int, N: int, tile: int, extra: int = 0) -> tuple[int, int]:
    return _ceil_div(N, tile) + extra, _ceil_div(M, tile) + extra


def check_tiled_product(make_tiled_matmul: Callable, M: int, K: int, N: int, tile: int,
                        extra: int = 0, seed: int = 0) -> None:
    """``make_tiled_matmul(tile)`` on ``A (M, K) @ B (K, N)`` (``extra`` blocks to spare on
    each axis) against numpy; a :class:`Mismatch` naming the first wrong element, and why."""
    A, B = _operands(M, K, N, seed)
    with uninitialised_shared():  # as on a GPU: a slot never written is garbage
        *_, got = launch_within_bounds(
            make_tiled_matmul(tile), _grid(M, N, tile, extra), (tile, tile), A, B,
            np.full((M, N), np.nan),
            hint="a thread whose row or column is past the edge of A, B or C must not "
                 "touch it: store 0 in its tile slot, and skip the final write")
    expected = A @ B
    if np.array_equal(got, expected):
        return
    r, c = first_index(got != expected)
    if np.isnan(got[r, c]):
        hint = (f"C[{r}, {c}] was never written: thread (ty, tx) of block (bx, by) writes "
                "C[by*tile + ty, bx*tile + tx] after the last phase")
    elif K % tile and np.array_equal(got, _without_last_partial_phase(A, B, tile)):
        hint = ("the last, partial phase is missing: there are ceil(K / tile) phases, "
                "(K + tile - 1) // tile")
    else:
        hint = ("in phase p, thread (ty, tx) copies A[row, p*tile + tx] and "
                "B[p*tile + ty, col] into its slot of each tile (0 past an edge); then "
                "acc += a_tile[ty, k] * b_tile[k, tx] for k < tile")
    raise _blame_race(make_tiled_matmul, Mismatch(
        f"wrong value at C[{r}, {c}] of A {M}x{K} @ B {K}x{N}, tile {tile}",
        expected[r, c], got[r, c], hint))


def tiled_product_test(make_tiled_matmul: Callable, M: int, K: int, N: int, tile: int,
                       extra: int = 0, seed: int = 0) -> Test:
    def run() -> None:
        if is_stub(make_tiled_matmul):
            raise NotImplementedError
        check_tiled_product(make_tiled_matmul, M, K, N, tile, extra, seed)

    ragged = " (ragged)" if (M % tile or K % tile or N % tile) else ""
    more = ", more blocks than needed" if extra else ""
    grid = _grid(M, N, tile, extra)
    return Test(f"A {M}x{K} @ B {K}x{N}, tile {tile}{ragged}, launched as [{grid}, "
                f"({tile}, {tile})]{more}", run)


def tiled_property_test(make_tiled_matmul: Callable) -> Test:
    """Shapes, tiles (3 and 1 too, which no case above uses) and spare blocks drawn by
    hypothesis."""
    def strategy(st):
        size = st.integers(1, 9)
        return st.tuples(size, size, size, st.sampled_from([1, 2, 3, 4]), st.integers(0, 1),
                         st.integers(0, 2**16))

    return property_test("A MxK @ B KxN with M, K, N from 1 to 9, tile 1 to 4, 0 or 1 block to "
                         "spare", strategy,
                         lambda case: check_tiled_product(make_tiled_matmul, *case),
                         examples=15, shrink=False)


def _without_last_partial_phase(A: np.ndarray, B: np.ndarray, tile: int) -> np.ndarray:
    whole = (A.shape[1] // tile) * tile
    return A[:, :whole] @ B[:whole]


def _race_report(make_tiled_matmul: Callable):
    from ..kernels.race import race_check

    M, K, N, tile = RECORDED
    A, B = _operands(M, K, N, 1)
    return race_check(make_tiled_matmul(tile), _grid(M, N, tile), (tile, tile), A, B,
                      np.zeros((M, N)))


def _blame_race(make_tiled_matmul: Callable, wrong: Mismatch) -> Mismatch:
    problem = _race_report(make_tiled_matmul).first_problem()
    if problem is not None:
        wrong.hint = (f"the race check found a problem, which explains a wrong answer: {problem}"
                      ". A tiled kernel needs two barriers per phase: after the loads and "
                      "after the multiply-adds")
    return wrong


def tiled_race_test(make_tiled_matmul: Callable) -> Test:
    def run() -> None:
        if is_stub(make_tiled_matmul):
            raise NotImplementedError
        report = _race_report(make_tiled_matmul)
        if report.barrier_mismatches:
            raise Mismatch("a barrier is not reached by every thread of the block: "
                           + report.barrier_mismatches[0].describe(), show_values=False,
                           hint="threads past the edge still take part in loading (they store "
                                "0) and must reach every cuda.syncthreads(): no early return")
        if report.races:
            raise Mismatch(f"the race check found a race: {report.races[0].describe()}",
                           show_values=False,
                           hint="two barriers per phase: after the loads (the tiles are "
                                "complete) and after the multiply-adds (nobody still reads "
                                "when the next phase overwrites)")

    M, K, N, tile = RECORDED
    return Test(f"race check: A {M}x{K} @ B {K}x{N}, tile {tile} (ragged)", run)


def tiled_spread_test(make_tiled_matmul: Callable) -> Test:
    """From a recorded launch: every output written once, by a thread of the block whose
    tile holds it, one output per thread; and A and B read from global memory only as
    often as tiles need (each element once per block column for A, per block row for B)."""
    M, K, N, tile = RECORDED

    def run() -> None:
        from ..kernels.record import record_accesses

        if is_stub(make_tiled_matmul):
            raise NotImplementedError
        A, B = _operands(M, K, N, 2)
        grid = _grid(M, N, tile)
        record = record_accesses(make_tiled_matmul(tile), grid, (tile, tile), A, B,
                                 np.zeros((M, N)))
        a_name, b_name, c_name = list(record.arrays)
        negative_index_test(record)
        _check_outputs_spread(record, c_name, tile)
        _check_phases(make_tiled_matmul, K, tile, record)
        _check_phases(make_tiled_matmul, 2 * tile, tile)  # K a multiple of the tile, too
        formulas = {a_name: (grid[0] * M * K, "once per block column, ceil(N / tile) times"),
                    b_name: (grid[1] * K * N, "once per block row, ceil(M / tile) times")}
        for name, (most, how) in formulas.items():
            reads = int(record.counts(name, "R").sum())
            if reads > most:
                raise Mismatch(f"{name} was read {reads} times from global memory; tiles need "
                               f"{most} (each element {how})", most, reads,
                               "each thread copies one element of each tile per phase into "
                               "shared memory; the multiply-adds read the shared tiles")
        if not record.shared:
            raise Mismatch("your kernel never used shared memory", show_values=False,
                           hint="a_tile = cuda.shared.array((tile, tile), float64), and the "
                                "same for b_tile")

    return Test(f"how the work was spread: A {M}x{K} @ B {K}x{N}, tile {tile}, recorded", run)


def _check_outputs_spread(record, c_name: str, tile: int) -> None:
    writes = record.counts(c_name, "W")
    per_thread = record.per_thread("W", c_name)
    if (writes == 0).any():
        r, c = first_index(writes == 0)
        raise Mismatch(f"C[{r}, {c}] was never written", show_values=False,
                       hint="every output belongs to one thread: C[by*tile + ty, bx*tile + tx]")
    if per_thread.max() > 1:
        busiest = int(per_thread.argmax())
        raise Mismatch(f"one thread wrote {int(per_thread.max())} outputs (thread {busiest}): "
                       "a parallel kernel gives each thread one output", show_values=False,
                       hint="thread (ty, tx) of block (bx, by) computes C[by*tile + ty, "
                            "bx*tile + tx] only")
    for access in record.of(c_name, "W"):
        (bx, by, _), (r, c) = access.block, access.index[:2]
        if (r // tile, c // tile) not in ((by, bx), (bx, by)):
            raise Mismatch(f"C[{r}, {c}] was written by block {(bx, by)}, whose tile does not "
                           "hold it", show_values=False,
                           hint="block (bx, by) owns rows by*tile ... and columns bx*tile ... "
                                "of C (blockIdx.x counts columns)")


def _check_phases(make_tiled_matmul: Callable, K: int, tile: int, record=None) -> None:
    """No more tile loads than phases: each thread stores at most 2 shared values a phase
    (``record``: a recorded launch with this K, else one of A 3xK @ B Kx2 is made)."""
    from ..kernels.record import record_accesses

    if record is None:
        A, B = _operands(3, K, 2, 3)
        record = record_accesses(make_tiled_matmul(tile), _grid(3, 2, tile), (tile, tile),
                                 A, B, np.zeros((3, 2)))
    phases = _ceil_div(K, tile)
    stores = sum(1 for a in record.accesses if a.kind == "W" and a.array in record.shared)
    loaded = stores / (2 * record.threads_per_block * int(np.prod(record.grid)))
    if loaded > phases:
        raise Mismatch(f"your kernel loaded tiles for {loaded:g} phases; K = {K} with tile "
                       f"{tile} needs {phases}: the extra ones multiply zeros", phases, loaded,
                       "round the number of phases up, not beyond: (K + tile - 1) // tile")


def check_tiled_matmul(make_tiled_matmul: Callable) -> Feedback:
    """Exercise 8.3: ``make_tiled_matmul(tile)`` -> a shared-memory tiled kernel ``(A, B, C)``,
    then the ``cuda`` device's matmul: plugged into ``cuda.matmul``, a small MLP trains on it."""
    from .kernel_workloads import plugged_training_test

    rng = unseen_rng()
    unseen = tuple(int(v) for v in rng.integers(2, 12, size=3)) + (int(rng.choice([2, 4])),
                                                                   int(rng.integers(0, 2)))
    tests = [tiled_product_test(make_tiled_matmul, *case) for case in MATMUL_CASES]
    tests += [tiled_product_test(make_tiled_matmul, *unseen, seed=int(rng.integers(2**31))),
              tiled_race_test(make_tiled_matmul), tiled_spread_test(make_tiled_matmul),
              tiled_property_test(make_tiled_matmul),
              plugged_training_test("cuda.matmul", make_tiled_matmul, "tiled matmul")]
    return check("8.3", tests, candidate=make_tiled_matmul,
                 solved="your tiled kernel is the cuda device's matmul: the MLP trained on "
                        "it, forward and backward, as on the engine's own.")

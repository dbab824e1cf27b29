"""Chapter 8b checkers for kernels about memory: histogram (atomics), convolution
(a halo), transpose (coalescing and banks) and im2col (a grid-stride copy)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .shared import (BLOCK_ROWS, BLOCKS, NBINS, RADIUS, THREADS, TILE, blamed, not_yet,
                           race_test, several_writers)
from ..core import Feedback, Mismatch, Test, check, unseen_rng
from ..kernel_runs import first_index, launch_on_host_arrays


# -- 8b.1: a histogram with atomics ---------------------------------------------------------

def histogram_spec(values: np.ndarray) -> np.ndarray:
    return np.bincount(values, minlength=NBINS)


def check_histogram(histogram: Callable) -> Feedback:
    """Exercise 8b.1: ``histogram[BLOCKS, THREADS](values, bins)`` counts into ``bins``."""
    def values_of(n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, NBINS, size=n).astype(np.int64)

    def make(n: int, rng: np.random.Generator, about: str, launch=(BLOCKS, THREADS)) -> Test:
        values = values_of(n, rng)

        def run() -> None:
            not_yet(histogram)
            _, got = launch_on_host_arrays(histogram, *launch, values,
                                           np.zeros(NBINS, dtype=np.int64))
            expected = histogram_spec(values)
            if np.array_equal(got, expected):
                return
            b = first_index(got != expected)
            hint = ("every element must be counted exactly once: a grid-stride loop from "
                    "cuda.grid(1) in steps of cuda.gridsize(1), and cuda.atomic.add(bins, v, 1)")
            if np.array_equal(got, np.bincount(values, weights=values, minlength=NBINS)):
                hint = "add 1 per element, not the element's value"
            elif got.sum() > n:
                hint = ("some elements were counted more than once: thread g starts at "
                        "cuda.grid(1) (not threadIdx.x) and steps by cuda.gridsize(1)")
            elif got.sum() < n:
                hint = ("some elements were never counted (or increments were lost): "
                        + hint)
            raise Mismatch(f"wrong count in bins[{b}]", expected, got, hint)
        return Test(f"n = {n} values in {NBINS} bins, histogram[{launch[0]}, {launch[1]}] "
                    f"({about})", run)

    def recorded() -> Test:
        values = values_of(150, np.random.default_rng(81))

        def run() -> None:
            from ...kernels.record import record_accesses

            not_yet(histogram)
            record = record_accesses(histogram, BLOCKS, THREADS, values,
                                     np.zeros(NBINS, dtype=np.int64))
            lost = record.lost_updates("bins")
            if lost:
                writers = sorted({record.global_thread(a) for a in record.of("bins", "W")
                                  if a.index == lost[0]})
                raise Mismatch(
                    f"bins[{lost[0][0]}] was written by {len(writers)} threads with a plain "
                    f"read and write (threads {', '.join(map(str, writers[:5]))}, ...): two "
                    "threads that read the same old count both write count + 1, and one "
                    "increment is lost", show_values=False,
                    hint="cuda.atomic.add(bins, v, 1) does the read, add and write as one step")
            reads = record.counts("values", "R")
            if not np.all(reads == 1):
                i = first_index(reads != 1)
                raise Mismatch(f"values[{i}] was read {int(reads[i])} times, not once",
                               show_values=False,
                               hint="each thread takes its own elements: start at cuda.grid(1) "
                                    "and step by cuda.gridsize(1)")
        return Test(f"who updated bins: 150 values, histogram[{BLOCKS}, {THREADS}], recorded", run)

    fixed = np.random.default_rng(80)
    unseen = unseen_rng()
    tests = [make(100, fixed, "more values than threads"), make(7, fixed, "fewer"),
             make(1, fixed, "a single value"), recorded(),
             make(int(unseen.integers(65, 400)), unseen, "unseen random values"),
             make(100, fixed, "one block: the grid is smaller than you planned", (1, THREADS)),
             make(150, fixed, "3 blocks of 64: the stride is cuda.gridsize(1)", (3, 64)),
             make(20, fixed, "more threads than values", (4, THREADS))]
    return check("8b.1", tests, candidate=histogram,
                 solved="every value counted once, with no increment lost.")


# -- 8b.3: a 1-D convolution with a halo in shared memory ------------------------------------

def conv_spec(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``out[i] = sum_k w[k] * x[i + k - RADIUS]``, zeros outside ``x``."""
    return np.correlate(np.pad(x, RADIUS), w, mode="valid")


def check_conv1d(conv1d: Callable) -> Feedback:
    """Exercise 8b.3: ``conv1d[ceil(n / THREADS), THREADS](x, w, out)`` with a shared tile + halo."""
    w = np.array([1.0, -2.0, 3.0, 4.0, -5.0])  # not symmetric: a flipped filter shows

    def make(x: np.ndarray, about: str) -> Test:
        def run() -> None:
            not_yet(conv1d)
            blocks = -(-x.size // THREADS)
            *_, got = launch_on_host_arrays(conv1d, blocks, THREADS, x, w, np.full(x.size, np.nan))
            expected = conv_spec(x, w)
            if np.array_equal(got, expected):
                return
            i = first_index(got != expected)
            hint = "out[i] = sum over k of w[k] * x[i + k - RADIUS], with 0 outside x"
            if np.array_equal(got, np.convolve(np.pad(x, RADIUS), w, mode="valid")):
                hint = "the filter is flipped: use w[k] with x[i + k - RADIUS] (a correlation)"
            elif i % THREADS in (0, 1, THREADS - 2, THREADS - 1) and 0 < i < x.size - 1:
                hint = (f"out[{i}] sits at the edge of its block and needs x values from the "
                        f"next block: load the halo, {RADIUS} extra elements on each side of "
                        "the tile")
            raise blamed(conv1d, Mismatch(f"wrong value at out[{i}]", expected[i], got[i], hint),
                          race_args)
        return Test(f"n = {x.size} ({about})", run)

    def race_args() -> tuple:
        return np.arange(1.0, 65.0), w, np.zeros(64)

    def reads() -> Test:
        x = np.arange(1.0, 71.0)

        def run() -> None:
            from ...kernels.record import record_accesses

            not_yet(conv1d)
            record = record_accesses(conv1d, 3, THREADS, x, w, np.zeros(x.size))
            counts = record.counts("x", "R")
            if counts.max() > 2:
                i = first_index(counts == counts.max())
                raise Mismatch(f"x[{i}] was read {int(counts[i])} times from global memory",
                               show_values=False,
                               hint="load each element into the shared tile once (the halo "
                                    "elements once per neighbouring block), then read the "
                                    f"{2 * RADIUS + 1} neighbours from shared memory")
        return Test("global reads of x: n = 70, conv1d[3, 32], recorded", run)

    unseen = unseen_rng()
    tests = [make(np.arange(1.0, 33.0), "one full block"),
             make(np.arange(1.0, 71.0), "three blocks: the halo crosses block edges"),
             make(np.array([2.0, -1.0, 3.0]), "shorter than the filter"),
             make(unseen.integers(-9, 10, size=int(unseen.integers(33, 130))).astype(float),
                  "unseen random values"),
             reads(),
             race_test(conv1d, race_args,
                        "wait at a barrier after filling the tile, before any thread reads "
                        "its neighbours' slots")]
    return check("8b.3", tests, candidate=conv1d,
                 solved="one global read per element, neighbours from shared memory, "
                        "halos across block edges.")


# -- 8b.4: a coalesced transpose through shared memory ----------------------------------------

def check_transpose(transpose: Callable) -> Feedback:
    """Exercise 8b.4: ``transpose[(ceil(cols/TILE), ceil(rows/TILE)), (TILE, BLOCK_ROWS)](A, out)``."""
    from ...kernels.access_patterns import bank_conflict_degree, segments_per_step

    def launch(A: np.ndarray) -> np.ndarray:
        grid = (-(-A.shape[1] // TILE), -(-A.shape[0] // TILE))
        _, got = launch_on_host_arrays(transpose, grid, (TILE, BLOCK_ROWS), A,
                                       np.full(A.T.shape, np.nan, dtype=A.dtype))
        return got

    def make(shape: tuple[int, int], rng: np.random.Generator, about: str) -> Test:
        A = rng.integers(-99, 100, size=shape).astype(np.float32)

        def run() -> None:
            not_yet(transpose)
            got = launch(A)
            if np.array_equal(got, A.T):
                return
            r, c = first_index(got != A.T)
            raise blamed(transpose, Mismatch(
                f"wrong value at out[{r}, {c}]", A.T[r, c], got[r, c],
                "out[c, r] = A[r, c]; at the ragged edge, guard both the reads of A and the "
                "writes of out"), race_args, grid=(2, 2), block=(TILE, BLOCK_ROWS))
        return Test(f"A of shape {shape} ({about})", run)

    def race_args() -> tuple:  # ragged: 2 x 2 tiles, the last ones partly empty
        A = np.arange(40 * 36, dtype=np.float32).reshape(40, 36)
        return A, np.zeros(A.T.shape, np.float32)

    def patterns() -> Test:
        A = np.arange(40 * 36, dtype=np.float32).reshape(40, 36)

        def run() -> None:
            from ...kernels.record import record_accesses

            not_yet(transpose)
            grid = (-(-A.shape[1] // TILE), -(-A.shape[0] // TILE))
            record = record_accesses(transpose, grid, (TILE, BLOCK_ROWS), A,
                                     np.zeros(A.T.shape, dtype=np.float32))
            for name, kind, verb in (("A", "R", "reads of A"), ("out", "W", "writes to out")):
                worst = max(segments_per_step(record, name, kind), default=0)
                if worst > 2:
                    raise Mismatch(
                        f"{verb} are not coalesced: one warp's 32 accesses touch {worst} "
                        "different 128-byte segments", show_values=False,
                        hint="neighbouring threads (tx, tx + 1) must touch neighbouring "
                             "elements of a row, for the read from A and for the write to "
                             "out: transpose inside the shared tile, not in global memory")
            problem = several_writers(record, "out")
            if problem is not None:
                raise Mismatch(f"{problem}: several threads writing one cell is a race on a "
                               "GPU", show_values=False,
                               hint="each block writes its own TILE x TILE tile of out once: "
                                    "j runs over the tile's rows 0 .. TILE - 1 only")
            shared = sorted(record.shared)
            if not shared:
                raise Mismatch("the kernel used no shared memory", show_values=False,
                               hint="stage each tile in cuda.shared.array((TILE, TILE + 1))")
            degree = max(bank_conflict_degree(record, s, "RW") for s in shared)
            if degree > 1:
                raise Mismatch(f"shared memory bank conflicts: up to {degree} threads of a warp "
                               "wait on one bank", show_values=False,
                               hint="a column of a TILE x TILE float32 tile lies in one bank; "
                                    "pad each row by one element: shape (TILE, TILE + 1)")
        return Test("memory access pattern: A of shape (40, 36), recorded", run)

    fixed = np.random.default_rng(84)
    unseen = unseen_rng()
    tests = [make((32, 32), fixed, "one tile"), make((40, 36), fixed, "ragged: 2 x 2 tiles"),
             make((3, 70), fixed, "a wide, flat matrix"),
             make((70, 100), fixed, "3 x 4 tiles, ragged both ways"),
             make(tuple(int(v) for v in unseen.integers(2, 100, size=2)), unseen, "unseen shape"),
             patterns(),
             race_test(transpose, race_args,
                       "wait at a barrier between filling the tile and reading it back",
                       grid=(2, 2), block=(TILE, BLOCK_ROWS))]
    return check("8b.4", tests, candidate=transpose,
                 solved="coalesced reads and writes, and no bank conflicts in the tile.")


# -- 8b.7: im2col, the convolution as a matrix product -----------------------------------------

def im2col_spec(x: np.ndarray, K: int) -> np.ndarray:
    """Row ``p`` holds the ``p``-th ``K x K`` patch of ``x`` (patches in row-major order)."""
    out_h, out_w = x.shape[0] - K + 1, x.shape[1] - K + 1
    return np.array([x[i:i + K, j:j + K].ravel() for i in range(out_h) for j in range(out_w)])


def check_im2col(im2col: Callable) -> Feedback:
    """Exercise 8b.7: ``im2col[BLOCKS, THREADS](x, cols, K)`` with a grid-stride loop."""
    def make(shape: tuple[int, int], K: int, rng: np.random.Generator, about: str,
             launch=(BLOCKS, THREADS)) -> Test:
        x = rng.integers(-9, 10, size=shape).astype(np.float64)

        def run() -> None:
            not_yet(im2col)
            expected = im2col_spec(x, K)
            _, got = launch_on_host_arrays(im2col, *launch, x,
                                           np.full(expected.shape, np.nan), K)
            if np.array_equal(got, expected):
                return
            p, q = first_index(got != expected)
            hint = (f"patch p starts at row p // out_w and column p % out_w (out_w = "
                    f"W - K + 1 = {shape[1] - K + 1}); its element q is K x K row-major: "
                    "row q // K, column q % K")
            if np.isnan(got).any():
                hint = ("some entries were never written: loop from cuda.grid(1) over all "
                        "cols.size entries in steps of cuda.gridsize(1)")
            raise Mismatch(f"wrong value at cols[{p}, {q}]", expected[p, q], got[p, q], hint)
        return Test(f"x of shape {shape}, {K} x {K} patches, im2col[{launch[0]}, {launch[1]}] "
                    f"({about})", run,
                    hint="an index past the edge of x: patches start at rows 0 .. H - K and "
                         "columns 0 .. W - K, so out_w = W - K + 1")

    def pattern() -> Test:
        x = np.arange(8.0 * 9).reshape(8, 9)

        def run() -> None:
            from ...kernels.access_patterns import segments_per_step
            from ...kernels.record import record_accesses

            not_yet(im2col)
            cols = np.zeros(im2col_spec(x, 3).shape)
            record = record_accesses(im2col, BLOCKS, THREADS, x, cols, 3)
            owner = record.owner("cols", "W").ravel()
            expected = np.arange(cols.size) % (BLOCKS * THREADS)
            if not np.array_equal(owner, expected):
                e = first_index(owner != expected)
                raise Mismatch(f"entry {e} of cols (in memory order) was written by "
                               f"{'several threads' if owner[e] == -2 else f'thread {owner[e]}'}"
                               f", not by thread {expected[e]}", show_values=False,
                               hint="spread the entries of cols over all threads with a "
                                    "grid-stride loop over the flat index e = p * K*K + q")
            worst = max(segments_per_step(record, "cols", "W", itemsize=8), default=0)
            if worst > 2:
                raise Mismatch(f"writes to cols touch {worst} segments per warp",
                               show_values=False, hint="neighbouring threads, neighbouring e")
        return Test("who wrote cols: x of shape (8, 9), 3 x 3 patches, recorded", run)

    fixed = np.random.default_rng(87)
    unseen = unseen_rng()
    tests = [make((4, 4), 3, fixed, "two by two patches"), make((5, 7), 3, fixed, "ragged"),
             make((6, 5), 2, fixed, "2 x 2 patches"), make((3, 3), 3, fixed, "a single patch"),
             make(tuple(int(v) for v in unseen.integers(4, 10, size=2)), 3, unseen,
                  "unseen shape and values"),
             make((9, 10), 3, fixed, "one block: the grid is smaller than you planned",
                  (1, THREADS)),
             make((5, 7), 3, fixed, "3 blocks of 64: the stride is cuda.gridsize(1)", (3, 64)),
             pattern()]
    return check("8b.7", tests, candidate=im2col,
                 solved="every patch unrolled into a row: the convolution is now one matmul.")

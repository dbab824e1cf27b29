"""Checkers for *Kernel practice* (chapter 8b): histogram, scan, 1-D convolution, transpose,
row softmax, matrix-vector product, im2col and row argmax.

Each checker compares the learner's kernel with its numpy spec on ragged and
unseen sizes, then looks at *how* it got there from a recorded launch
(:func:`teachgrad.kernels.record.record_accesses`: every read and write, by
which thread) and, where threads share memory, from the race check. So a
histogram that loses increments, a scan or a convolution that races, a
convolution that reads global memory over and over, and a transpose with
strided writes or bank conflicts are rejected even when the numbers look right.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .core import Feedback, Mismatch, Test, check, unseen_rng
from .kernel_runs import first_index, is_stub, launch_on_host_arrays

THREADS = 32  #: threads per block of the 1-D kernels
BLOCKS = 2  #: blocks of the histogram launch (a grid-stride loop covers the rest)
NBINS = 8  #: bins of the histogram
RADIUS = 2  #: the convolution reads RADIUS neighbours on each side
TILE, BLOCK_ROWS = 32, 4  #: transpose: a 32 x 32 tile per block of 32 x 4 threads


def _not_yet(kernel) -> None:
    if is_stub(kernel):
        raise NotImplementedError


def _first_problem(kernel, *args, grid=2, block=THREADS) -> str | None:
    from ..kernels.race import race_check

    return race_check(kernel, grid, block, *args).first_problem()


def _blamed(kernel, wrong: Mismatch, args: Callable[[], tuple], grid=2,
            block=THREADS) -> Mismatch:
    """``wrong``, pointing at a race or a skipped barrier when the race check finds one."""
    problem = _first_problem(kernel, *args(), grid=grid, block=block)
    if problem is not None:
        wrong.hint = (f"the race check found a problem, which explains a wrong answer that "
                      f"comes and goes: {problem}")
    return wrong


def _race_test(kernel, args: Callable[[], tuple], hint: str, grid=2, block=THREADS) -> Test:
    def run() -> None:
        _not_yet(kernel)
        problem = _first_problem(kernel, *args(), grid=grid, block=block)
        if problem is not None:
            raise Mismatch(f"the race check found a problem: {problem}", hint=hint,
                           show_values=False)
    return Test(f"race check: {grid} block(s) of {block} threads", run)


# -- 8b.1: a histogram with atomics ---------------------------------------------------------

def histogram_spec(values: np.ndarray) -> np.ndarray:
    return np.bincount(values, minlength=NBINS)


def check_histogram(histogram: Callable) -> Feedback:
    """Exercise 8b.1: ``histogram[BLOCKS, THREADS](values, bins)`` counts into ``bins``."""
    def values_of(n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, NBINS, size=n).astype(np.int64)

    def make(n: int, rng: np.random.Generator, about: str) -> Test:
        values = values_of(n, rng)

        def run() -> None:
            _not_yet(histogram)
            _, got = launch_on_host_arrays(histogram, BLOCKS, THREADS, values,
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
        return Test(f"n = {n} values in {NBINS} bins ({about})", run)

    def recorded() -> Test:
        values = values_of(150, np.random.default_rng(81))

        def run() -> None:
            from ..kernels.record import record_accesses

            _not_yet(histogram)
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
             make(int(unseen.integers(65, 400)), unseen, "unseen random values")]
    return check("8b.1", tests, candidate=histogram,
                 solved="every value counted once, with no increment lost.")


# -- 8b.2: a block-level inclusive scan -------------------------------------------------------

def scan_spec(x: np.ndarray) -> np.ndarray:
    """Each block's inclusive prefix sum of its ``THREADS`` elements."""
    return np.concatenate([np.cumsum(x[s:s + THREADS]) for s in range(0, x.size, THREADS)])


def _scan_race_args() -> tuple:
    return np.arange(1.0, 2 * THREADS + 1), np.zeros(2 * THREADS)


def check_block_scan(block_scan: Callable) -> Feedback:
    """Exercise 8b.2: ``block_scan[ceil(n / THREADS), THREADS](x, out)``, per-block prefix sums."""
    levels = THREADS.bit_length() - 1

    def make(x: np.ndarray, about: str) -> Test:
        def run() -> None:
            _not_yet(block_scan)
            blocks = -(-x.size // THREADS)
            _, got = launch_on_host_arrays(block_scan, blocks, THREADS, x, np.full(x.size, np.nan))
            expected = scan_spec(x)
            if np.array_equal(got, expected):
                return
            i = first_index(got != expected)
            hint = ("out[i] is the sum of the block's elements up to and including x[i]; "
                    "each level, thread t adds the value `offset` places to its left")
            exclusive = expected - x
            if np.array_equal(got, exclusive):
                hint = "that is the exclusive scan: out[i] must include x[i] itself"
            raise _blamed(block_scan, Mismatch(f"wrong prefix sum at out[{i}]", expected[i],
                                               got[i], hint), _scan_race_args)
        return Test(f"n = {x.size} ({about})", run)

    def shape() -> Test:
        def run() -> None:
            from ..kernels.race import race_check

            _not_yet(block_scan)
            report = race_check(block_scan, 1, THREADS, np.arange(1.0, THREADS + 1),
                                np.zeros(THREADS))
            writers = {a.thread for a in report.accesses if a.kind == "W" and a.epoch >= 1}
            if len(writers) < THREADS // 2 or report.barriers < levels + 1:
                raise Mismatch(
                    f"{len(writers)} thread(s) wrote shared memory after the copy, with "
                    f"{report.barriers} barrier(s): that is a loop, not a parallel scan",
                    show_values=False,
                    hint=f"{levels} levels (offset 1, 2, 4, ...): at each, every thread t >= "
                         "offset adds buf[t - offset] into buf[t], between barriers")
        return Test(f"how the work was shared: 1 block of {THREADS} threads", run)

    unseen = unseen_rng()
    n = int(unseen.integers(33, 130))
    tests = [make(np.arange(1.0, 33.0), "one full block"),
             make(np.arange(1.0, 71.0), "three blocks, the last one partly empty"),
             make(np.array([5.0]), "a single element"),
             make(unseen.integers(-9, 10, size=n).astype(np.float64), "unseen random values"),
             _race_test(block_scan, _scan_race_args,
                        "read buf[t - offset] into a register, wait at a barrier, then add it "
                        "into buf[t] and wait again: reads and writes of one level must not mix"),
             shape()]
    return check("8b.2", tests, candidate=block_scan,
                 solved="a parallel scan in log2(n) levels, with no race between them.")


# -- 8b.3: a 1-D convolution with a halo in shared memory ------------------------------------

def conv_spec(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``out[i] = sum_k w[k] * x[i + k - RADIUS]``, zeros outside ``x``."""
    return np.correlate(np.pad(x, RADIUS), w, mode="valid")


def check_conv1d(conv1d: Callable) -> Feedback:
    """Exercise 8b.3: ``conv1d[ceil(n / THREADS), THREADS](x, w, out)`` with a shared tile + halo."""
    w = np.array([1.0, -2.0, 3.0, 4.0, -5.0])  # not symmetric: a flipped filter shows

    def make(x: np.ndarray, about: str) -> Test:
        def run() -> None:
            _not_yet(conv1d)
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
            raise _blamed(conv1d, Mismatch(f"wrong value at out[{i}]", expected[i], got[i], hint),
                          race_args)
        return Test(f"n = {x.size} ({about})", run)

    def race_args() -> tuple:
        return np.arange(1.0, 65.0), w, np.zeros(64)

    def reads() -> Test:
        x = np.arange(1.0, 71.0)

        def run() -> None:
            from ..kernels.record import record_accesses

            _not_yet(conv1d)
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
             _race_test(conv1d, race_args,
                        "wait at a barrier after filling the tile, before any thread reads "
                        "its neighbours' slots")]
    return check("8b.3", tests, candidate=conv1d,
                 solved="one global read per element, neighbours from shared memory, "
                        "halos across block edges.")


# -- 8b.4: a coalesced transpose through shared memory ----------------------------------------

def check_transpose(transpose: Callable) -> Feedback:
    """Exercise 8b.4: ``transpose[(ceil(cols/TILE), ceil(rows/TILE)), (TILE, BLOCK_ROWS)](A, out)``."""
    from ..kernels.access_patterns import bank_conflict_degree, segments_per_step

    def launch(A: np.ndarray) -> np.ndarray:
        grid = (-(-A.shape[1] // TILE), -(-A.shape[0] // TILE))
        _, got = launch_on_host_arrays(transpose, grid, (TILE, BLOCK_ROWS), A,
                                       np.full(A.T.shape, np.nan, dtype=A.dtype))
        return got

    def make(shape: tuple[int, int], rng: np.random.Generator, about: str) -> Test:
        A = rng.integers(-99, 100, size=shape).astype(np.float32)

        def run() -> None:
            _not_yet(transpose)
            got = launch(A)
            if np.array_equal(got, A.T):
                return
            r, c = first_index(got != A.T)
            raise _blamed(transpose, Mismatch(
                f"wrong value at out[{r}, {c}]", A.T[r, c], got[r, c],
                "out[c, r] = A[r, c]; at the ragged edge, guard both the reads of A and the "
                "writes of out"), race_args, grid=(1, 1), block=(TILE, BLOCK_ROWS))
        return Test(f"A of shape {shape} ({about})", run)

    def race_args() -> tuple:
        return np.ones((32, 32), np.float32), np.zeros((32, 32), np.float32)

    def patterns() -> Test:
        A = np.arange(40 * 36, dtype=np.float32).reshape(40, 36)

        def run() -> None:
            from ..kernels.record import record_accesses

            _not_yet(transpose)
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
             make(tuple(int(v) for v in unseen.integers(2, 70, size=2)), unseen, "unseen shape"),
             patterns(),
             _race_test(transpose, race_args,
                        "wait at a barrier between filling the tile and reading it back",
                        grid=(1, 1), block=(TILE, BLOCK_ROWS))]
    return check("8b.4", tests, candidate=transpose,
                 solved="coalesced reads and writes, and no bank conflicts in the tile.")


# -- 8b.5: a row softmax ------------------------------------------------------------------------

def softmax_spec(x: np.ndarray) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _row_tests(launch_and_compare: Callable, shapes: list, unseen) -> list[Test]:
    """Value tests on fixed shapes, then one unseen random shape."""
    fixed = np.random.default_rng(85)
    tests = [launch_and_compare(shape, fixed, about) for shape, about in shapes]
    shape = (int(unseen.integers(2, 6)), int(unseen.integers(33, 100)))
    return tests + [launch_and_compare(shape, unseen, "unseen shape and values")]


#: Logits whose exp overflows float64 (exp(710) already does) unless the max is subtracted.
LARGE = np.array([[800.0, 799.0, 10.0, -5.0, 0.0, 1.0], [1000.0, -1000.0, 3.0, 2.0, 1.0, 0.0]])
OVERFLOW_HINT = ("exp overflows for large inputs: subtract the row's max before exp; softmax "
                 "does not change, and the largest exponent becomes 0")


def check_row_softmax(row_softmax: Callable) -> Feedback:
    """Exercise 8b.5: ``row_softmax[rows, THREADS](x, out)``, one block per row."""
    def make(shape: tuple[int, int], rng: np.random.Generator | None, about: str) -> Test:
        x = LARGE if rng is None else (rng.normal(size=shape) * 3).round(3)

        def run() -> None:
            _not_yet(row_softmax)
            _, got = launch_on_host_arrays(row_softmax, shape[0], THREADS, x,
                                           np.full(shape, np.nan))
            expected = softmax_spec(x)
            if np.allclose(got, expected, rtol=1e-9, atol=1e-12):
                return
            r, c = first_index(~np.isclose(got, expected, rtol=1e-9, atol=1e-12))
            hint = ("per row: the max (a tree), then the sum of exp(x - max) (a tree), then "
                    "exp(x - max) / sum; each thread takes columns t, t + THREADS, ...")
            if np.isnan(got[:, THREADS:]).any():
                hint = (f"columns past the first {THREADS} were never written: each thread "
                        "must loop over columns t, t + THREADS, ... of its row")
            elif not np.all(np.isfinite(got)):
                hint = OVERFLOW_HINT
            raise _blamed(row_softmax, Mismatch(f"wrong value at out[{r}, {c}]", expected[r, c],
                                                got[r, c], hint),
                          _softmax_race_args, grid=2)
        return Test(f"x of shape {shape} ({about})", run, hint=OVERFLOW_HINT if rng is None else "")

    unseen = unseen_rng()
    shapes = [((3, 5), "short rows: most threads idle"),
              ((2, 40), "rows longer than a block"), ((4, 70), "ragged")]
    tests = _row_tests(make, shapes, unseen)
    tests.insert(1, make(LARGE.shape, None, "large values: exp(800) overflows"))
    tests.append(_race_test(row_softmax, _softmax_race_args,
                            "a barrier after every write to the shared array, and one after "
                            "everyone has read part[0], before the array is reused"))
    return check("8b.5", tests, candidate=row_softmax,
                 solved="a stable softmax per row: two tree reductions and one normalisation.")


def _softmax_race_args() -> tuple:
    x = np.arange(80.0).reshape(2, 40) / 10
    return x, np.zeros_like(x)


# -- 8b.6: a matrix-vector product -------------------------------------------------------------

def check_matvec(matvec: Callable) -> Feedback:
    """Exercise 8b.6: ``matvec[rows, THREADS](A, v, y)``, one block per row of A."""
    def make(shape: tuple[int, int], rng: np.random.Generator, about: str) -> Test:
        A = rng.integers(-9, 10, size=shape).astype(np.float64)
        v = rng.integers(-9, 10, size=shape[1]).astype(np.float64)

        def run() -> None:
            _not_yet(matvec)
            *_, got = launch_on_host_arrays(matvec, shape[0], THREADS, A, v,
                                            np.full(shape[0], np.nan))
            expected = A @ v
            if np.array_equal(got, expected):
                return
            r = first_index(got != expected)
            hint = ("y[r] = sum over c of A[r, c] * v[c]: thread t takes columns t, "
                    "t + THREADS, ..., then the block adds the THREADS partial sums as a tree")
            if np.isnan(got[r]):
                hint = "y[r] was never written: thread 0 writes part[0] at the end"
            raise _blamed(matvec, Mismatch(f"wrong value at y[{r}]", expected[r], got[r], hint),
                          _matvec_race_args, grid=2)
        return Test(f"A of shape {shape} ({about})", run)

    def coalesced() -> Test:
        def run() -> None:
            from ..kernels.access_patterns import segments_per_step
            from ..kernels.record import record_accesses

            _not_yet(matvec)
            record = record_accesses(matvec, 2, THREADS, *_matvec_race_args())
            worst = max(segments_per_step(record, "A", "R", itemsize=8), default=0)
            if worst > 2:
                raise Mismatch(f"reads of A are not coalesced: one warp's reads touch {worst} "
                               "different 128-byte segments", show_values=False,
                               hint="thread t should read A[r, t], A[r, t + THREADS], ...: "
                                    "neighbouring threads, neighbouring columns (not a block "
                                    "of columns per thread)")
        return Test("memory access pattern: A of shape (2, 64), recorded", run)

    unseen = unseen_rng()
    shapes = [((3, 5), "short rows"), ((2, 64), "two columns per thread"), ((5, 70), "ragged")]
    tests = _row_tests(make, shapes, unseen)
    tests += [_race_test(matvec, _matvec_race_args,
                         "a barrier after the partial sums are written, and after each level"),
              coalesced()]
    return check("8b.6", tests, candidate=matvec,
                 solved="one block per row, coalesced reads, a tree for the dot product.")


def _matvec_race_args() -> tuple:
    A = np.arange(128.0).reshape(2, 64) % 7
    return A, np.ones(64), np.zeros(2)


# -- 8b.7: im2col, the convolution as a matrix product -----------------------------------------

def im2col_spec(x: np.ndarray, K: int) -> np.ndarray:
    """Row ``p`` holds the ``p``-th ``K x K`` patch of ``x`` (patches in row-major order)."""
    out_h, out_w = x.shape[0] - K + 1, x.shape[1] - K + 1
    return np.array([x[i:i + K, j:j + K].ravel() for i in range(out_h) for j in range(out_w)])


def check_im2col(im2col: Callable) -> Feedback:
    """Exercise 8b.7: ``im2col[BLOCKS, THREADS](x, cols, K)`` with a grid-stride loop."""
    def make(shape: tuple[int, int], K: int, rng: np.random.Generator, about: str) -> Test:
        x = rng.integers(-9, 10, size=shape).astype(np.float64)

        def run() -> None:
            _not_yet(im2col)
            expected = im2col_spec(x, K)
            _, got = launch_on_host_arrays(im2col, BLOCKS, THREADS, x,
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
        return Test(f"x of shape {shape}, {K} x {K} patches ({about})", run,
                    hint="an index past the edge of x: patches start at rows 0 .. H - K and "
                         "columns 0 .. W - K, so out_w = W - K + 1")

    def pattern() -> Test:
        x = np.arange(8.0 * 9).reshape(8, 9)

        def run() -> None:
            from ..kernels.access_patterns import segments_per_step
            from ..kernels.record import record_accesses

            _not_yet(im2col)
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
             pattern()]
    return check("8b.7", tests, candidate=im2col,
                 solved="every patch unrolled into a row: the convolution is now one matmul.")


# -- 8b.8: a row argmax: reducing (value, index) pairs ------------------------------------------

def check_row_argmax(row_argmax: Callable) -> Feedback:
    """Exercise 8b.8: ``row_argmax[rows, THREADS](x, out)``: ``np.argmax`` of each row."""
    def make(x: np.ndarray, about: str) -> Test:
        def run() -> None:
            _not_yet(row_argmax)
            _, got = launch_on_host_arrays(row_argmax, x.shape[0], THREADS, x,
                                           np.full(x.shape[0], -7, dtype=np.int64))
            expected = np.argmax(x, axis=1)
            if np.array_equal(got, expected):
                return
            r = first_index(got != expected)
            ties = np.flatnonzero(x[r] == x[r].max())
            hint = ("keep (value, index) pairs: each thread its best over columns t, "
                    "t + THREADS, ...; then a tree keeps the larger value of each pair of pairs")
            if np.isclose(got[r], x[r].max()) and got[r] != expected[r]:
                hint = "that is the largest value; the exercise asks for its position"
            elif got[r] in ties:
                hint = ("on a tie np.argmax gives the first position: keep the smaller index "
                        "when two values are equal")
            elif got[r] == -7:
                hint = "out[r] was never written: thread 0 writes the winner's index at the end"
            raise _blamed(row_argmax, Mismatch(f"wrong index for row {r}", expected[r], got[r],
                                               hint), _argmax_race_args, grid=2)
        return Test(f"x of shape {x.shape} ({about})", run)

    fixed = np.random.default_rng(88)
    unseen = unseen_rng()
    ties = np.zeros((3, 70))
    ties[0, [5, 40, 66]] = 9.0  # the first 9 is in thread 5's share, the others later
    ties[1, [33, 1]] = 4.0
    ties[2] = -1.0  # all equal: the answer is 0
    n = int(unseen.integers(33, 100))
    tests = [make(fixed.normal(size=(3, 5)).round(2), "short rows"),
             make(fixed.normal(size=(4, 70)).round(2), "rows longer than a block"),
             make(ties, "ties: the first position wins"),
             make(unseen.integers(-50, 50, size=(3, n)).astype(np.float64), "unseen, with ties"),
             _race_test(row_argmax, _argmax_race_args,
                        "a barrier after the pairs are written, and after each level")]
    return check("8b.8", tests, candidate=row_argmax,
                 solved="np.argmax per row, ties included, as a tree over (value, index) pairs.")


def _argmax_race_args() -> tuple:
    return (np.arange(80.0).reshape(2, 40) * 7) % 11, np.zeros(2, dtype=np.int64)

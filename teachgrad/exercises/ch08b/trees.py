"""Chapter 8b checkers for kernels built on tree reductions: block scan, row softmax,
matrix-vector product and row argmax."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .shared import THREADS, blamed, not_yet, race_test, row_work_test
from ..core import Feedback, Mismatch, Test, check, unseen_rng
from ..kernel_runs import first_index, launch_on_host_arrays


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
            not_yet(block_scan)
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
            raise blamed(block_scan, Mismatch(f"wrong prefix sum at out[{i}]", expected[i],
                                               got[i], hint), _scan_race_args)
        return Test(f"n = {x.size} ({about})", run)

    def shape() -> Test:
        def run() -> None:
            from ...kernels.race import race_check

            not_yet(block_scan)
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
             race_test(block_scan, _scan_race_args,
                        "read buf[t - offset] into a register, wait at a barrier, then add it "
                        "into buf[t] and wait again: reads and writes of one level must not mix"),
             shape()]
    return check("8b.2", tests, candidate=block_scan,
                 solved="a parallel scan in log2(n) levels, with no race between them.")


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


def spiked_rows(rng: np.random.Generator, columns) -> np.ndarray:
    """Mixed-sign rows of 70 columns, row r with one value 1000 above the rest at ``columns[r]``.

    Every slot of the block's tree must reach the max: a max taken over only some
    threads' shares is off by about 1000, and exp(1000) overflows.
    """
    x = (rng.normal(size=(len(columns), 70)) * 3).round(3)
    x[np.arange(len(columns)), columns] = 1000.0 + np.arange(len(columns))
    return x


#: Where ``spiked_rows`` puts each row's max: threads 13, 31, 8, 17, 1 and 0, first or
#: later columns of their share (65 and 32 are a stride's second and third visit).
SPIKES = (45, 63, 40, 17, 65, 32)


def far_apart_rows(rng: np.random.Generator, cols: int) -> np.ndarray:
    """Rows about 900 above and below zero, and masked rows (-inf where a logit is masked).

    Only the row's own max works: another row's max leaves exp(x - max) all 0 or inf.
    """
    x = (rng.normal(size=(4, cols)) * 3).round(3)
    x[0] += 900.0
    x[1] -= 900.0
    x[2, cols // 2:] = -np.inf  # a causal-style mask: the second half is masked
    x[3, :] = -np.inf
    x[3, cols - 1] = 5.0  # one logit left: its probability is 1
    return x


WHOLE_ROW_HINT = ("exp(x - m) overflows (or the sum is 0) when m is not this row's max: "
                  "subtract the max of the whole row, every thread's share through every "
                  "level of the tree")
UNWRITTEN = -1.0  #: what out holds before the launch: no softmax value is negative


def check_row_softmax(row_softmax: Callable) -> Feedback:
    """Exercise 8b.5: ``row_softmax[rows, THREADS](x, out)``, one block per row."""
    def make(x: np.ndarray, about: str, hint: str = "") -> Test:
        def run() -> None:
            not_yet(row_softmax)
            try:
                _, got = launch_on_host_arrays(row_softmax, x.shape[0], THREADS, x,
                                               np.full(x.shape, UNWRITTEN))
            except ArithmeticError as error:  # exp overflowed, or a sum of 0 was divided by
                raise blamed(row_softmax, Mismatch(
                    f"the kernel raised {type(error).__name__} ({error})", show_values=False,
                    hint=WHOLE_ROW_HINT), _softmax_race_args, grid=3) from error
            expected = softmax_spec(x)
            if np.allclose(got, expected, rtol=1e-9, atol=1e-12):
                return
            r, c = first_index(~np.isclose(got, expected, rtol=1e-9, atol=1e-12))
            hint = ("per row: the max (a tree over every thread's share), then the sum of "
                    "exp(x - max) (a tree), then exp(x - max) / sum; each thread takes "
                    "columns t, t + THREADS, ...")
            if (got[:, THREADS:] == UNWRITTEN).any():
                hint = (f"columns past the first {THREADS} were never written: each thread "
                        "must loop over columns t, t + THREADS, ... of its row")
            elif not np.all(np.isfinite(got)):
                hint = WHOLE_ROW_HINT
            raise blamed(row_softmax, Mismatch(f"wrong value at out[{r}, {c}]", expected[r, c],
                                                got[r, c], hint),
                          _softmax_race_args, grid=3)
        return Test(f"x of shape {x.shape} ({about})", run, hint=hint)

    fixed = np.random.default_rng(85)
    unseen = unseen_rng()
    n = int(unseen.integers(33, 100))
    tests = [make((fixed.normal(size=(3, 5)) * 3).round(3), "short rows: most threads idle"),
             make(LARGE, "large values: exp(800) overflows", OVERFLOW_HINT),
             make((fixed.normal(size=(2, 40)) * 3).round(3), "rows longer than a block"),
             make((fixed.normal(size=(4, 70)) * 3).round(3), "ragged"),
             make(spiked_rows(fixed, SPIKES), "each row's max in a different thread's share",
                  WHOLE_ROW_HINT),
             make(far_apart_rows(fixed, 64), "rows far apart, masked logits (-inf)",
                  WHOLE_ROW_HINT),
             make((unseen.normal(size=(int(unseen.integers(2, 6)), n)) * 3).round(3),
                  "unseen shape and values"),
             make(spiked_rows(unseen, unseen.integers(1, 70, size=4)),
                  "unseen, a max in an unseen place", WHOLE_ROW_HINT),
             race_test(row_softmax, _softmax_race_args,
                       "a barrier after every write to the shared array, and one after "
                       "everyone has read part[0], before the array is reused", grid=3),
             row_work_test(row_softmax, _softmax_race_args, "x", "out",
                           "each thread writes out[r, c] for its own columns only")]
    return check("8b.5", tests, candidate=row_softmax,
                 solved="a stable softmax per row: two tree reductions and one normalisation.")


def _softmax_race_args() -> tuple:
    x = np.random.default_rng(5).normal(size=(3, 70)).round(3)  # ragged: not a whole block
    return x, np.zeros_like(x)


# -- 8b.6: a matrix-vector product -------------------------------------------------------------

def check_matvec(matvec: Callable) -> Feedback:
    """Exercise 8b.6: ``matvec[rows, THREADS](A, v, y)``, one block per row of A."""
    def make(shape: tuple[int, int], rng: np.random.Generator, about: str) -> Test:
        A = rng.integers(-9, 10, size=shape).astype(np.float64)
        v = rng.integers(-9, 10, size=shape[1]).astype(np.float64)

        def run() -> None:
            not_yet(matvec)
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
            raise blamed(matvec, Mismatch(f"wrong value at y[{r}]", expected[r], got[r], hint),
                          _matvec_race_args, grid=3)
        return Test(f"A of shape {shape} ({about})", run)

    def coalesced() -> Test:
        def run() -> None:
            from ...kernels.access_patterns import segments_per_step
            from ...kernels.record import record_accesses

            not_yet(matvec)
            A = np.arange(128.0).reshape(2, 64) % 7  # rows start on 128-byte segments
            record = record_accesses(matvec, 2, THREADS, A, np.ones(64), np.zeros(2))
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
    tests += [race_test(matvec, _matvec_race_args,
                        "a barrier after the partial sums are written, and after each level",
                        grid=3),
              coalesced(),
              row_work_test(matvec, _matvec_race_args, "A", "y",
                            "one thread (thread 0) writes y[r], after the last barrier")]
    return check("8b.6", tests, candidate=matvec,
                 solved="one block per row, coalesced reads, a tree for the dot product.")


def _matvec_race_args() -> tuple:
    A = np.arange(210.0).reshape(3, 70) % 7 - 3  # ragged: 70 is not a whole block
    return A, np.ones(70), np.zeros(3)


# -- 8b.8: a row argmax: reducing (value, index) pairs ------------------------------------------

def check_row_argmax(row_argmax: Callable) -> Feedback:
    """Exercise 8b.8: ``row_argmax[rows, THREADS](x, out)``: ``np.argmax`` of each row."""
    def make(x: np.ndarray, about: str) -> Test:
        def run() -> None:
            not_yet(row_argmax)
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
            elif got[r] < 0 and np.isneginf(x[r]).all():
                hint = ("every value of this row is -inf, and np.argmax gives 0: a thread "
                        "takes its first column whatever its value (-inf > -inf is false), "
                        "and an empty slot (a thread with no column) never wins, not even "
                        "a tie")
            elif got[r] < 0:
                hint = (f"{got[r]} is not a column: every column of the row must be "
                        "visited by exactly the threads that own it, from column 0")
            raise blamed(row_argmax, Mismatch(f"wrong index for row {r}", expected[r], got[r],
                                               hint), _argmax_race_args, grid=3)
        return Test(f"x of shape {x.shape} ({about})", run)

    fixed = np.random.default_rng(88)
    unseen = unseen_rng()
    ties = np.zeros((3, 70))
    ties[0, [5, 40, 66]] = 9.0  # the first 9 is in thread 5's share, the others later
    ties[1, [33, 1]] = 4.0
    ties[2] = -1.0  # all equal: the answer is 0
    n = int(unseen.integers(33, 100))
    masked = unseen.integers(-50, 50, size=(4, n)).astype(np.float64)
    masked[unseen.random(masked.shape) < 0.6] = -np.inf
    masked[0] = -np.inf
    tests = [make(fixed.normal(size=(3, 5)).round(2), "short rows"),
             make(fixed.normal(size=(4, 70)).round(2), "rows longer than a block"),
             make(ties, "ties: the first position wins"),
             make(_argmax_edges(fixed), "the max in the first, the last, one lone column"),
             make(_argmax_minus_inf(), "-inf: rows of -inf, -inf in thread 0's share"),
             make(np.array([[-np.inf] * 5, [-np.inf, -1.0, -np.inf, -2.0, 3.0]]),
                  "short rows of -inf, the max in the last column"),
             make(unseen.integers(-50, 50, size=(3, n)).astype(np.float64), "unseen, with ties"),
             make(masked, "unseen, mostly -inf"),
             race_test(row_argmax, _argmax_race_args,
                       "a barrier after the pairs are written, and after each level", grid=3),
             row_work_test(row_argmax, _argmax_race_args, "x", "out",
                           "one thread (thread 0) writes out[r], after the last barrier")]
    return check("8b.8", tests, candidate=row_argmax,
                 solved="np.argmax per row, ties included, as a tree over (value, index) pairs.")


def _argmax_edges(rng: np.random.Generator) -> np.ndarray:
    """Rows of two whole blocks (64 columns) whose max sits where off-by-one shares miss it."""
    x = rng.normal(size=(5, 64)).round(2)
    x[0, 63] = 9.0  # the last column: thread 31's last one
    x[1, 0] = 9.0  # column 0: thread 0's first, bigger than its later ones
    x[2] = 0.0
    x[2, 40] = 9.0  # one lone column above a row of equal values
    x[3, 32] = 9.0  # the first column of the second block
    x[4, [31, 32]] = 9.0  # a tie across the edge of a block: 31 wins
    return x


def _argmax_minus_inf() -> np.ndarray:
    """-inf where values are masked: all of a row, thread 0's whole share, all but one column."""
    x = np.full((4, 70), -np.inf)  # row 0: every value -inf, np.argmax gives 0
    x[1, 50] = -3.0
    x[2, [37, 69, 5]] = [-5.0, -5.0, -6.0]  # a tie at -5 after thread 0's -inf columns
    x[3, 1::2] = np.arange(35.0) - 20.0  # mixed signs between the -inf
    return x


def _argmax_race_args() -> tuple:
    x = (np.arange(210.0).reshape(3, 70) * 7) % 11  # ragged: 70 is not a whole block
    return x, np.zeros(3, dtype=np.int64)

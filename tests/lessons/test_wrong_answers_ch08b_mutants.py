"""Kernel practice (chapter 8b): the wrong answers that mutation testing found, rejected.

`make check-exercises` mutates the reference solutions; these are the mutants that
chapter 8b's checkers once let through, written out as a learner would write them:
a max tree that misses some threads' shares (exp then overflows), another row's max,
a share that starts one column early or strides by 33, a row of -inf, empty slots that
win a tie, and outputs written by several threads. Right variants that the checkers
must keep accepting sit beside them.
"""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import math

import numpy as np
import pytest
from numba import cuda, float64, int64

from teachgrad.exercises import SOLVED, ch08b
from teachgrad.exercises.ch08b import THREADS, TILE
from teachgrad.exercises.ch08b.trees import SPIKES, far_apart_rows, spiked_rows

from test_wrong_answers_ch08b import rejected, transpose_kernel


# -- 8b.5 row softmax ---------------------------------------------------------------------------

def softmax_kernel(*, max_stop="columns", max_stride=THREADS, max_row_shift=0, max_tree=True,
                   first_step=THREADS // 2, last_step=1, shrink=2, out_stride=THREADS,
                   exps_in_out=False, slot_shift=0, subtract_max=True, barrier_after_max=True,
                   strided=True):
    """A row softmax; each keyword is one way to get it wrong (or right another way)."""
    @cuda.jit
    def softmax(x, out):
        part = cuda.shared.array(THREADS, float64)
        r, t = cuda.blockIdx.x, cuda.threadIdx.x
        n = x.shape[1] if strided else min(t + 1, x.shape[1])  # not strided: column t only
        stop = {"columns": n, "rows": x.shape[0], "but_last": n - 1}[max_stop]
        best = -math.inf
        for c in range(t, stop, max_stride):
            best = max(best, x[r + max_row_shift, c])
        part[(t + slot_shift) % THREADS] = best
        cuda.syncthreads()
        step = first_step
        while max_tree and step >= last_step:
            if t < step:
                part[t] = max(part[t], part[t + step])
            cuda.syncthreads()
            step //= shrink
        row_max = part[0] if subtract_max else 0.0
        if barrier_after_max:
            cuda.syncthreads()
        total = 0.0
        for c in range(t, n, THREADS):
            e = math.exp(x[r, c] - row_max)
            if exps_in_out:
                out[r, c] = e
            total += e
        part[t] = total
        cuda.syncthreads()
        step = THREADS // 2
        while step > 0:
            if t < step:
                part[t] += part[t + step]
            cuda.syncthreads()
            step //= 2
        for c in range(t, n, out_stride):
            if exps_in_out:
                out[r, c] /= part[0]
            else:
                out[r, c] = math.exp(x[r, c] - row_max) / part[0]
    return softmax


@pytest.mark.parametrize("mistake", [
    dict(max_tree=False),  # row_max = thread 0's share only
    dict(shrink=3),  # steps 16, 5, 1: some slots never reach part[0]
    dict(first_step=THREADS // 3),  # steps 10, 5, 2, 1
    dict(last_step=2),  # the last level (step 1) skipped
    dict(max_stop="rows"),  # range(t, x.shape[0], ...): as many columns as rows
    dict(max_stop="but_last"),  # the last column never seen by the max
    dict(max_stride=THREADS + 1),  # columns 32, 65, ... never seen by the max
    dict(max_row_shift=-1),  # the previous row's max
], ids=lambda m: ",".join(f"{k}={v}" for k, v in m.items()))
def test_softmax_whose_max_is_not_the_rows_max_overflows(mistake):
    rejected(ch08b.check_row_softmax(softmax_kernel(**mistake)), "the max of the whole row")


def test_softmax_with_two_threads_writing_one_output():
    rejected(ch08b.check_row_softmax(softmax_kernel(out_stride=THREADS - 1)),
             "was written by 2 threads", "race")


def test_softmax_right_variants_are_accepted():
    # exp stored in out and divided in place, and partial maxima in rotated slots: both right
    assert ch08b.check_row_softmax(softmax_kernel(exps_in_out=True)).status == SOLVED
    assert ch08b.check_row_softmax(softmax_kernel(slot_shift=5)).status == SOLVED


def test_softmax_adversarial_rows_hold_their_promise():
    # each row's max in a different thread's share; exp overflows unless the max is subtracted
    x = spiked_rows(np.random.default_rng(0), SPIKES)
    shares = [int(np.argmax(row)) % THREADS for row in x]
    assert len(set(shares)) == len(shares) == x.shape[0]
    far = far_apart_rows(np.random.default_rng(0), 64)
    for rows in (x, far[:2]):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            naive = np.exp(rows) / np.exp(rows).sum(axis=1, keepdims=True)
        assert not np.isfinite(naive).all(axis=1).any()
        assert np.isfinite(ch08b.softmax_spec(rows)).all()
    # another row's max: the rows are so far apart that exp(x - m) is all 0 or overflows
    with np.errstate(over="ignore"):
        assert np.exp(far[1] - far[0].max()).sum() == 0 and np.isinf(np.exp(far[0] - far[1].max())).all()


# -- 8b.6 matrix-vector product -----------------------------------------------------------------

def test_matvec_with_every_thread_writing_the_result():
    from test_wrong_answers_ch08b_trees import matvec_kernel

    rejected(ch08b.check_matvec(matvec_kernel(every_thread_writes=True)),
             "was written by 32 threads")


# -- 8b.8 row argmax ---------------------------------------------------------------------------

def argmax_kernel(*, first_column_rule=True, start=0, stride=THREADS, compare_shift=0,
                  empty_wins_ties=False, writers="thread 0", sentinel_past_end=False):
    """A row argmax; each keyword is one way to get it wrong (or right another way)."""
    @cuda.jit
    def row_argmax(x, out):
        vals = cuda.shared.array(THREADS, float64)
        idxs = cuda.shared.array(THREADS, int64)
        r, t = cuda.blockIdx.x, cuda.threadIdx.x
        empty = x.shape[1] if sentinel_past_end else -1
        best, where = -math.inf, empty
        for c in range(t + start, x.shape[1], stride):
            if (first_column_rule and where == empty) or x[r, c + compare_shift] > best:
                best, where = x[r, c], c
        vals[t], idxs[t] = best, where
        cuda.syncthreads()
        step = THREADS // 2
        while step > 0:
            if t < step:
                ov, oi = vals[t + step], idxs[t + step]
                real = oi >= (-1 if empty_wins_ties else 0)
                if real and (ov > vals[t] or (ov == vals[t] and oi < idxs[t])):
                    vals[t], idxs[t] = ov, oi
            cuda.syncthreads()
            step //= 2
        if writers == "every thread" or t == 0:
            out[r] = idxs[0]
    return row_argmax


def test_argmax_that_never_takes_a_column_of_minus_inf():
    rejected(ch08b.check_row_argmax(argmax_kernel(first_column_rule=False)),
             "every value of this row is -inf", "takes its first column")


def test_argmax_starting_one_column_early_returns_minus_one():
    rejected(ch08b.check_row_argmax(argmax_kernel(first_column_rule=False, start=-1)),
             "is not a column")
    rejected(ch08b.check_row_argmax(argmax_kernel(start=-1)), "wrong index for row")


def test_argmax_striding_past_some_columns():
    rejected(ch08b.check_row_argmax(argmax_kernel(stride=THREADS + 1)),
             "the max in the first, the last, one lone column")


def test_argmax_comparing_the_previous_column():
    rejected(ch08b.check_row_argmax(argmax_kernel(compare_shift=-1)), "wrong index for row")


def test_argmax_where_an_empty_slot_wins_a_tie_of_minus_inf():
    rejected(ch08b.check_row_argmax(argmax_kernel(empty_wins_ties=True)),
             "short rows of -inf", "never wins, not even a tie")


def test_argmax_with_every_thread_writing_the_result():
    rejected(ch08b.check_row_argmax(argmax_kernel(writers="every thread")),
             "was written by 32 threads")


def test_argmax_with_empty_slots_past_the_end_is_accepted():
    # "no column yet" as an index past the end: it loses every tie, the same rule everywhere
    assert ch08b.check_row_argmax(argmax_kernel(sentinel_past_end=True)).status == SOLVED


# -- 8b.4 transpose ----------------------------------------------------------------------------

def test_transpose_writing_past_its_tile_races_with_the_next_block():
    # j up to TILE inclusive: one row of the padding column too many, onto the next tile
    rejected(ch08b.check_transpose(transpose_kernel(rows_written=TILE + 1)),
             "was written by 2 threads")

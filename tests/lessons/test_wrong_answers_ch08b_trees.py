"""Kernel practice (chapter 8b), the tree-reduction kernels: wrong answers rejected by name.

Scan, row softmax, matrix-vector product and row argmax: a missing or misplaced
barrier, a loop in one thread, an exclusive scan, no max subtracted, a chunk of
columns per thread (uncoalesced), ties broken the wrong way.
"""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import math

from numba import cuda, float64, int64

from teachgrad.exercises import SOLVED, ch08b
from teachgrad.exercises.ch08b import THREADS

from test_wrong_answers_ch08b import rejected
from test_wrong_answers_ch08b_mutants import softmax_kernel


# -- 8b.2 scan --------------------------------------------------------------------------------

def scan_kernel(*, exclusive=False, middle_barrier=True, barrier_in_branch=False):
    @cuda.jit
    def scan(x, out):
        buf = cuda.shared.array(THREADS, float64)
        t = cuda.threadIdx.x
        i = cuda.grid(1)
        buf[t] = x[i] if i < x.size else 0.0
        cuda.syncthreads()
        offset = 1
        while offset < THREADS:
            left = buf[t - offset] if t >= offset else 0.0
            if middle_barrier:
                cuda.syncthreads()
            if barrier_in_branch:
                if t >= offset:
                    buf[t] += left
                    cuda.syncthreads()
            else:
                buf[t] += left
                cuda.syncthreads()
            offset *= 2
        if i < x.size:
            out[i] = buf[t] - (x[i] if exclusive else 0.0)
    return scan


@cuda.jit
def scan_in_thread_zero(x, out):
    buf = cuda.shared.array(THREADS, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    if t == 0:
        for k in range(1, THREADS):
            buf[k] += buf[k - 1]
    cuda.syncthreads()
    if i < x.size:
        out[i] = buf[t]


def test_scan_that_is_exclusive():
    rejected(ch08b.check_block_scan(scan_kernel(exclusive=True)), "that is the exclusive scan")


def test_scan_without_the_barrier_between_reading_and_writing():
    rejected(ch08b.check_block_scan(scan_kernel(middle_barrier=False)), "race")


def test_scan_with_the_barrier_inside_the_branch():
    rejected(ch08b.check_block_scan(scan_kernel(barrier_in_branch=True)),
             "not every thread reached the same barriers")


def test_scan_as_a_loop_in_thread_zero():
    rejected(ch08b.check_block_scan(scan_in_thread_zero), "that is a loop, not a parallel scan")


# -- 8b.5 row softmax ---------------------------------------------------------------------------

def test_softmax_without_subtracting_the_max_overflows():
    rejected(ch08b.check_row_softmax(softmax_kernel(subtract_max=False)), "large values",
             "subtract the row's max")


def test_softmax_reusing_shared_memory_before_everyone_read_the_max():
    rejected(ch08b.check_row_softmax(softmax_kernel(barrier_after_max=False)), "race")


def test_softmax_covering_only_the_first_columns():
    rejected(ch08b.check_row_softmax(softmax_kernel(strided=False)), "rows longer than a block",
             "were never written", "each thread must loop")


# -- 8b.6 matrix-vector product ------------------------------------------------------------------

def matvec_kernel(*, barrier=True, chunked=False, serial=False, every_thread_writes=False,
                  swapped=False):
    @cuda.jit
    def matvec(A, v, y):
        part = cuda.shared.array(THREADS, float64)
        r, t = cuda.blockIdx.x, cuda.threadIdx.x
        acc = 0.0
        if chunked:  # each thread a block of neighbouring columns: strided across the warp
            per = (A.shape[1] + THREADS - 1) // THREADS
            for c in range(t * per, min((t + 1) * per, A.shape[1])):
                acc += A[r, c] * v[c]
        elif swapped:  # row and column mixed up (kept in range so that it runs)
            for c in range(t, A.shape[1], THREADS):
                acc += A[c % A.shape[0], r % A.shape[1]] * v[c]
        else:
            for c in range(t, A.shape[1], THREADS):
                acc += A[r, c] * v[c]
        part[t] = acc
        if barrier:
            cuda.syncthreads()
        if serial:
            if t == 0:
                for k in range(1, THREADS):
                    part[0] += part[k]
        else:
            step = THREADS // 2
            while step > 0:
                if t < step:
                    part[t] += part[t + step]
                if barrier:
                    cuda.syncthreads()
                step //= 2
        if t == 0 or every_thread_writes:
            y[r] = part[0]
    return matvec


def test_matvec_without_barriers():
    rejected(ch08b.check_matvec(matvec_kernel(barrier=False)), "race")


def test_matvec_with_a_chunk_of_columns_per_thread_is_not_coalesced():
    rejected(ch08b.check_matvec(matvec_kernel(chunked=True)), "reads of A are not coalesced")


def test_matvec_summed_by_thread_zero_alone_races_with_nobody_but_is_checked():
    # a serial sum after one barrier is correct and race-free; the tree is not required
    # here, so this one must pass: the checker does not reject a right, slower answer
    assert ch08b.check_matvec(matvec_kernel(serial=True)).status == SOLVED


def test_matvec_with_row_and_column_swapped():
    rejected(ch08b.check_matvec(matvec_kernel(swapped=True)), "wrong value at y[")


# -- 8b.8 row argmax ---------------------------------------------------------------------------

def argmax_kernel(*, value_not_index=False, last_on_tie=False, barrier=True, strided=True):
    @cuda.jit
    def row_argmax(x, out):
        vals = cuda.shared.array(THREADS, float64)
        idxs = cuda.shared.array(THREADS, int64)
        r, t = cuda.blockIdx.x, cuda.threadIdx.x
        best, where = -math.inf, -1
        stop = x.shape[1] if strided else min(t + 1, x.shape[1])
        for c in range(t, stop, THREADS):
            if x[r, c] > best or (last_on_tie and x[r, c] == best):
                best, where = x[r, c], c
        vals[t], idxs[t] = best, where
        if barrier:
            cuda.syncthreads()
        step = THREADS // 2
        while step > 0:
            if t < step:
                ov, oi = vals[t + step], idxs[t + step]
                tie = ov == vals[t] and (oi > idxs[t] if last_on_tie else oi < idxs[t])
                if oi >= 0 and (ov > vals[t] or tie or idxs[t] < 0):
                    vals[t], idxs[t] = ov, oi
            if barrier:
                cuda.syncthreads()
            step //= 2
        if t == 0:
            out[r] = int(vals[0]) if value_not_index else idxs[0]
    return row_argmax


def test_argmax_returning_the_value():
    rejected(ch08b.check_row_argmax(argmax_kernel(value_not_index=True)), "wrong index for row")


def test_argmax_keeping_the_last_of_equal_values():
    rejected(ch08b.check_row_argmax(argmax_kernel(last_on_tie=True)), "ties",
             "keep the smaller index")


def test_argmax_without_barriers():
    rejected(ch08b.check_row_argmax(argmax_kernel(barrier=False)), "race")


def test_argmax_looking_only_at_the_first_columns():
    rejected(ch08b.check_row_argmax(argmax_kernel(strided=False)), "rows longer than a block")

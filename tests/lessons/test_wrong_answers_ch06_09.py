"""Wrong answers to the GPU chapters' exercises (6-9), each rejected with feedback that names it.

Beside the slips (a missing barrier, a wrong index), these are the shortcuts
that give right numbers without the method taught: one thread doing all the
work, a barrier inside a branch that only some threads take (which the
simulator lets through but a GPU does not), a loop in thread 0 instead of a
tree, and copying a kernel from elsewhere in the chapter.
"""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import math
import statistics

import numpy as np
from numba import cuda, float64

from teachgrad.exercises import ERROR, WRONG, ch06, ch07, ch08, ch09

from notebook_solutions import solution_source
from test_exercises_ch06_09 import define, timer

THREADS = ch07.THREADS


def rejected(feedback, *words):
    assert feedback.status in (WRONG, ERROR), feedback.message
    for word in words:
        assert word in feedback.message, feedback.message


# -- 6.1 -----------------------------------------------------------------------------------------

@cuda.jit
def saxpy_all_in_thread_zero(a, x, y):
    if cuda.grid(1) == 0:
        for i in range(y.size):
            y[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_block_stride(a, x, y):
    for i in range(cuda.threadIdx.x, y.size, cuda.blockDim.x):
        y[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_overwriting(a, x, y):
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        y[i] = a * x[i]


def test_saxpy_done_by_thread_zero_alone():
    rejected(ch06.check_saxpy(saxpy_all_in_thread_zero), "who wrote each element",
             "element 1 was written by thread 0, not by thread 1", "only 1 of the 16 threads",
             "spread the work")


def test_saxpy_striding_by_the_block_instead_of_the_grid():
    rejected(ch06.check_saxpy(saxpy_block_stride), "updated 2 times instead of once")


def test_saxpy_forgetting_to_add_y():
    rejected(ch06.check_saxpy(saxpy_overwriting), "wrong value at element 0",
             "y[i] = a * x[i] + y[i]")


# -- 6.2 -----------------------------------------------------------------------------------------

def test_passes_off_by_one_for_everyone():
    rejected(ch06.check_passes_per_thread(
        lambda n, blocks, threads: [n // (blocks * threads)] * (blocks * threads)),
        "wrong number of passes for thread 0")


def test_passes_lookup_table_fails_on_unseen_launches():
    table = {case: ch06.recorded_passes(*case).tolist() for case in ch06.PASSES_CASES}
    rejected(ch06.check_passes_per_thread(
        lambda n, blocks, threads: table.get((n, blocks, threads), [0] * (blocks * threads))),
        "wrong number of passes")


# -- 7.1 -----------------------------------------------------------------------------------------

@cuda.jit
def max_with_barrier_in_the_branch(x, out):
    partial = cuda.shared.array(THREADS, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.size else -math.inf
    cuda.syncthreads()
    step = THREADS // 2
    while step > 0:
        if t < step:
            partial[t] = max(partial[t], partial[t + step])
            cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = partial[0]


@cuda.jit
def max_in_a_loop_of_thread_zero(x, out):
    if cuda.threadIdx.x == 0:
        start = cuda.blockIdx.x * THREADS
        best = -math.inf
        for i in range(start, min(start + THREADS, x.size)):
            best = max(best, x[i])
        out[cuda.blockIdx.x] = best


@cuda.jit
def max_in_shared_memory_by_thread_zero(x, out):
    partial = cuda.shared.array(THREADS, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.size else -math.inf
    cuda.syncthreads()
    if t == 0:
        best = partial[0]
        for k in range(1, THREADS):
            best = max(best, partial[k])
        out[cuda.blockIdx.x] = best


def test_block_max_with_the_barrier_inside_the_if():
    rejected(ch07.check_block_max(max_with_barrier_in_the_branch),
             "a barrier is not reached by every thread of the block",
             "thread 0 passed 6 barrier(s) but thread 31 only 1",
             "skipped by thread(s) 16-31", "move it out of the `if`")


def test_block_max_as_a_serial_loop_in_thread_zero():
    rejected(ch07.check_block_max(max_in_a_loop_of_thread_zero),
             "never used shared memory")


def test_block_max_serial_over_shared_memory():
    rejected(ch07.check_block_max(max_in_shared_memory_by_thread_zero),
             "only thread 0 combined values after the copy, with 1 barrier(s)",
             "that is a loop, not a tree", "16 threads at the first level")


# -- 7.2 -----------------------------------------------------------------------------------------

def fixed_with(edit) -> object:
    """The broken kernel from the chapter, with ``edit(source)`` applied, as a learner's cell."""
    source = ch07.BROKEN_SUM_OF_SQUARES.replace("broken_sum_of_squares", "fixed_sum_of_squares")
    return define_with_source(edit(source), "fixed_sum_of_squares")


def define_with_source(source: str, name: str):
    """Like a notebook cell: the source stays readable by inspect (linecache knows it)."""
    import linecache

    filename = f"<cell {name} {abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"np": np, "cuda": cuda, "float64": float64, "math": math, "THREADS": THREADS}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


LOAD = "    partial[t] = x[i] * x[i] if i < x.size else 0.0\n"


def test_sum_of_squares_reference_passes_with_its_source_readable():
    solution = define_with_source(solution_source("07_reductions_and_shared_memory",
                                                  "fixed_sum_of_squares"), "fixed_sum_of_squares")
    assert ch07.check_fixed_sum_of_squares(solution).passed


def test_sum_of_squares_left_broken():
    rejected(ch07.check_fixed_sum_of_squares(fixed_with(lambda s: s)), "race")


def test_sum_of_squares_with_the_barrier_inside_the_if():
    def in_branch(source):  # the missing barrier added, the loop's barrier moved into the if
        return source.replace(LOAD, LOAD + "    cuda.syncthreads()\n").replace(
            "            partial[t] += partial[t + stride]\n        cuda.syncthreads()\n",
            "            partial[t] += partial[t + stride]\n            cuda.syncthreads()\n")
    rejected(ch07.check_fixed_sum_of_squares(fixed_with(in_branch)),
             "not reached by every thread")


def test_sum_of_squares_replaced_by_the_chapters_block_sum():
    block_sum = ch07.BROKEN_SUM_OF_SQUARES.replace(LOAD, LOAD.replace("x[i] * x[i]", "x[i]")
                                                   + "    cuda.syncthreads()\n")
    kernel = define_with_source(block_sum.replace("broken_sum_of_squares", "fixed_sum_of_squares"),
                                "fixed_sum_of_squares")
    rejected(ch07.check_fixed_sum_of_squares(kernel), "that is the plain sum",
             "not from block_sum")


def test_sum_of_squares_rewritten_with_the_other_tree():
    copied = solution_source("07_reductions_and_shared_memory", "fixed_sum_of_squares").replace(
        "    stride = 1\n    while stride < THREADS:\n        if t % (2 * stride) == 0:\n"
        "            partial[t] += partial[t + stride]\n        cuda.syncthreads()\n"
        "        stride *= 2\n",
        "    step = THREADS // 2\n    while step > 0:\n        if t < step:\n"
        "            partial[t] += partial[t + step]\n        cuda.syncthreads()\n"
        "        step //= 2\n")
    assert "step //= 2" in copied
    kernel = define_with_source(copied, "fixed_sum_of_squares")
    rejected(ch07.check_fixed_sum_of_squares(kernel), "differs from broken_sum_of_squares")


def test_sum_of_squares_with_two_barriers_added():
    def two(source):
        return source.replace(LOAD, LOAD + "    cuda.syncthreads()\n    cuda.syncthreads()\n")
    rejected(ch07.check_fixed_sum_of_squares(fixed_with(two)), "has 3 barrier(s)",
             "add exactly one")


def test_the_chapter_shows_the_broken_kernel_the_checker_compares_with():
    import nbformat

    from test_exercises_ch06_09 import NOTEBOOKS

    nb = nbformat.read(NOTEBOOKS / "07_reductions_and_shared_memory.ipynb", as_version=4)
    sources = [c.source.strip() for c in nb.cells if c.cell_type == "code"]
    assert ch07.BROKEN_SUM_OF_SQUARES.strip() in sources


# -- 8.1 -----------------------------------------------------------------------------------------

def test_tiled_reads_with_the_naive_count():
    rejected(ch08.check_tiled_global_reads(lambda M, K, N, tile: 2 * M * K * N),
             "that is the naive kernel's count")


def test_tiled_reads_with_the_block_counts_swapped():
    rejected(ch08.check_tiled_global_reads(
        lambda M, K, N, tile: M * K * -(-M // tile) + K * N * -(-N // tile)),
        "once per block *column*")


def test_tiled_reads_lookup_table_fails_on_an_unseen_shape():
    table = {case: ch08.recorded_global_reads(*case) for case in ch08.READ_CASES}
    rejected(ch08.check_tiled_global_reads(lambda *case: table.get(case, 0)),
             "wrong number of global reads")


# -- 8.2 -----------------------------------------------------------------------------------------

@cuda.jit(device=True)
def load_with_tx_ty_swapped(A, B, a_tile, b_tile, row, col, phase):
    tile = a_tile.shape[0]
    ty, tx = cuda.threadIdx.y, cuda.threadIdx.x
    k_a, k_b = phase * tile + ty, phase * tile + tx
    a_tile[ty, tx] = A[row, k_a] if row < A.shape[0] and k_a < A.shape[1] else 0.0
    b_tile[ty, tx] = B[k_b, col] if k_b < B.shape[0] and col < B.shape[1] else 0.0


@cuda.jit(device=True)
def load_without_guards(A, B, a_tile, b_tile, row, col, phase):
    tile = a_tile.shape[0]
    ty, tx = cuda.threadIdx.y, cuda.threadIdx.x
    a_tile[ty, tx] = A[row, phase * tile + tx]
    b_tile[ty, tx] = B[phase * tile + ty, col]


def test_load_phase_with_tx_and_ty_swapped():
    rejected(ch08.check_load_phase(load_with_tx_ty_swapped), "wrong value at C[",
             "A[row, phase*tile + tx]")


def test_load_phase_without_guards():
    rejected(ch08.check_load_phase(load_without_guards), "IndexError", "check the guards")


@cuda.jit(device=True)
def load_without_zeroing_a(A, B, a_tile, b_tile, row, col, phase):
    tile = a_tile.shape[0]
    ty, tx = cuda.threadIdx.y, cuda.threadIdx.x
    k_a, k_b = phase * tile + tx, phase * tile + ty
    if row < A.shape[0] and k_a < A.shape[1]:
        a_tile[ty, tx] = A[row, k_a]  # past the edge, the slot keeps what it held
    b_tile[ty, tx] = B[k_b, col] if k_b < B.shape[0] and col < B.shape[1] else 0.0


def test_load_phase_that_leaves_a_slot_unwritten_is_rejected():
    """B's zeros hide A's stale slots only while those hold numbers; a slot never written
    holds garbage on a GPU (NaN in the checker's simulator), and NaN * 0 is NaN."""
    rejected(ch08.check_load_phase(load_without_zeroing_a), "wrong value at C[", "got:      nan",
             "must be set to 0")


@cuda.jit(device=True)
def load_with_the_chapters_tile(A, B, a_tile, b_tile, row, col, phase):
    tile = 4  # the chapter's tile size, not this launch's (a_tile.shape[0])
    ty, tx = cuda.threadIdx.y, cuda.threadIdx.x
    k_a, k_b = phase * tile + tx, phase * tile + ty
    a_tile[ty, tx] = A[row, k_a] if row < A.shape[0] and k_a < A.shape[1] else 0.0
    b_tile[ty, tx] = B[k_b, col] if k_b < B.shape[0] and col < B.shape[1] else 0.0


def test_load_phase_with_a_fixed_tile_size_is_rejected():
    """A tile size taken from elsewhere than the shared array passes every launch with that
    size, and one-phase products at any size: a tile of 2 over several phases shows it."""
    rejected(ch08.check_load_phase(load_with_the_chapters_tile), "wrong value at C[")


# -- 9.1 -----------------------------------------------------------------------------------------

def upper_median(times):
    return sorted(times)[len(times) // 2]


def test_upper_median_gets_the_even_count_hint_not_the_warm_up_hint():
    feedback = ch09.check_median_time(timer(average=upper_median))
    rejected(feedback, "even number of repeats", "the median is their mean")
    assert "warm-up runs must not be timed" not in feedback.message


def test_middle_of_the_unsorted_times():
    rejected(ch09.check_median_time(timer(average=lambda t: t[len(t) // 2])),
             "sort the times")


def test_timing_the_warm_up_too():
    def with_warmup(fn, *, warmup, repeats, clock, synchronize):
        times = []
        for _ in range(warmup + repeats):
            start = clock()
            fn()
            synchronize()
            times.append(clock() - start)
        return statistics.median(times)
    rejected(ch09.check_median_time(with_warmup), "warm-up runs must not be timed")


# -- 9.2 and 9.3 ----------------------------------------------------------------------------------

def test_intensity_in_elements_not_bytes():
    rejected(ch09.check_matmul_intensity(lambda M, K, N, s: 2 * M * K * N / (M * K + K * N + M * N)),
             "bytes, not elements")


def test_intensity_lookup_table_fails_on_an_unseen_shape():
    seen = {(1024, 1024, 1024, 4), (4096, 4096, 4096, 2), (1, 4096, 4096, 4), (64, 1000, 32, 8),
            (1, 1, 1, 4)}
    rejected(ch09.check_matmul_intensity(
        lambda *c: ch09.reference_matmul_intensity(*c) if c in seen else 1.0),
        "wrong arithmetic intensity")


def test_roofline_without_the_compute_cap():
    rejected(ch09.check_attainable_gflops(lambda i, peak, bw: i * bw), "a large matmul",
             "the lower of the two ceilings")


def test_roofline_dividing_instead_of_multiplying():
    rejected(ch09.check_attainable_gflops(lambda i, peak, bw: min(peak, bw / i)),
             "wrong attainable speed")


def test_reference_solutions_read_from_the_chapters_still_pass():
    for notebook, name, checker in [("09_cpu_vs_gpu_speed", "median_time", ch09.check_median_time)]:
        assert checker(define(solution_source(notebook, name), name)).passed

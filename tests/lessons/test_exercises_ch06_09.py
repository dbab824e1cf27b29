"""The GPU chapters' checkers: reference solutions pass, stubs are "not solved yet", mistakes are named.

The reference solutions are read from the notebooks themselves (the cells
tagged ``solution``), so notebook and checker cannot drift apart; the learner
stubs are made from them by :func:`teachgrad.exercises.edition.learner_stub`,
exactly as the learner edition is. Wrong answers are the mistakes learners
make, and each test asserts the specific feedback it gets.
"""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import math
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float64

from teachgrad.exercises import NOT_SOLVED_YET, SOLVED, WRONG, ch06, ch07, ch08, ch09
from teachgrad.exercises.edition import learner_stub

import notebook_solutions
from notebook_solutions import solution_source

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

#: (notebook, name the solution cell defines, checker)
EXERCISES = [
    ("06_gpu_programming_model", "saxpy", ch06.check_saxpy),
    ("06_gpu_programming_model", "passes_per_thread", ch06.check_passes_per_thread),
    ("07_reductions_and_shared_memory", "block_max", ch07.check_block_max),
    ("07_reductions_and_shared_memory", "fixed_sum_of_squares", ch07.check_fixed_sum_of_squares),
    ("08_matmul_on_the_gpu", "tiled_global_reads", ch08.check_tiled_global_reads),
    ("08_matmul_on_the_gpu", "load_phase", ch08.check_load_phase),
    ("06_gpu_programming_model", "make_map", ch06.check_map),
    ("07_reductions_and_shared_memory", "block_sum_rows", ch07.check_block_sum),
    ("08_matmul_on_the_gpu", "make_tiled_matmul", ch08.check_tiled_matmul),
    ("09_cpu_vs_gpu_speed", "median_time", ch09.check_median_time),
    ("09_cpu_vs_gpu_speed", "matmul_intensity", ch09.check_matmul_intensity),
    ("09_cpu_vs_gpu_speed", "attainable_gflops", ch09.check_attainable_gflops),
]


def define(source: str, name: str):
    """Run a cell's source in the namespace the chapters set up, and return ``name``."""
    return notebook_solutions.define(source, name, {
        "np": np, "cuda": cuda, "float64": float64, "math": math, "THREADS": ch07.THREADS,
        "time": __import__("time"), "statistics": __import__("statistics")})


@pytest.mark.parametrize("notebook, name, checker", EXERCISES, ids=[e[1] for e in EXERCISES])
def test_reference_solution_is_solved(notebook, name, checker):
    feedback = checker(define(solution_source(notebook, name), name))
    assert feedback.status == SOLVED, feedback.message


@pytest.mark.parametrize("notebook, name, checker", EXERCISES, ids=[e[1] for e in EXERCISES])
def test_learner_stub_is_not_solved_yet(notebook, name, checker):
    stub = learner_stub(solution_source(notebook, name))
    assert "NotImplementedError" in stub
    feedback = checker(define(stub, name))
    assert feedback.status == NOT_SOLVED_YET, feedback.message
    assert "not solved yet" in feedback.message


# -- chapter 6 ------------------------------------------------------------------------------

@cuda.jit
def saxpy_one_pass(a, x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_twice(a, x, y):
    for _ in range(2):
        for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
            y[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_unguarded_loop(a, x, y):
    i = cuda.grid(1)
    while True:  # writes first, checks afterwards: threads past the end write out of bounds
        y[i] = a * x[i] + y[i]
        i += cuda.gridsize(1)
        if i >= y.size:
            break


def test_saxpy_without_the_loop_names_the_first_element_past_the_grid():
    feedback = ch06.check_saxpy(saxpy_one_pass)
    assert feedback.status == WRONG
    assert "element 64 was never updated" in feedback.message
    assert "one pass per thread is not enough" in feedback.message


def test_saxpy_that_updates_twice_says_so():
    feedback = ch06.check_saxpy(saxpy_twice)
    assert feedback.status == WRONG
    assert "element 0 was updated 2 times instead of once" in feedback.message


def test_saxpy_without_a_guard_reports_the_out_of_bounds_access():
    feedback = ch06.check_saxpy(saxpy_unguarded_loop)
    assert feedback.status == "error"
    assert "IndexError" in feedback.message
    assert "n = 10, launched as saxpy[2, 32]" in feedback.message


def test_passes_recorded_from_a_launch_follow_the_grid_stride_rule():
    counts = ch06.recorded_passes(20, 2, 4)
    assert counts.tolist() == [3, 3, 3, 3, 2, 2, 2, 2]
    assert ch06.recorded_passes(5, 2, 4).tolist() == [1, 1, 1, 1, 1, 0, 0, 0]


def test_passes_equal_for_every_thread_is_explained():
    def passes_ceil(n, blocks, threads):
        return [-(-n // (blocks * threads))] * (blocks * threads)

    feedback = ch06.check_passes_per_thread(passes_ceil)
    assert feedback.status == WRONG
    assert "thread 4 (block 1, thread 0)" in feedback.message
    assert "not every thread makes the same number of passes" in feedback.message


def test_passes_of_the_wrong_length_are_explained():
    feedback = ch06.check_passes_per_thread(lambda n, blocks, threads: [1] * blocks)
    assert feedback.status == WRONG
    assert "expected one count per thread (2 x 4 = 8 threads)" in feedback.message


# -- chapter 7 ------------------------------------------------------------------------------

def tree_kernel(combine, padding, barrier_between_levels=True):
    """A block tree reduction (the chapter's shape) with a chosen combine step and padding."""
    threads = ch07.THREADS

    @cuda.jit
    def reduce_block(x, out):
        partial = cuda.shared.array(threads, float64)
        t = cuda.threadIdx.x
        i = cuda.grid(1)
        partial[t] = x[i] if i < x.size else padding
        cuda.syncthreads()
        step = threads // 2
        while step > 0:
            if t < step:
                partial[t] = combine(partial[t], partial[t + step])
            if barrier_between_levels:
                cuda.syncthreads()
            step //= 2
        if t == 0:
            out[cuda.blockIdx.x] = partial[0]

    return reduce_block


@cuda.jit(device=True)
def larger(a, b):
    return max(a, b)


@cuda.jit(device=True)
def plus(a, b):
    return a + b


def test_block_max_padded_with_zero_is_caught_on_negative_numbers():
    feedback = ch07.check_block_max(tree_kernel(larger, 0.0))
    assert feedback.status == WRONG
    assert "pad with -inf" in feedback.message


def test_block_max_that_sums_is_caught():
    feedback = ch07.check_block_max(tree_kernel(plus, 0.0))
    assert feedback.status == WRONG
    assert "that is the sum" in feedback.message


def test_block_max_without_the_barrier_is_blamed_on_the_race():
    # a racy kernel may give a wrong max (caught by the values) or, by luck, the right one
    # (caught by the race check): either way the feedback names the race
    feedback = ch07.check_block_max(tree_kernel(larger, -math.inf, barrier_between_levels=False))
    assert feedback.status == WRONG
    assert "the race check found a" in feedback.message and "partial[" in feedback.message


# -- chapter 8 ------------------------------------------------------------------------------

def test_tiled_reads_are_recorded_from_a_launch_and_match_the_ragged_formula():
    for M, K, N, tile in ch08.READ_CASES:
        blocks_down, blocks_across = -(-M // tile), -(-N // tile)
        expected = M * K * blocks_across + K * N * blocks_down
        assert ch08.recorded_global_reads(M, K, N, tile) == expected


def test_the_multiple_of_the_tile_formula_is_explained_at_ragged_sizes():
    feedback = ch08.check_tiled_global_reads(lambda M, K, N, tile: 2 * M * K * N // tile)
    assert feedback.status == WRONG
    assert "A 10x13 @ B 13x7, tile 4" in feedback.message
    assert "only when every side is a multiple of the tile" in feedback.message


@cuda.jit(device=True)
def load_without_zeros(A, B, a_tile, b_tile, row, col, phase):
    tile = a_tile.shape[0]
    ty, tx = cuda.threadIdx.y, cuda.threadIdx.x
    if row < A.shape[0] and phase * tile + tx < A.shape[1]:
        a_tile[ty, tx] = A[row, phase * tile + tx]
    if phase * tile + ty < B.shape[0] and col < B.shape[1]:
        b_tile[ty, tx] = B[phase * tile + ty, col]


def test_load_phase_that_leaves_stale_values_fails_on_a_ragged_k():
    feedback = ch08.check_load_phase(load_without_zeros)
    assert feedback.status == WRONG
    assert "ragged" in feedback.failed_input
    assert "must be set to 0" in feedback.message


def test_load_phase_must_be_a_device_function():
    def load_phase(A, B, a_tile, b_tile, row, col, phase):
        a_tile[0, 0] = 0.0

    feedback = ch08.check_load_phase(load_phase)
    assert feedback.status == WRONG
    assert "@cuda.jit(device=True)" in feedback.message


# -- chapter 9 ------------------------------------------------------------------------------

def timer(*, synchronize_after_fn=True, synchronize_after_warmup=True, average=None):
    """A median_time with chosen mistakes."""
    import statistics

    def median_time(fn, *, warmup=1, repeats=5, clock=None, synchronize=None):
        for _ in range(warmup):
            fn()
        if synchronize_after_warmup:
            synchronize()
        times = []
        for _ in range(repeats):
            start = clock()
            fn()
            if synchronize_after_fn:
                synchronize()
            times.append(clock() - start)
        return (average or statistics.median)(times)

    return median_time


@pytest.mark.parametrize("mistake, message", [
    (dict(synchronize_after_fn=False), "the clock did not move"),
    (dict(synchronize_after_warmup=False), "leaked into the first timed run"),
    (dict(average=lambda times: sum(times) / len(times)), "that is the mean"),
])
def test_timing_mistakes_are_named(mistake, message):
    feedback = ch09.check_median_time(timer(**mistake))
    assert feedback.status == WRONG
    assert message in feedback.message


def test_a_correct_timer_passes_and_a_timer_calling_too_often_is_caught():
    assert ch09.check_median_time(timer()).passed

    def calls_once_more(fn, *, warmup, repeats, clock, synchronize):
        fn()
        return timer()(fn, warmup=warmup, repeats=repeats, clock=clock, synchronize=synchronize)

    feedback = ch09.check_median_time(calls_once_more)
    assert feedback.status == WRONG
    assert "fn was called 7 times instead of 1 warm-up + 5 timed = 6" in feedback.message


def test_fake_device_only_moves_its_clock_on_synchronize():
    device = ch09.FakeDevice([2.0, 3.0])
    device.work()
    assert device.clock() == 1000.0
    device.work()
    device.synchronize()
    assert device.clock() == 1005.0


def test_intensity_and_roofline_mistakes_are_named():
    half = ch09.check_matmul_intensity(lambda M, K, N, s: M * K * N / ((M * K + K * N + M * N) * s))
    assert half.status == WRONG and "2 FLOPs" in half.message
    no_c = ch09.check_matmul_intensity(lambda M, K, N, s: 2 * M * K * N / ((M * K + K * N) * s))
    assert no_c.status == WRONG and "C has to be written back" in no_c.message
    higher = ch09.check_attainable_gflops(lambda i, peak, bw: max(peak, i * bw))
    assert higher.status == WRONG and "the lower of the two ceilings" in higher.message


def test_reference_intensity_of_a_square_matmul_is_n_over_6_in_float32():
    assert ch09.reference_matmul_intensity(1200, 1200, 1200, 4) == pytest.approx(200.0)

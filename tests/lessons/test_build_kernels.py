"""The GPU chapters' build exercises (6.3 map, 7.3 row sums, 8.3 tiled matmul): realistic
wrong kernels are rejected with feedback that names the mistake; other right kernels
(another loop, another tree, another thread layout) are accepted. (The chapters' solutions
pass and their learner-edition stubs are "not solved yet": test_exercises_ch06_09.py.)"""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import numpy as np
import pytest
from numba import cuda, float64

from teachgrad.exercises import SOLVED, WRONG, ch06, ch07, ch08

from notebook_solutions import solution_source
from test_exercises_ch06_09 import define

THREADS = ch07.THREADS


def chapter_solution(notebook: str, name: str):
    return define(solution_source(notebook, name), name)


def rejected(feedback, *words):
    assert feedback.status == WRONG, feedback.message
    for word in words:
        assert word in feedback.message, feedback.message


# -- 6.3: the map ---------------------------------------------------------------------------

def make_single_pass_map(fn):
    @cuda.jit
    def single_pass(out, x):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = fn(x[i])
    return single_pass


def make_unguarded_map(fn):
    @cuda.jit
    def unguarded(out, x):
        i = cuda.grid(1)
        while i <= out.size:  # one past the end
            out[i] = fn(x[i])
            i += cuda.gridsize(1)
    return unguarded


def make_block_stride_map(fn):
    @cuda.jit
    def block_stride(out, x):  # steps by one block: every block redoes the same elements
        for i in range(cuda.grid(1), out.size, cuda.blockDim.x):
            out[i] = fn(x[i])
    return block_stride


def make_thread_zero_map(fn):
    @cuda.jit
    def thread_zero(out, x):
        if cuda.grid(1) == 0:
            for i in range(out.size):
                out[i] = fn(x[i])
    return thread_zero


def make_copy_map(fn):
    @cuda.jit
    def copies(out, x):
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            out[i] = x[i]
    return copies


@pytest.mark.parametrize("make_map, words", [
    (make_single_pass_map, ["never written", "cuda.gridsize(1)"]),
    (make_unguarded_map, ["past the end", "i < out.size"]),
    (make_block_stride_map, ["written 2 times"]),
    (make_thread_zero_map, ["1 of the 16 threads wrote anything"]),
    (make_copy_map, ["wrong value", "fn(x[i])"]),
], ids=lambda v: getattr(v, "__name__", "") if callable(v) else "")
def test_wrong_maps_are_rejected_by_name(make_map, words):
    rejected(ch06.check_map(make_map), *words)


def make_while_map(fn):
    @cuda.jit
    def while_loop(out, x):
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        while i < out.size:
            out[i] = fn(x[i])
            i += cuda.gridDim.x * cuda.blockDim.x
    return while_loop


def test_another_right_map_is_accepted():
    feedback = ch06.check_map(make_while_map)
    assert feedback.status == SOLVED, feedback.message


# -- 7.3: the row sums ----------------------------------------------------------------------

def tree_kernel(*, barrier_in_loop=True, barrier_in_branch=False, guard=True, row_axis="y",
                slot_shift=0, all_write=False):
    """The chapter's row sum with one of its parts changed (each a mistake seen in practice)."""
    @cuda.jit
    def row_sums(x, out):
        partial = cuda.shared.array(THREADS, float64)
        t = cuda.threadIdx.x
        row = cuda.blockIdx.y if row_axis == "y" else 0
        i = cuda.blockIdx.x * THREADS + t
        if guard:
            partial[t - slot_shift] = x[row, i] if i < x.shape[1] else 0.0
        else:
            partial[t] = x[row, i]
        cuda.syncthreads()
        step = THREADS // 2
        while step > 0:
            if t < step:
                partial[t] += partial[t + step]
                if barrier_in_branch:
                    cuda.syncthreads()
            if barrier_in_loop:
                cuda.syncthreads()
            step //= 2
        if t == 0 or all_write:
            out[row, cuda.blockIdx.x] = partial[0]
    return row_sums


@cuda.jit
def serial_row_sums(x, out):
    if cuda.threadIdx.x == 0:
        acc = 0.0
        start = cuda.blockIdx.x * THREADS
        for i in range(start, min(start + THREADS, x.shape[1])):
            acc += x[cuda.blockIdx.y, i]
        out[cuda.blockIdx.y, cuda.blockIdx.x] = acc


@pytest.mark.parametrize("kernel, words", [
    (tree_kernel(barrier_in_loop=False), ["race"]),
    (tree_kernel(barrier_in_loop=False, barrier_in_branch=True), ["barrier"]),
    (tree_kernel(guard=False), ["past the end", "i >= x.shape[1]"]),
    (tree_kernel(row_axis="none"), ["row 1", "cuda.blockIdx.y"]),
    (serial_row_sums, ["never used shared memory"]),
    (tree_kernel(slot_shift=1), ["partial[-1]", "on a GPU it is outside the array"]),
    (tree_kernel(all_write=True), ["threads wrote into out", "written once, by one thread"]),
], ids=["no barrier between levels", "barrier inside the if", "no bounds check",
        "always row 0", "one thread sums the block", "slot t - 1 (wraps in Python)",
        "every thread stores the sum"])
def test_wrong_row_sums_are_rejected_by_name(kernel, words):
    rejected(ch07.check_block_sum(kernel), *words)


@cuda.jit
def neighbour_pairs_row_sums(x, out):
    """Another right tree: neighbours first (stride 1, 2, 4 ...)."""
    partial = cuda.shared.array(THREADS, float64)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    partial[t] = x[cuda.blockIdx.y, i] if i < x.shape[1] else 0.0
    cuda.syncthreads()
    stride = 1
    while stride < THREADS:
        if t % (2 * stride) == 0:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride *= 2
    if t == 0:
        out[cuda.blockIdx.y, cuda.blockIdx.x] = partial[0]


def test_another_right_tree_is_accepted():
    feedback = ch07.check_block_sum(neighbour_pairs_row_sums)
    assert feedback.status == SOLVED, feedback.message


# -- 8.3: the tiled matmul ------------------------------------------------------------------

def tiled_factory(*, second_barrier=True, guard_loads=True, phases_round_up=True,
                  tile_stride=True, extra_phase=0):
    """The chapter's tiled kernel with one of its parts changed."""
    def make(tile):
        step = tile if tile_stride else 1

        @cuda.jit
        def tiled(A, B, C):
            a_tile = cuda.shared.array((tile, tile), float64)
            b_tile = cuda.shared.array((tile, tile), float64)
            tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
            row, col = cuda.blockIdx.y * tile + ty, cuda.blockIdx.x * tile + tx
            phases = (A.shape[1] + tile - 1) // tile if phases_round_up else A.shape[1] // tile
            phases += extra_phase
            acc = 0.0
            for phase in range(phases):
                k_a, k_b = phase * step + tx, phase * step + ty
                if guard_loads:
                    a_tile[ty, tx] = A[row, k_a] if row < A.shape[0] and k_a < A.shape[1] else 0.0
                    b_tile[ty, tx] = B[k_b, col] if k_b < B.shape[0] and col < B.shape[1] else 0.0
                else:
                    a_tile[ty, tx] = A[row, k_a]
                    b_tile[ty, tx] = B[k_b, col]
                cuda.syncthreads()
                for k in range(tile):
                    acc += a_tile[ty, k] * b_tile[k, tx]
                if second_barrier:
                    cuda.syncthreads()
            if row < C.shape[0] and col < C.shape[1]:
                C[row, col] = acc
        return tiled
    return make


def make_tile_in_thread_zero(tile):
    @cuda.jit
    def tile_in_thread_zero(A, B, C):
        if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
            for r in range(cuda.blockIdx.y * tile, min((cuda.blockIdx.y + 1) * tile, C.shape[0])):
                last_col = min((cuda.blockIdx.x + 1) * tile, C.shape[1])
                for c in range(cuda.blockIdx.x * tile, last_col):
                    acc = 0.0
                    for k in range(A.shape[1]):
                        acc += A[r, k] * B[k, c]
                    C[r, c] = acc
    return tile_in_thread_zero


def make_naive(tile):
    @cuda.jit
    def naive(A, B, C):
        col, row = cuda.grid(2)
        if row < C.shape[0] and col < C.shape[1]:
            acc = 0.0
            for k in range(A.shape[1]):
                acc += A[row, k] * B[k, col]
            C[row, col] = acc
    return naive


@pytest.mark.parametrize("make, words", [
    (tiled_factory(second_barrier=False), ["race", "two barriers per phase"]),
    (tiled_factory(guard_loads=False), ["past the end", "store 0"]),
    (tiled_factory(phases_round_up=False), ["last, partial phase is missing"]),
    (tiled_factory(tile_stride=False), ["wrong value", "p*tile + tx"]),
    (tiled_factory(extra_phase=1), ["extra ones multiply zeros", "(K + tile - 1) // tile"]),
    (make_tile_in_thread_zero, ["one thread wrote", "one output"]),
    (make_naive, ["read", "from global memory", "tiles need"]),
], ids=["no barrier after the multiply", "no bounds check on loads", "phases rounded down",
        "phase stride 1", "a phase too many", "thread 0 computes the tile", "no tiles"])
def test_wrong_tiled_kernels_are_rejected_by_name(make, words):
    rejected(ch08.check_tiled_matmul(make), *words)


def make_transposed_threads(tile):
    """Another right layout: threadIdx.x runs down the rows of the tile, y along columns."""
    @cuda.jit
    def transposed(A, B, C):
        a_tile = cuda.shared.array((tile, tile), float64)
        b_tile = cuda.shared.array((tile, tile), float64)
        i, j = cuda.threadIdx.x, cuda.threadIdx.y
        row, col = cuda.blockIdx.y * tile + i, cuda.blockIdx.x * tile + j
        acc = 0.0
        for k0 in range(0, A.shape[1], tile):
            a_tile[i, j] = A[row, k0 + j] if row < A.shape[0] and k0 + j < A.shape[1] else 0.0
            b_tile[i, j] = B[k0 + i, col] if k0 + i < B.shape[0] and col < B.shape[1] else 0.0
            cuda.syncthreads()
            for k in range(tile):
                acc += a_tile[i, k] * b_tile[k, j]
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc
    return transposed


def make_bounded_inner_loop(tile):
    """Another right kernel: no zero padding; the last phase's loop stops at K."""
    @cuda.jit
    def bounded(A, B, C):
        a_tile = cuda.shared.array((tile, tile), float64)
        b_tile = cuda.shared.array((tile, tile), float64)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row, col = cuda.blockIdx.y * tile + ty, cuda.blockIdx.x * tile + tx
        K = A.shape[1]
        acc = 0.0
        for k0 in range(0, K, tile):
            if row < A.shape[0] and k0 + tx < K:
                a_tile[ty, tx] = A[row, k0 + tx]
            if k0 + ty < K and col < B.shape[1]:
                b_tile[ty, tx] = B[k0 + ty, col]
            cuda.syncthreads()
            for k in range(min(tile, K - k0)):
                acc += a_tile[ty, k] * b_tile[k, tx]
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc
    return bounded


@pytest.mark.parametrize("make", [make_transposed_threads, make_bounded_inner_loop])
def test_other_right_tiled_kernels_are_accepted(make):
    feedback = ch08.check_tiled_matmul(make)
    assert feedback.status == SOLVED, feedback.message


def test_a_kernel_wrong_inside_the_engine_is_named_by_the_part():
    """The plugged training is a test of its own: a kernel built for tiles of 4 whatever the
    tile asked for is wrong in the engine's launches (tiles of 8), named by the part."""
    from teachgrad.exercises.core import Mismatch
    from teachgrad.exercises.kernel_workloads import plugged_training_test

    solution = chapter_solution("08_matmul_on_the_gpu", "make_tiled_matmul")
    test = plugged_training_test("cuda.matmul", lambda tile: solution(4), "tiled matmul")
    with pytest.raises(Mismatch, match=r"inside the engine, in your cuda\.matmul kernel "
                                       r"tiled_matmul .*launched as"):
        test.run()

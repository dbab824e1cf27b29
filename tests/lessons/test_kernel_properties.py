"""The property tests of the kernel build exercises (6.3, 7.3, 8.3): the chapters' kernels pass
them on sizes and launches drawn by hypothesis, and each rejects, on its own, a kernel that is
only right for some launches, naming the drawn input."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import pytest
from numba import cuda, float64

from teachgrad.exercises import ch06, ch07, ch08
from teachgrad.exercises.core import Mismatch

from notebook_solutions import solution_source
from test_exercises_ch06_09 import define

THREADS = ch07.THREADS


def chapter_solution(notebook: str, name: str):
    return define(solution_source(notebook, name), name)


def make_map_for_blocks_of_8(fn):
    @cuda.jit
    def blocks_of_8(out, x):  # the block size written in: right only when launched with 8
        for i in range(cuda.blockIdx.x * 8 + cuda.threadIdx.x, out.size, cuda.gridsize(1)):
            out[i] = fn(x[i])
    return blocks_of_8


@cuda.jit
def first_row_sums(x, out):  # every block sums row 0: right only for one row
    partial = cuda.shared.array(THREADS, float64)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * THREADS + t
    partial[t] = x[0, i] if i < x.shape[1] else 0.0
    cuda.syncthreads()
    step = THREADS // 2
    while step > 0:
        if t < step:
            partial[t] += partial[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0 and cuda.blockIdx.x < out.shape[1]:
        out[cuda.blockIdx.y, cuda.blockIdx.x] = partial[0]


def make_matmul_with_tile_4_phases(tile):
    @cuda.jit
    def tiled(A, B, C):  # counts its phases in tiles of 4, whatever tile it was made for
        a_tile = cuda.shared.array((tile, tile), float64)
        b_tile = cuda.shared.array((tile, tile), float64)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row, col = cuda.blockIdx.y * tile + ty, cuda.blockIdx.x * tile + tx
        acc = 0.0
        for phase in range((A.shape[1] + 3) // 4):
            k_a, k_b = phase * tile + tx, phase * tile + ty
            a_tile[ty, tx] = A[row, k_a] if row < A.shape[0] and k_a < A.shape[1] else 0.0
            b_tile[ty, tx] = B[k_b, col] if k_b < B.shape[0] and col < B.shape[1] else 0.0
            cuda.syncthreads()
            for k in range(tile):
                acc += a_tile[ty, k] * b_tile[k, tx]
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc
    return tiled


CASES = [
    (ch06.map_property_test, ("06_gpu_programming_model", "make_map"), make_map_for_blocks_of_8,
     "of make_map("),
    (ch07.row_sum_property_test, ("07_reductions_and_shared_memory", "block_sum_rows"),
     first_row_sums, "row(s) of"),
    (ch08.tiled_property_test, ("08_matmul_on_the_gpu", "make_tiled_matmul"),
     make_matmul_with_tile_4_phases, "@ B"),
]


@pytest.mark.parametrize("property_test, solution, wrong, names_input", CASES,
                         ids=["6.3", "7.3", "8.3"])
def test_the_chapters_kernel_passes_and_a_kernel_right_only_sometimes_is_caught(
        property_test, solution, wrong, names_input):
    test = property_test(chapter_solution(*solution))
    assert "random inputs, seed" in test.description
    test.run()  # raises a Mismatch if the chapter's own kernel failed on a drawn launch
    with pytest.raises(Mismatch) as caught:
        property_test(wrong).run()
    assert names_input in caught.value.args[0], caught.value.args[0]

"""The property tests of the kernel build exercises (6.3, 7.3, 8.3): the chapters' kernels pass
them on sizes and launches drawn by hypothesis, and each rejects, on its own, a kernel that is
only right for some launches, naming the drawn input."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import pytest
from numba import cuda

from teachgrad.exercises import ch06, ch07, ch08
from teachgrad.exercises.core import Mismatch

from test_build_kernels import chapter_solution, tiled_factory, tree_kernel


def make_map_for_blocks_of_8(fn):
    @cuda.jit
    def blocks_of_8(out, x):  # the block size written in: right only when launched with 8
        for i in range(cuda.blockIdx.x * 8 + cuda.threadIdx.x, out.size, cuda.gridsize(1)):
            out[i] = fn(x[i])
    return blocks_of_8


CASES = [
    (ch06.map_property_test, ("06_gpu_programming_model", "make_map"), make_map_for_blocks_of_8,
     "of make_map("),
    (ch07.row_sum_property_test, ("07_reductions_and_shared_memory", "block_sum_rows"),
     tree_kernel(row_axis="x"), "row(s) of"),  # every block sums row 0
    (ch08.tiled_property_test, ("08_matmul_on_the_gpu", "make_tiled_matmul"),
     tiled_factory(phases_round_up=False), "@ B"),  # K // tile phases: wrong when ragged
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

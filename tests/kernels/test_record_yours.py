"""Records of a learner's own kernels, read from the simulator's access log, match the
records teachgrad's instrumented kernels write themselves."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import numpy as np
import pytest
from numba import cuda

from teachgrad.kernels import ops, parts, record, record_yours


@pytest.mark.parametrize("n, blocks, threads", [(45, 2, 8), (10, 3, 8), (37, 1, 1)])
def test_a_map_kernel_record_matches_the_engine_record(n, blocks, threads):
    mine = record_yours.map_launch_record(parts.engine_map(ops.neg), n, blocks, threads)
    theirs = record.record_elementwise(n, blocks, threads, op="neg")
    for field in ("block", "thread", "pass_", "global_thread"):
        np.testing.assert_array_equal(getattr(mine, field), getattr(theirs, field))
    assert mine.matches_formula() and mine.op == "grid_stride_map"


def make_single_thread_map(fn):
    @cuda.jit
    def single_thread_map(out, x):
        if cuda.grid(1) == 0:
            for i in range(out.size):
                out[i] = fn(x[i])
    return single_thread_map


def test_a_single_thread_map_is_drawn_as_it_ran():
    mine = record_yours.map_launch_record(make_single_thread_map(ops.neg), 12, 2, 4)
    assert (mine.global_thread == 0).all() and list(mine.pass_) == list(range(12))
    assert not mine.matches_formula()


@pytest.mark.parametrize("M, K, N, tile", [(6, 10, 7, 4), (5, 3, 9, 2)])
def test_a_tiled_kernel_record_matches_the_engine_record(M, K, N, tile):
    mine = record_yours.tiled_launch_record(parts.engine_matmul, M, K, N, tile=tile)
    theirs = record.record_tiled_matmul(M, K, N, tile=tile)
    assert mine.counts == theirs.counts
    np.testing.assert_array_equal(mine.all_a_loads, theirs.all_a_loads)
    np.testing.assert_array_equal(mine.all_b_loads, theirs.all_b_loads)
    np.testing.assert_array_equal(mine.C, mine.A @ mine.B)


def test_the_widgets_draw_a_learners_kernel():
    from teachgrad.widgets import ThreadMap, TileView

    tm = ThreadMap(n=20, blocks=2, threads_per_block=4, kernel=make_single_thread_map(ops.neg))
    assert "single_thread_map" in tm.summary.value and "NO" in tm.summary.value
    tv = TileView(M=5, K=6, N=3, tile=4, make_matmul=parts.engine_matmul)
    assert tv.record.counts["global_reads"] == tv.record.formulas["tiled"]["global_reads"]
    assert "<svg" in tv.to_svg()

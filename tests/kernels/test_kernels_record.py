"""Recorded launches: who did what, written down by the kernels themselves."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import numpy as np
import pytest
from numba import cuda

from teachgrad.kernels import record


@pytest.mark.parametrize("n,blocks,threads", [(37, 2, 8), (10, 3, 8), (16, 2, 8), (1, 1, 4)])
def test_recorded_owners_follow_the_grid_stride_formula(n, blocks, threads):
    rec = record.record_elementwise(n, blocks, threads)
    i = np.arange(n)
    total = blocks * threads
    np.testing.assert_array_equal(rec.block, (i % total) // threads)
    np.testing.assert_array_equal(rec.thread, (i % total) % threads)
    np.testing.assert_array_equal(rec.pass_, i // total)
    assert rec.matches_formula()
    assert rec.passes == -(-n // total)
    assert rec.elements_per_thread.sum() == n


def test_more_threads_than_elements_leaves_threads_idle():
    rec = record.record_elementwise(10, 3, 8)  # 24 threads, 10 elements
    assert (rec.passes, rec.idle_threads, rec.idle_in_last_pass) == (1, 14, 14)


def test_fewer_threads_than_elements_means_several_passes():
    rec = record.record_elementwise(37, 2, 8)  # 16 threads: passes of 16, 16, 5
    assert (rec.passes, rec.idle_threads, rec.idle_in_last_pass) == (3, 0, 11)
    assert rec.elements_per_thread.tolist() == [3] * 5 + [2] * 11


def test_a_unary_kernel_records_too():
    assert record.record_elementwise(9, 1, 4, op="exp").matches_formula()


def test_tiled_matmul_record_of_one_output_tile():
    rec = record.record_tiled_matmul(6, 7, 5, tile=4, out_tile=(1, 0))
    assert (rec.grid, rec.phases) == ((2, 2), 2)
    np.testing.assert_array_equal(rec.C, rec.A @ rec.B)
    # phase 1 of block row 1: thread (ty, tx) loaded A[4 + ty, 4 + tx] where inside A (6 x 7)
    rows, cols = rec.a_loads[1, ..., 0], rec.a_loads[1, ..., 1]
    for ty in range(4):
        for tx in range(4):
            inside = 4 + ty < 6 and 4 + tx < 7
            assert (rows[ty, tx], cols[ty, tx]) == ((4 + ty, 4 + tx) if inside else (-1, -1))
    # and B[4 + ty, tx] (B is 7 x 5; block column 0)
    assert tuple(rec.b_loads[1, 2, 3]) == (6, 3)
    assert tuple(rec.b_loads[1, 3, 0]) == (-1, -1)
    assert [kind for _, kind, _ in rec.steps] == ["load", "barrier", "multiply", "barrier"] * 2
    assert list(rec.out_rows) == [4, 5] and list(rec.out_cols) == [0, 1, 2, 3]


def test_tiled_matmul_counts_match_their_formulas_and_beat_naive():
    rec = record.record_tiled_matmul(9, 8, 7, tile=4)
    assert rec.naive_counts["global_reads"] == rec.formulas["naive"]["global_reads"] == 2 * 9 * 7 * 8
    assert rec.counts["global_reads"] == rec.formulas["tiled"]["global_reads"] == 2 * 9 * 8 + 3 * 8 * 7
    threads = 3 * 2 * 16  # every thread of every block, in or out of range
    assert rec.counts["barriers"] == threads * 2 * rec.phases
    assert rec.counts["shared_reads"] == threads * rec.phases * 2 * 4
    assert rec.naive_counts["shared_reads"] == 0


def test_register_blocking_reads_shared_memory_less_than_tiling():
    counts = record.record_matmul_counts(16, 8, 16, tile=4, block=(8, 8, 4), per_thread=(2, 2))
    assert counts["naive"]["global_reads"] == 2 * 16 * 16 * 8
    assert counts["register"]["global_reads"] < counts["tiled"]["global_reads"] < counts["naive"]["global_reads"]
    # per output: tiled reads 2 per multiply-add; 2x2 register blocks read (2 + 2) / 4 = 1
    assert counts["tiled"]["shared_reads"] == 2 * 16 * 16 * 8
    assert counts["register"]["shared_reads"] == 16 * 16 * 8


def test_out_tile_must_exist():
    with pytest.raises(ValueError, match=r"out_tile \(2, 0\) is outside the grid of 2 x 2 output tiles"):
        record.record_tiled_matmul(6, 7, 5, tile=4, out_tile=(2, 0))


@cuda.jit
def saxpy(a, x, y):
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        y[i] = a * x[i] + y[i]


@cuda.jit
def histogram(x, counts, racy):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(counts, int(x[i]), 1)
        racy[int(x[i])] += 1


def test_record_accesses_knows_who_wrote_each_element_and_logs_atomics():
    from teachgrad.kernels.record import record_accesses

    x = np.arange(20.0)
    y = np.ones(20)
    record = record_accesses(saxpy, 2, 8, 2.0, x, y)
    np.testing.assert_array_equal(y, np.ones(20))  # the caller's arrays are untouched
    np.testing.assert_array_equal(record.arrays["y"], 2 * x + 1)
    np.testing.assert_array_equal(record.owner("y"), np.arange(20) % 16)
    np.testing.assert_array_equal(record.per_thread("W", "y"), [2] * 4 + [1] * 12)
    np.testing.assert_array_equal(record.counts("x", "R"), np.ones(20))
    assert record.shared == set() and record.grid == (2, 1, 1) and record.block == (8, 1, 1)

    values = np.array([0, 1, 1, 3, 3, 3.0])
    record = record_accesses(histogram, 1, 8, values, np.zeros(4), np.zeros(4))
    np.testing.assert_array_equal(record.arrays["counts"], [1, 2, 0, 3])
    np.testing.assert_array_equal(record.counts("counts", "A"), [1, 2, 0, 3])
    assert record.lost_updates("counts") == []
    assert record.lost_updates("racy") == [(1,), (3,)]


def test_recording_on_a_gpu_machine_leaves_the_module_compilable_for_the_gpu(
        run_as_on_a_gpu_machine):
    """Recording simulates the kernel even where numba compiles for a GPU (the widgets do
    this on a learner's GPU machine). In the simulator the name ``cuda`` in the kernel's
    module is routed by thread for good; for a GPU it must be ``numba.cuda`` again
    afterwards, or every later kernel of that module fails to compile. Run with numba set
    up for a GPU (none is needed to compile to PTX: the ``ptx`` extra)."""
    run = run_as_on_a_gpu_machine("""
        import numpy as np
        from numba import cuda, types
        from teachgrad.kernels import parts
        from teachgrad.kernels.record import record_accesses

        A, B, C = np.arange(15.0).reshape(5, 3), np.ones((3, 4)), np.zeros((5, 4))
        rec = record_accesses(parts.engine_matmul(4), (1, 2), (4, 4), A, B, C)
        np.testing.assert_array_equal(rec.arrays["C"], A @ B)
        print("the module's cuda is numba.cuda:", parts.cuda is cuda)
        f64 = types.Array(types.float64, 2, "C")
        cuda.compile_ptx(parts.engine_matmul(8).py_func, (f64, f64, f64), cc=(9, 0))
        print("compiled")
    """)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run.stdout.split("\n")[:2] == ["the module's cuda is numba.cuda: True", "compiled"]

"""The race checker flags a missing barrier every time, and passes correct kernels."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import numpy as np
import pytest
from numba import cuda, float64

import teachgrad as tg
from teachgrad.kernels import race, reduce
from teachgrad.kernels.transfer import to_device


@pytest.mark.parametrize("attempt", range(3))
def test_missing_barrier_is_flagged_every_time(attempt):
    x = np.arange(16, dtype=np.float64)
    report = race.race_check(race.block_sum_kernel(8, tree_barrier=False), 2, 8, x, np.zeros(2))
    assert not report.ok
    assert report.offending_indices == {"partial": [(1,), (2,), (3,)]}
    first = report.races[0]
    assert (first.block, first.array, first.index, first.epoch) == ((0, 0, 0), "partial", (1,), 1)
    assert first.writers == ((1, 0, 0),) and first.readers == ((0, 0, 0),)
    assert report.summary().splitlines()[:2] == [
        "block_sum: 6 shared-memory race(s) -- a missing cuda.syncthreads()?",
        "  block 0: partial[1] after barrier 1, before the next: written by thread(s) 1; read by thread(s) 0",
    ]


def test_the_correct_block_sum_passes_and_sums():
    x = np.arange(20, dtype=np.float64)
    out = np.zeros(3)
    report = race.race_check(race.block_sum_kernel(8), 3, 8, x, out)
    assert report.ok and report.races == []
    assert report.summary() == "block_sum: no shared-memory races (186 accesses, 4 barrier(s) per thread)"
    np.testing.assert_array_equal(out, np.add.reduceat(x, range(0, 20, 8)))


def test_the_library_reduction_kernel_is_race_free():
    x = np.random.default_rng(0).standard_normal((3, 21))
    out = to_device(np.zeros((3, 1)))
    report = race.race_check(reduce.reduce_kernel("sum", np.dtype(np.float64), 8), (1, 3), 8,
                             to_device(x), out, 3, 21)
    assert report.ok
    np.testing.assert_allclose(out.copy_to_host()[:, 0], x.sum(axis=1))


def test_the_log_records_barriers_and_both_kinds_of_access():
    report = race.race_check(race.block_sum_kernel(4), 1, 4, np.ones(4), np.zeros(1))
    kinds = {a.kind for a in report.accesses}
    assert kinds == {"R", "W", "B"}
    barriers_per_thread = [sum(1 for a in report.accesses if a.kind == "B" and a.thread[0] == t)
                           for t in range(4)]
    assert barriers_per_thread == [3, 3, 3, 3] and report.barriers == 3


@cuda.jit
def branchy_sum(x, out):
    partial = cuda.shared.array(8, float64)
    t = cuda.threadIdx.x
    partial[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    step = 4
    while step > 0:
        if t < step:
            partial[t] += partial[t + step]
            cuda.syncthreads()  # only the threads inside the if reach it
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = partial[0]


def test_a_barrier_inside_a_branch_is_reported_even_when_the_answer_is_right():
    x = np.arange(16, dtype=np.float64)
    out = np.zeros(2)
    report = race.race_check(branchy_sum, 2, 8, x, out)
    np.testing.assert_array_equal(out, [28.0, 92.0])  # the simulator lets it through
    assert not report.ok
    first = report.barrier_mismatches[0]
    assert first.block == (0, 0, 0) and first.line == 11
    assert first.most == ((0, 0, 0), 4) and first.fewest == ((7, 0, 0), 1)
    assert [t[0] for t in first.reached] == [0, 1, 2, 3]
    assert [t[0] for t in first.skipped] == [4, 5, 6, 7]
    text = first.describe()
    assert text.startswith("block 0: not every thread reached the same barriers (thread 0 "
                           "passed 4 barrier(s) but thread 7 only 1). The barrier at line 11 "
                           "of the kernel (`cuda.syncthreads()  # only the threads inside the "
                           "if reach it`) was reached by thread(s) 0-3 but skipped by thread(s) 4-7")
    assert "move it out of the `if`" in text
    assert report.first_problem() == text
    assert report.summary().startswith("branchy_sum: barriers not reached by every thread -- block 0")


def test_every_thread_passing_the_same_barriers_is_no_mismatch():
    report = race.race_check(race.block_sum_kernel(8), 2, 8, np.ones(16), np.zeros(2))
    assert report.barrier_mismatches == [] and report.first_problem() is None


def test_mismatches_from_barrier_lines_directly():
    a, b = ((0, 0, 0), (0, 0, 0)), ((0, 0, 0), (1, 0, 0))
    lines = {a: [(5, "cuda.syncthreads()"), (9, "cuda.syncthreads()")],
             b: [(5, "cuda.syncthreads()"), (12, "cuda.syncthreads()")]}
    [mismatch] = race.find_barrier_mismatches(lines, 2)
    assert mismatch.most[1] == mismatch.fewest[1] == 2
    assert "the threads passed different barriers" in mismatch.describe()
    assert mismatch.line == 9 and [t[0] for t in mismatch.skipped] == [1]


@cuda.jit
def reads_slot_one(out):
    slots = cuda.shared.array(2, float64)
    slots[0] = 1.0
    cuda.syncthreads()
    out[0] = slots[0] + slots[1] * 0.0  # slot 1 was never written


@pytest.mark.skipif(not tg.cuda.is_simulated(),
                    reason="fills the simulator's shared memory with NaN; a GPU launch "
                           "leaves it as it finds it")
def test_uninitialised_shared_memory_shows_a_slot_never_written():
    """np.empty usually hands the simulator zeros; a GPU hands whatever was there."""
    from teachgrad.exercises.kernel_runs import launch_on_host_arrays
    from teachgrad.kernels import _simulator

    with _simulator.uninitialised_shared():
        [poisoned] = launch_on_host_arrays(reads_slot_one, 1, 1, np.zeros(1))
    assert np.isnan(poisoned[0])
    assert _simulator._shared_fill is None  # np.empty's contents again afterwards


def test_on_a_gpu_machine_the_device_functions_a_kernel_calls_are_simulated_too(
        run_as_on_a_gpu_machine):
    """The race checker and the recorder simulate kernels on any machine. Where numba
    compiles for a GPU, the device functions a kernel calls are compiled ones, which the
    simulator cannot call: while the kernel runs they are swapped for simulated ones --
    found in its module (the reduction's combine op, ``copy_tile``), in a module it reads
    (``ops.neg``) or in a factory's closure (attention's ``update``) -- and put back after,
    so the kernels still compile for the GPU. Run with numba set up for a GPU (none is
    needed: nothing launches on one, and PTX compiles without one)."""
    run = run_as_on_a_gpu_machine("""
        import numpy as np
        from numba import cuda, types
        from teachgrad.kernels import attention, matmul, ops, parts, race, record_yours, reduce

        rng = np.random.default_rng(0)
        x, out = rng.standard_normal((3, 21)), np.zeros((3, 2))
        kernel = reduce.reduce_kernel("max", np.dtype(np.float64), 8)
        report = race.race_check(kernel, (2, 2), 8, x, out, 3, 21)
        share = np.arange(21) // 8 % 2
        assert report.ok and report.barriers > 0
        np.testing.assert_array_equal(out, np.stack([x[:, share == b].max(1) for b in (0, 1)], 1))
        q, k = rng.standard_normal((2, 10, 4)), rng.standard_normal((2, 7, 4))
        O, L = np.full((2, 10, 4), np.nan), np.full((2, 10), np.nan)
        flash = attention.flash_attention_kernel(4, 4, 4, True, dtype=np.dtype(np.float64))
        report = race.race_check(flash, (3, 2), 4, q, k, k, O, L, 0.5, -1, -1,
                                 np.zeros((1, 1)), np.zeros(1), np.zeros((1, 1)))
        assert report.ok
        np.testing.assert_allclose(O, attention.naive_attention(q, k, k, True, 0.5), rtol=1e-12)
        mine = record_yours.map_launch_record(parts.engine_map(ops.neg), 45, 2, 8)
        assert (mine.global_thread == np.arange(45) % 16).all()
        # put back: the module's names are the compiled device functions again
        assert not isinstance(matmul.copy_tile, type(race._simulated(flash)))
        f64 = types.Array(types.float64, 2, "C")
        cuda.compile_ptx(kernel.py_func, (f64, f64, types.int64, types.int64), cc=(9, 0))
        cuda.compile_ptx(parts.engine_map(ops.neg).py_func,
                         (types.Array(types.float64, 1, "C"),) * 2, cc=(9, 0))
        print("ok")
    """)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr[-3000:]

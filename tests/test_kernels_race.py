"""The race checker flags a missing barrier every time, and passes correct kernels."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import numpy as np
import pytest

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

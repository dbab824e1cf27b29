"""Kernel practice (chapter 8b): reference kernels pass; classic mistakes are rejected by name.

The reference solutions are read from notebooks/08b_kernel_practice.ipynb (its
cells tagged ``solution``); the wrong answers are the mistakes the chapter
warns about: a plain ``+=`` where an atomic is needed, a missing or misplaced
barrier, a loop in one thread, no halo, global memory read again and again,
strided writes, and a shared tile without its bank-conflict padding.
"""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import math

import numpy as np
from numba import cuda, float32, float64, int64

from teachgrad.exercises import ERROR, NOT_SOLVED_YET, SOLVED, WRONG, ch08b
from teachgrad.exercises.ch08b import BLOCK_ROWS, BLOCKS, NBINS, RADIUS, THREADS, TILE
from teachgrad.exercises.edition import learner_stub

from notebook_solutions import solution_source

NOTEBOOK = "08b_kernel_practice"
CHECKERS = {"histogram": ch08b.check_histogram, "block_scan": ch08b.check_block_scan,
            "conv1d": ch08b.check_conv1d, "transpose": ch08b.check_transpose,
            "row_softmax": ch08b.check_row_softmax, "matvec": ch08b.check_matvec,
            "im2col": ch08b.check_im2col, "row_argmax": ch08b.check_row_argmax}


def define(source: str, name: str):
    namespace = {"np": np, "cuda": cuda, "float32": float32, "float64": float64, "int64": int64,
                 "math": math,
                 "THREADS": THREADS, "NBINS": NBINS, "RADIUS": RADIUS, "TILE": TILE,
                 "BLOCK_ROWS": BLOCK_ROWS}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace[name]


def rejected(feedback, *words):
    assert feedback.status in (WRONG, ERROR), feedback.message
    for word in words:
        assert word in feedback.message, feedback.message


def test_reference_solutions_pass_and_stubs_are_not_solved_yet():
    for name, checker in CHECKERS.items():
        source = solution_source(NOTEBOOK, name)
        assert checker(define(source, name)).status == SOLVED, name
        assert checker(define(learner_stub(source), name)).status == NOT_SOLVED_YET, name


# -- 8b.1 histogram ---------------------------------------------------------------------------

@cuda.jit
def histogram_plain_increment(values, bins):
    for i in range(cuda.grid(1), values.size, cuda.gridsize(1)):
        bins[values[i]] += 1


@cuda.jit
def histogram_one_pass(values, bins):
    i = cuda.grid(1)
    if i < values.size:
        cuda.atomic.add(bins, values[i], 1)


@cuda.jit
def histogram_adding_the_value(values, bins):
    for i in range(cuda.grid(1), values.size, cuda.gridsize(1)):
        cuda.atomic.add(bins, values[i], values[i])


@cuda.jit
def histogram_block_stride(values, bins):
    for i in range(cuda.threadIdx.x, values.size, cuda.blockDim.x):
        cuda.atomic.add(bins, values[i], 1)


@cuda.jit
def histogram_stride_for_the_planned_grid(values, bins):
    for i in range(cuda.grid(1), values.size, BLOCKS * THREADS):  # right for [2, 32] only
        cuda.atomic.add(bins, values[i], 1)


def test_histogram_with_the_stride_of_the_planned_grid_fails_other_launches():
    rejected(ch08b.check_histogram(histogram_stride_for_the_planned_grid),
             "histogram[1, 32]", "never counted")


def test_histogram_with_a_plain_increment_loses_updates():
    # The simulator's threads interleave as the OS schedules them: on a busy machine the
    # lost update already shows in the counts of the first launch (a count too low), else
    # the recorded launch's race check finds two threads writing one bin. Either way the
    # verdict names the lost increments and the atomic add.
    feedback = ch08b.check_histogram(histogram_plain_increment)
    if "written by" in feedback.message:
        rejected(feedback, "one increment is lost", "cuda.atomic.add(bins, v, 1)")
    else:
        rejected(feedback, "wrong count in bins", "increments were lost",
                 "cuda.atomic.add(bins, v, 1)")


def test_histogram_without_the_grid_stride_loop():
    rejected(ch08b.check_histogram(histogram_one_pass), "n = 100", "never counted")


def test_histogram_adding_the_value_instead_of_one():
    rejected(ch08b.check_histogram(histogram_adding_the_value), "add 1 per element")


def test_histogram_striding_by_the_block():
    rejected(ch08b.check_histogram(histogram_block_stride), "counted more than once")


# -- 8b.3 convolution -------------------------------------------------------------------------

def conv_kernel(*, halo=True, barrier=True, flipped=False):
    @cuda.jit
    def conv(x, w, out):
        tile = cuda.shared.array(THREADS + 2 * RADIUS, float64)
        t = cuda.threadIdx.x
        i = cuda.grid(1)
        start = cuda.blockIdx.x * THREADS
        tile[t + RADIUS] = x[i] if i < x.size else 0.0
        if t < RADIUS:
            left, right = start - RADIUS + t, start + THREADS + t
            tile[t] = x[left] if halo and left >= 0 else 0.0
            tile[THREADS + RADIUS + t] = x[right] if halo and right < x.size else 0.0
        if barrier:
            cuda.syncthreads()
        if i < x.size:
            acc = 0.0
            for k in range(2 * RADIUS + 1):
                acc += w[2 * RADIUS - k if flipped else k] * tile[t + k]
            out[i] = acc
    return conv


@cuda.jit
def conv_from_global_memory(x, w, out):
    i = cuda.grid(1)
    if i < x.size:
        acc = 0.0
        for k in range(2 * RADIUS + 1):
            j = i + k - RADIUS
            if 0 <= j < x.size:
                acc += w[k] * x[j]
        out[i] = acc


def test_conv_without_the_halo():
    rejected(ch08b.check_conv1d(conv_kernel(halo=False)), "three blocks",
             "load the halo")


def test_conv_reading_global_memory_for_every_neighbour():
    rejected(ch08b.check_conv1d(conv_from_global_memory), "was read 5 times from global memory")


def test_conv_without_the_barrier():
    rejected(ch08b.check_conv1d(conv_kernel(barrier=False)), "race")


def test_conv_with_the_filter_flipped():
    rejected(ch08b.check_conv1d(conv_kernel(flipped=True)), "the filter is flipped")


# -- 8b.4 transpose ---------------------------------------------------------------------------

@cuda.jit
def transpose_in_global_memory(A, out):
    col = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    for j in range(cuda.threadIdx.y, TILE, BLOCK_ROWS):
        row = cuda.blockIdx.y * TILE + j
        if row < A.shape[0] and col < A.shape[1]:
            out[col, row] = A[row, col]


def transpose_kernel(*, padded=True, barrier=True, rows_written=TILE):
    width = TILE + 1 if padded else TILE

    @cuda.jit
    def transpose(A, out):
        tile = cuda.shared.array((TILE, width), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        col = cuda.blockIdx.x * TILE + tx
        for j in range(ty, TILE, BLOCK_ROWS):
            row = cuda.blockIdx.y * TILE + j
            if row < A.shape[0] and col < A.shape[1]:
                tile[j, tx] = A[row, col]
        if barrier:
            cuda.syncthreads()
        col = cuda.blockIdx.y * TILE + tx
        for j in range(ty, rows_written, BLOCK_ROWS):
            row = cuda.blockIdx.x * TILE + j
            if row < out.shape[0] and col < out.shape[1]:
                out[row, col] = tile[tx, j]
    return transpose


def test_transpose_straight_in_global_memory_is_not_coalesced():
    rejected(ch08b.check_transpose(transpose_in_global_memory),
             "writes to out are not coalesced", "32 different 128-byte segments")


def test_transpose_without_the_padding_has_bank_conflicts():
    rejected(ch08b.check_transpose(transpose_kernel(padded=False)),
             "bank conflicts: up to 32 threads", "(TILE, TILE + 1)")


def test_transpose_without_the_barrier():
    rejected(ch08b.check_transpose(transpose_kernel(barrier=False)))


def test_access_patterns_of_a_recorded_launch():
    from teachgrad.kernels.access_patterns import bank_conflict_degree, segments_per_step
    from teachgrad.kernels.record import record_accesses

    A = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    good = record_accesses(transpose_kernel(), (1, 1), (TILE, BLOCK_ROWS), A, np.zeros_like(A))
    assert set(segments_per_step(good, "A", "R")) == {1} and set(segments_per_step(good, "out", "W")) == {1}
    assert good.shapes["tile"] == (TILE, TILE + 1) and bank_conflict_degree(good, "tile", "R") == 1
    np.testing.assert_array_equal(good.arrays["out"], A.T)
    bad = record_accesses(transpose_kernel(padded=False), (1, 1), (TILE, BLOCK_ROWS), A,
                          np.zeros_like(A))
    assert bank_conflict_degree(bad, "tile", "R") == 32 and bank_conflict_degree(bad, "tile", "W") == 1
    naive = record_accesses(transpose_in_global_memory, (1, 1), (TILE, BLOCK_ROWS), A,
                            np.zeros_like(A))
    assert set(segments_per_step(naive, "out", "W")) == {32}


def test_access_map_draws_writers_atomics_and_reads():
    from teachgrad.kernels.record import record_accesses
    from teachgrad.widgets import AccessMap

    values = np.array([0, 1, 1, 3], dtype=np.int64)
    good = define(solution_source(NOTEBOOK, "histogram"), "histogram")
    svg = AccessMap(record_accesses(good, 1, 4, values, np.zeros(NBINS, np.int64))).to_svg()
    assert ">A2<" in svg and ">A1<" in svg and "bins[3]: written by A1, read 0x" in svg
    svg = AccessMap(record_accesses(histogram_plain_increment, 1, 4, values,
                                    np.zeros(NBINS, np.int64)), arrays=["bins"]).to_svg()
    assert ">2×<" in svg  # bins[1]: two threads wrote it without an atomic
    stub = define(learner_stub(solution_source(NOTEBOOK, "histogram")), "histogram")
    assert "fill in <code>histogram</code>" in AccessMap.launch(stub, 1, 4, values,
                                                                np.zeros(NBINS, np.int64)).value
    import pytest
    with pytest.raises(ValueError, match="no array named nope"):
        AccessMap(record_accesses(good, 1, 4, values, np.zeros(NBINS, np.int64)), arrays=["nope"])


def test_access_map_draws_every_element_of_a_long_or_wide_array():
    """A 1-D array longer than a row wraps (every element drawn, each row labelled with
    its first index); a 2-D array wider than that keeps all its columns."""
    import re

    from teachgrad.kernels.record import record_accesses
    from teachgrad.widgets import AccessMap

    conv1d = define(solution_source(NOTEBOOK, "conv1d"), "conv1d")
    x, w = np.arange(1.0, 41.0), np.ones(2 * RADIUS + 1)
    svg = AccessMap(record_accesses(conv1d, 2, THREADS, x, w, np.zeros(x.size)),
                    arrays=["x", "out"]).to_svg()
    for name in ("x", "out"):
        drawn = sorted(int(k) for k in re.findall(rf"<title>{name}\[(\d+)\]:", svg))
        assert drawn == list(range(40)), (name, drawn)
    assert ">[32]<" in svg and ">[0]<" in svg  # the wrapped rows say where they start
    assert "out[39]: written by t39, read 0x" in svg

    @cuda.jit
    def fill_rows(out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            for j in range(out.shape[1]):
                out[i, j] = i
    svg = AccessMap(record_accesses(fill_rows, 1, 4, np.zeros((3, 40)))).to_svg()
    assert len(re.findall(r"<title>out\[\d+, \d+\]:", svg)) == 120
    assert "out[2, 39]: written by t2, read 0x" in svg


# -- 8b.7 im2col --------------------------------------------------------------------------------

def im2col_kernel(*, swapped=False, width_off_by_one=False, one_pass=False):
    @cuda.jit
    def im2col(x, cols, K):
        out_w = x.shape[1] - K + (0 if width_off_by_one else 1)
        start, stop = cuda.grid(1), cols.size
        step = cuda.gridsize(1)
        if one_pass:
            stop = min(stop, start + 1)
        for e in range(start, stop, step):
            p, q = e // (K * K), e % (K * K)
            if swapped:
                cols[p, q] = x[p // out_w + q % K, p % out_w + q // K]
            else:
                cols[p, q] = x[p // out_w + q // K, p % out_w + q % K]
    return im2col


@cuda.jit
def im2col_patch_per_thread(x, cols, K):
    out_w = x.shape[1] - K + 1
    for p in range(cuda.grid(1), cols.shape[0], cuda.gridsize(1)):
        for q in range(K * K):
            cols[p, q] = x[p // out_w + q // K, p % out_w + q % K]


def test_im2col_with_the_patch_transposed():
    rejected(ch08b.check_im2col(im2col_kernel(swapped=True)), "wrong value at cols[",
             "row q // K, column q % K")


def test_im2col_with_the_output_width_off_by_one():
    rejected(ch08b.check_im2col(im2col_kernel(width_off_by_one=True)), "out_w")


def test_im2col_without_the_grid_stride_loop():
    rejected(ch08b.check_im2col(im2col_kernel(one_pass=True)), "never written")


def test_im2col_with_one_patch_per_thread():
    rejected(ch08b.check_im2col(im2col_patch_per_thread), "entry 1 of cols",
             "written by thread 0, not by thread 1")

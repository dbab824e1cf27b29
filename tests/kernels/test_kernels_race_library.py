"""Every library kernel with shared memory and barriers, under the race checker.

The simulator hides two bugs that a GPU does not. A ``cuda.syncthreads()`` that some
threads of a block skip is undefined behaviour on a GPU (it hangs or gives wrong
answers), while the simulator lets it through; and two threads touching one shared cell
between barriers give a wrong answer only some of the time. So each kernel runs once
under :func:`race.race_check`, in every variant its launcher builds (dtype, causal mask,
recording), on ragged sizes: several blocks, the last one partial, lengths that are not
multiples of the tile. Shared memory starts filled with NaN, as a GPU hands a block
whatever was there before, so a read of a slot nobody wrote shows in the result. Each
test asserts that the report is clean and that what the kernel wrote equals numpy's
answer, which also proves the kernel ran on those arguments.

``record.py`` launches kernels but defines none with shared memory, so it has no test here.
"""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import math

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.kernels import (_simulator, attention, attention_backward, matmul, parts, race,
                               reduce, tensor_core)

# race_check runs kernels in the simulator on any machine (test_kernels_race.py checks that
# it does on a GPU machine too): these tests use no GPU, and a GPU run's minutes go to those
# that do
pytestmark = pytest.mark.skipif(not tg.cuda.is_simulated(),
                                reason="simulated on any machine: nothing here runs on the GPU, "
                                       "so the GPU run leaves these to the simulator's runs")

rng = np.random.default_rng(17)


def ceil_div(a, b):
    return -(-a // b)


def race_free(kernel, grid, block, *args):
    """Race-check one launch, with shared memory starting as NaN; fail with the report's summary."""
    with _simulator.uninitialised_shared():
        report = race.race_check(kernel, grid, block, *args)
    assert report.ok, report.summary()
    assert report.barriers > 0 and report.accesses, report.summary()  # shared memory was used
    return report


def tolerance(dtype):
    return 1e-5 if np.dtype(dtype) == np.float32 else 1e-12


# -- matmul -------------------------------------------------------------------------------------

def matmul_operands(batch, M, K, N, dtype):
    """A batch of left operands and one right operand shared by every product (``x @ W``)."""
    A = rng.standard_normal((batch, M, K)).astype(dtype)
    B = rng.standard_normal((1, K, N)).astype(dtype)
    return A, B, np.full((batch, M, N), np.nan, dtype)


@pytest.mark.parametrize("record", ["off", "counts", "counts and loads"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tiled_matmul(dtype, record):
    tile, batch, M, K, N = 4, 2, 6, 7, 5
    A, B, C = matmul_operands(batch, M, K, N, dtype)
    grid = (ceil_div(N, tile), ceil_div(M, tile))
    phases = ceil_div(K, tile)
    counts = np.zeros(4 if record != "off" else 1, np.int64)
    loads_shape = ((grid[1], grid[0], phases, tile, tile, 2) if record == "counts and loads"
                   else (1,) * 6)
    a_loads, b_loads = (np.full(loads_shape, -2, np.int32) for _ in "ab")
    race_free(matmul.tiled_kernel(np.dtype(dtype), tile, record != "off"), (*grid, batch),
              (tile, tile), A, B, C, counts, a_loads, b_loads)
    np.testing.assert_allclose(C, A @ B, rtol=tolerance(dtype), atol=tolerance(dtype))
    if record == "off":
        assert counts[0] == 0 and (a_loads == -2).all() and (b_loads == -2).all()
        return
    threads = batch * grid[0] * grid[1] * tile * tile
    global_reads = batch * (grid[0] * M * K + grid[1] * K * N)
    assert counts.tolist() == [global_reads, threads * phases * 2 * tile, threads * phases * 2,
                               threads * phases * 2]
    if record == "counts and loads":  # block (bx, by), phase p, thread (ty, tx) of product 0
        by, bx, p, ty, tx = np.indices(loads_shape[:5])
        row, col, k_a, k_b = by * tile + ty, bx * tile + tx, p * tile + tx, p * tile + ty
        a_in, b_in = (row < M) & (k_a < K), (k_b < K) & (col < N)
        np.testing.assert_array_equal(a_loads, np.stack([np.where(a_in, row, -1),
                                                         np.where(a_in, k_a, -1)], axis=-1))
        np.testing.assert_array_equal(b_loads, np.stack([np.where(b_in, k_b, -1),
                                                         np.where(b_in, col, -1)], axis=-1))
    else:
        assert (a_loads == -2).all() and (b_loads == -2).all()


@pytest.mark.parametrize("record", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_register_blocked_matmul(dtype, record):
    (BM, BN, BK), (TM, TN) = (8, 8, 4), (2, 2)
    batch, M, K, N = 2, 10, 7, 9
    A, B, C = matmul_operands(batch, M, K, N, dtype)
    kernel = matmul.register_kernel(np.dtype(dtype), (BM, BN, BK), (TM, TN), record)
    grid = (ceil_div(N, BN), ceil_div(M, BM))
    counts = np.zeros(4 if record else 1, np.int64)
    race_free(kernel, (*grid, batch), kernel.threads, A, B, C, counts)
    np.testing.assert_allclose(C, A @ B, rtol=tolerance(dtype), atol=tolerance(dtype))
    if not record:
        assert counts[0] == 0
        return
    blocks, steps = batch * grid[0] * grid[1], ceil_div(K, BK)
    threads = blocks * (BM // TM) * (BN // TN)
    assert counts.tolist() == [batch * (grid[0] * M * K + grid[1] * K * N),
                               threads * steps * BK * (TM + TN),
                               blocks * steps * (BM * BK + BK * BN), threads * steps * 2]


def test_the_engine_matmul_part():
    tile, M, K, N = 4, 6, 7, 5
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    C = np.full((M, N), np.nan)
    race_free(parts.engine_matmul(tile), (ceil_div(N, tile), ceil_div(M, tile)), (tile, tile),
              A, B, C)
    np.testing.assert_allclose(C, A @ B, rtol=1e-12, atol=1e-12)


# -- tensor cores -------------------------------------------------------------------------------

@pytest.mark.parametrize("counted", [False, True])
def test_tensor_core_mma_matmul(counted):
    F, batch, M, K, N = 4, 2, 6, 5, 7
    A = rng.standard_normal((batch, M, K)).astype(np.float16)
    B = rng.standard_normal((1, K, N)).astype(np.float16)
    C = np.full((batch, M, N), np.nan, np.float32)
    counts = np.zeros(2 if counted else 1, np.int64)  # size 1: a flag, nothing counted
    grid = (ceil_div(N, F), ceil_div(M, F), batch)
    race_free(tensor_core.mma_kernel(F), grid, tensor_core.WARP, A, B, C, counts)
    np.testing.assert_allclose(C, A.astype(np.float32) @ B.astype(np.float32), rtol=1e-5, atol=1e-5)
    assert counts[0] == (grid[0] * grid[1] * batch * ceil_div(K, F) if counted else 0)


# -- reductions ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["max", "min"])
def test_reduce_max_and_min(op, dtype):
    """Both passes of reduce_rows: 2 blocks per row, 2 row blocks for 3 rows (a grid-stride
    loop over rows), then one block of 8 threads on the 2 partial results."""
    threads, rows, n = 8, 3, 21
    x = rng.standard_normal((rows, n)).astype(dtype)
    values = x
    for grid in [(2, 2), (1, 2)]:
        blocks = grid[0]
        out = np.full((rows, blocks), np.nan, dtype)
        race_free(reduce.reduce_kernel(op, np.dtype(dtype), threads), grid, threads,
                  values, out, rows, values.shape[1])
        share = np.arange(values.shape[1]) // threads % blocks  # block b's columns
        expected = np.stack([getattr(values[:, share == b], op)(axis=1) for b in range(blocks)], 1)
        np.testing.assert_array_equal(out, expected)
        values = out
    np.testing.assert_array_equal(values[:, 0], getattr(x, op)(axis=1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduce(op, dtype):
    """3 rows over 2 blocks of 8 threads, 21 columns; ties go to the lower index, NaN wins."""
    threads, rows, n = 8, 3, 21
    x = rng.integers(-4, 5, size=(rows, n)).astype(dtype)  # many ties
    x[1, [17, 5]] = np.nan
    out = np.full(rows, -7, np.int64)
    race_free(reduce.arg_reduce_kernel(op, np.dtype(dtype), threads), min(rows, 2), threads,
              x, out, rows, n)
    np.testing.assert_array_equal(out, getattr(x, op)(axis=1))
    assert out[1] == 5


def test_the_engine_block_sum_part():
    """Two passes, as run_reduce launches them: 2 blocks of 32 per row over 45 columns, then 1."""
    rows, n, threads = 2, 45, parts.REDUCE_THREADS
    x = rng.standard_normal((rows, n))
    values = x
    while True:
        blocks = ceil_div(values.shape[1], threads)
        out = np.full((rows, blocks), np.nan)
        race_free(parts.engine_block_sum, (blocks, rows), threads, values, out)
        expected = np.add.reduceat(values, range(0, values.shape[1], threads), axis=1)
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
        if blocks == 1:
            break
        values = out
    np.testing.assert_allclose(out[:, 0], x.sum(axis=1), rtol=1e-12, atol=1e-12)


# -- attention ----------------------------------------------------------------------------------

HEADS, D = 2, 4


def attention_inputs(T, S, dtype):
    return tuple(rng.standard_normal((HEADS, n, D)).astype(dtype) for n in (T, S, S))


def scores_of(q, k, causal, scale):
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) * scale
    return np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf) if causal else s


def logsumexp(s):
    top = s.max(-1, keepdims=True)
    return (top + np.log(np.exp(s - top).sum(-1, keepdims=True)))[..., 0]


@pytest.mark.parametrize("record", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_flash_attention_forward(dtype, causal, record):
    """10 query rows in blocks of 4 (4, 4, 2), 7 keys in tiles of 4 (4, 3). Block 0 of the
    causal kernel skips the second key tile; with ``record`` the thread of head 1, row 5
    traces its online softmax (key 6 is masked for it when causal)."""
    T, S, BQ, BK = 10, 7, 4, 4
    q, k, v = attention_inputs(T, S, dtype)
    O, LSE = np.full((HEADS, T, D), np.nan, dtype), np.full((HEADS, T), np.nan, dtype)
    scale = 1 / math.sqrt(D)
    head, row = (1, 5) if record else (-1, -1)
    tiles = attention.tiles_visited(T, S, BQ, BK, causal, row // BQ) if record else 1
    shapes = [(tiles, 4), (S,), (tiles, D)] if record else [(1, 1), (1,), (1, 1)]
    trace = [np.full(shape, np.nan, dtype) for shape in shapes]
    kernel = attention.flash_attention_kernel(D, BQ, BK, causal, attention.online_softmax_update,
                                              record, np.dtype(dtype))
    race_free(kernel, (ceil_div(T, BQ), HEADS), BQ, q, k, v, O, LSE, np.dtype(dtype).type(scale),
              head, row, *trace)
    tol = tolerance(dtype)
    np.testing.assert_allclose(O, attention.naive_attention(q, k, v, causal), rtol=tol, atol=tol)
    s = scores_of(q, k, causal, scale)
    np.testing.assert_allclose(LSE, logsumexp(s), rtol=tol, atol=tol)
    state, scores, partial = trace
    if not record:
        assert np.isnan(state).all() and np.isnan(scores).all() and np.isnan(partial).all()
        return
    assert tiles == 2
    np.testing.assert_allclose(scores, s[head, row], rtol=tol, atol=tol)  # -inf where masked
    for t in range(tiles):  # the running max and sum after each key tile
        seen = s[head, row, :min((t + 1) * BK, S)]
        np.testing.assert_allclose(state[t, 1:3], [seen.max(), np.exp(seen - seen.max()).sum()],
                                   rtol=tol, atol=tol)
    np.testing.assert_allclose(partial[-1], O[head, row], rtol=tol, atol=tol)


def attention_gradients(q, k, v, grad_out, causal, scale):
    """dQ, dK, dV of naive attention (float64), from the softmax's backward; and D = dO . O."""
    q, k, v, grad_out = (a.astype(np.float64) for a in (q, k, v, grad_out))
    s = scores_of(q, k, causal, scale)
    p = np.exp(s - logsumexp(s)[..., None])
    delta = (grad_out * (p @ v)).sum(-1)
    ds = p * (grad_out @ np.swapaxes(v, -1, -2) - delta[..., None])
    return (ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, np.swapaxes(p, -1, -2) @ grad_out,
            delta)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T,S", [(10, 7), (5, 10)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_flash_attention_backward(dtype, T, S, causal):
    """The two kernels as flash_backward launches them, block_q 4 and block_k 3: dq over
    query blocks of 4 rows, then dkdv over key blocks of 3, the last ones partial. Causal,
    the dkdv blocks skip query tiles wholly above their keys: with 10 rows the block of key 6
    skips tile 0; with 5 rows the block of key 9 skips both and passes no barrier at all."""
    BQ, BK = 4, 3
    q, k, v = attention_inputs(T, S, dtype)
    grad_out = rng.standard_normal((HEADS, T, D)).astype(dtype)
    scale = 1 / math.sqrt(D)
    O = attention.naive_attention(q, k, v, causal).astype(dtype)  # what the forward wrote
    LSE = logsumexp(scores_of(q, k, causal, scale)).astype(dtype)
    dQ, delta = np.full((HEADS, T, D), np.nan, dtype), np.full((HEADS, T), np.nan, dtype)
    dK, dV = np.full((HEADS, S, D), np.nan, dtype), np.full((HEADS, S, D), np.nan, dtype)
    scale = np.dtype(dtype).type(scale)
    options = (D, BQ, BK, causal, np.dtype(dtype))
    race_free(attention_backward.dq_kernel(*options), (ceil_div(T, BQ), HEADS), BQ,
              q, k, v, O, LSE, grad_out, dQ, delta, scale)
    race_free(attention_backward.dkdv_kernel(*options), (ceil_div(S, BK), HEADS), BK,
              q, k, v, LSE, grad_out, delta, dK, dV, scale)
    want = attention_gradients(q, k, v, grad_out, causal, float(scale))
    rtol, atol = (1e-4, 1e-5) if dtype == np.float32 else (1e-10, 1e-12)
    for name, got, expected in zip(("dQ", "dK", "dV", "D"), (dQ, dK, dV, delta), want):
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=name)
    if causal and S > T:  # keys after the last query have no gradient
        assert not dK[:, T:].any() and not dV[:, T:].any()


# -- at a GPU's sizes ---------------------------------------------------------------------------
# The tests above use the simulator's small blocks. A GPU launches the same kernels with
# bigger ones (elementwise.py, reduce.py, matmul.py, attention.py choose them when no
# simulator runs), so each is also checked once with those blocks, on ragged sizes.

GPU_TILE, GPU_REGISTER_BLOCK, GPU_THREADS = 16, ((64, 64, 16), (4, 4)), 256


def test_matmuls_in_a_gpus_blocks():
    """The tiled kernel in 16 x 16 threads and the register-blocked one in 64 x 64 outputs
    (4 x 4 a thread, 256 threads), on sizes that are multiples of neither."""
    A, B, C = matmul_operands(1, 21, 19, 18, np.float32)
    grid = (ceil_div(18, GPU_TILE), ceil_div(21, GPU_TILE), 1)
    counts, loads = np.zeros(1, np.int64), np.zeros((1,) * 6, np.int32)
    race_free(matmul.tiled_kernel(np.dtype(np.float32), GPU_TILE, False), grid,
              (GPU_TILE, GPU_TILE), A, B, C, counts, loads, loads)
    np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)
    A, B, C = matmul_operands(1, 70, 19, 67, np.float32)
    kernel = matmul.register_kernel(np.dtype(np.float32), *GPU_REGISTER_BLOCK, False)
    assert kernel.threads[0] * kernel.threads[1] == GPU_THREADS
    race_free(kernel, (2, 2, 1), kernel.threads, A, B, C, counts)
    np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)


def test_reductions_in_a_gpus_blocks():
    """256 threads a block, 2 blocks a row for 600 columns, then the arg reduction."""
    rows, n = 3, 600
    x = rng.standard_normal((rows, n))
    out = np.full((rows, 2), np.nan)
    race_free(reduce.reduce_kernel("sum", np.dtype(np.float64), GPU_THREADS), (2, rows),
              GPU_THREADS, x, out, rows, n)
    share = np.arange(n) // GPU_THREADS % 2
    np.testing.assert_allclose(out, np.stack([x[:, share == b].sum(1) for b in (0, 1)], 1),
                               rtol=1e-12, atol=1e-12)
    arg = np.full(rows, -7, np.int64)
    race_free(reduce.arg_reduce_kernel("argmax", np.dtype(np.float64), GPU_THREADS), rows,
              GPU_THREADS, x, arg, rows, n)
    np.testing.assert_array_equal(arg, x.argmax(axis=1))


@pytest.mark.parametrize("rows,keys,dkdv_rows", [(64, 32, 64), (64, 32, 32), (64, 16, 16)])
def test_flash_attention_in_a_gpus_tiles(rows, keys, dkdv_rows):
    """The tiles a GPU takes (``key_tile``, ``query_tile``): 64 query rows a block and 32
    keys, and the smaller tiles of a large head dimension (32 query rows for dK/dV; 16 keys
    and 16 rows in float64 at head_dim 128), causal, on 70 queries and 45 keys."""
    T, S, dtype = 70, 45, np.float64
    q, k, v = attention_inputs(T, S, dtype)
    scale = 1 / math.sqrt(D)
    O, LSE = np.full((HEADS, T, D), np.nan), np.full((HEADS, T), np.nan)
    no_trace = [np.full(shape, np.nan) for shape in [(1, 1), (1,), (1, 1)]]
    race_free(attention.flash_attention_kernel(D, rows, keys, True, dtype=np.dtype(dtype)),
              (ceil_div(T, rows), HEADS), rows, q, k, v, O, LSE, scale, -1, -1, *no_trace)
    np.testing.assert_allclose(O, attention.naive_attention(q, k, v, True), rtol=1e-12,
                               atol=1e-12)
    grad_out = rng.standard_normal((HEADS, T, D))
    dQ, delta = np.full((HEADS, T, D), np.nan), np.full((HEADS, T), np.nan)
    dK, dV = np.full((HEADS, S, D), np.nan), np.full((HEADS, S, D), np.nan)
    race_free(attention_backward.dq_kernel(D, rows, keys, True, np.dtype(dtype)),
              (ceil_div(T, rows), HEADS), rows, q, k, v, O, LSE, grad_out, dQ, delta, scale)
    race_free(attention_backward.dkdv_kernel(D, dkdv_rows, keys, True, np.dtype(dtype)),
              (ceil_div(S, keys), HEADS), keys, q, k, v, LSE, grad_out, delta, dK, dV, scale)
    for name, got, expected in zip(("dQ", "dK", "dV", "D"), (dQ, dK, dV, delta),
                                   attention_gradients(q, k, v, grad_out, True, scale)):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12, err_msg=name)

"""Matrix multiplication in three steps, each faster for one reason.

``C[i, j] = sum_k A[i, k] * B[k, j]`` (numpy spec: ``C = A @ B``). Arrays are
contiguous 3-D device arrays ``A (batch_a, M, K)``, ``B (batch_b, K, N)``,
``C (batch, M, N)``; a batch of 1 is shared by every product (``x @ W``).
``blockIdx.z`` picks the product. Every kernel is right for any ``M, K, N``,
not only multiples of the tile: reads past an edge count as 0, writes past an
edge are skipped.

1. :func:`naive_kernel` -- **one thread per output.** Each thread reads a row
   of A and a column of B from global memory: ``2K`` slow reads per output,
   and every element of A is read ``N`` times over.
2. :func:`tiled_kernel` -- **tiles in shared memory.** A block of
   ``TILE x TILE`` threads computes a ``TILE x TILE`` tile of C. It walks K in
   *phases*: each thread copies one element of A's tile and one of B's into
   shared memory, the block waits at a barrier, then every thread does TILE
   multiply-adds from shared memory. Global reads drop by a factor of TILE.
3. :func:`register_kernel` -- **register blocking.** Each thread computes a
   ``TM x TN`` block of outputs kept in registers. Per step of k it reads TM
   values of A and TN of B from shared memory and does ``TM*TN`` multiply-adds:
   shared-memory reads drop by another factor of about ``TM*TN/(TM+TN)``.

**Recording.** With ``record=True`` the factories build the same kernels with
a few extra lines that count, per thread, global reads, shared reads, shared
writes and barriers passed (summed into ``counts``), and for the tiled kernel
which global element each thread loaded into each tile in each phase. See
:mod:`teachgrad.kernels.record` for the data structure built from them.

Kernel-level API (contiguous numba device arrays; ``C`` preallocated)::

    naive(A, B, C, counts=None)
    tiled(A, B, C, tile=TILE, counts=None, a_loads=None, b_loads=None)
    register_blocked(A, B, C, block=REGISTER_BLOCK, per_thread=REGISTER_PER_THREAD, counts=None)
    KERNELS = {"naive": naive, "tiled": tiled, "register": register_blocked}

``counts`` is an int64 device array of 4 zeros that receives
``[global reads, shared reads, shared writes, barriers]`` summed over threads.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda, from_dtype

from .. import _cuda_setup
from .launch import device_limits, launch

_SIM = _cuda_setup.is_simulated()
#: Tile size of the shared-memory kernel (threads per block = TILE * TILE).
TILE = 8 if _SIM else 16
#: Register-blocked kernel: (BM, BN, BK) outputs per block and k-step ...
REGISTER_BLOCK = (16, 16, 8) if _SIM else (64, 64, 16)
#: ... and (TM, TN) outputs per thread; threads per block = (BM/TM) * (BN/TN).
REGISTER_PER_THREAD = (4, 4)

GLOBAL_READS, SHARED_READS, SHARED_WRITES, BARRIERS = range(4)


@cuda.jit(device=True)
def add_counts(counts, global_reads, shared_reads, shared_writes, barriers):
    """Add one thread's tallies to the launch totals (atomics: threads add at once)."""
    cuda.atomic.add(counts, GLOBAL_READS, global_reads)
    cuda.atomic.add(counts, SHARED_READS, shared_reads)
    cuda.atomic.add(counts, SHARED_WRITES, shared_writes)
    cuda.atomic.add(counts, BARRIERS, barriers)


@functools.lru_cache(maxsize=None)
def naive_kernel(dtype: np.dtype, record: bool = False):
    zero = np.dtype(dtype).type(0)

    def naive_matmul(A, B, C, counts):
        col, row = cuda.grid(2)  # x along columns: neighbouring threads read neighbouring B
        batch = cuda.blockIdx.z
        a = batch if A.shape[0] > 1 else 0
        b = batch if B.shape[0] > 1 else 0
        M, K, N = A.shape[1], A.shape[2], B.shape[2]
        if row < M and col < N:
            acc = zero
            for k in range(K):
                acc += A[a, row, k] * B[b, k, col]  # two global reads per multiply-add
            C[batch, row, col] = acc
            if record:
                add_counts(counts, 2 * K, 0, 0, 0)

    return cuda.jit(naive_matmul)


@functools.lru_cache(maxsize=None)
def tiled_kernel(dtype: np.dtype, tile: int, record: bool = False):
    zero = np.dtype(dtype).type(0)
    value_type = from_dtype(np.dtype(dtype))

    def tiled_matmul(A, B, C, counts, a_loads, b_loads):
        a_tile = cuda.shared.array((tile, tile), value_type)
        b_tile = cuda.shared.array((tile, tile), value_type)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * tile + ty
        col = cuda.blockIdx.x * tile + tx
        batch = cuda.blockIdx.z
        a = batch if A.shape[0] > 1 else 0
        b = batch if B.shape[0] > 1 else 0
        M, K, N = A.shape[1], A.shape[2], B.shape[2]
        acc = zero
        global_reads, shared_reads, shared_writes, barriers = 0, 0, 0, 0
        for phase in range((K + tile - 1) // tile):
            # 1. load: thread (ty, tx) copies A[row, phase*tile + tx] and B[phase*tile + ty, col]
            k_a = phase * tile + tx
            k_b = phase * tile + ty
            if row < M and k_a < K:
                a_tile[ty, tx] = A[a, row, k_a]
                global_reads += 1
            else:
                a_tile[ty, tx] = zero  # past the edge: a zero adds nothing
            if k_b < K and col < N:
                b_tile[ty, tx] = B[b, k_b, col]
                global_reads += 1
            else:
                b_tile[ty, tx] = zero
            if record and batch == 0 and a_loads.size > 1:  # size 1: only counts wanted
                by, bx = cuda.blockIdx.y, cuda.blockIdx.x
                a_loads[by, bx, phase, ty, tx, 0] = row if row < M and k_a < K else -1
                a_loads[by, bx, phase, ty, tx, 1] = k_a if row < M and k_a < K else -1
                b_loads[by, bx, phase, ty, tx, 0] = k_b if k_b < K and col < N else -1
                b_loads[by, bx, phase, ty, tx, 1] = col if k_b < K and col < N else -1
            cuda.syncthreads()  # barrier 1: both tiles are complete before anyone reads them
            # 2. multiply: tile multiply-adds, every operand from fast shared memory
            for k in range(tile):
                acc += a_tile[ty, k] * b_tile[k, tx]
            shared_reads += 2 * tile
            shared_writes += 2
            cuda.syncthreads()  # barrier 2: all reads are done before the next phase overwrites
            barriers += 2
        if row < M and col < N:
            C[batch, row, col] = acc
        if record:
            add_counts(counts, global_reads, shared_reads, shared_writes, barriers)

    kernel = cuda.jit(tiled_matmul)
    kernel.shared_bytes = 2 * tile * tile * np.dtype(dtype).itemsize
    return kernel


@cuda.jit(device=True)
def copy_tile(tile, source, batch, row0, col0, me, threads, zero):
    """The block copies ``source[batch, row0:, col0:]`` into the shared ``tile``, together.

    Thread ``me`` of ``threads`` takes elements ``me, me + threads, ...`` of the
    tile in row-major order, so neighbouring threads read neighbouring memory.
    Past the edge of ``source`` it stores ``zero``. Returns this thread's
    (global reads, shared writes), for recording.
    """
    rows, cols = tile.shape
    reads, writes = 0, 0
    for e in range(me, rows * cols, threads):
        r, c = e // cols, e % cols
        if row0 + r < source.shape[1] and col0 + c < source.shape[2]:
            tile[r, c] = source[batch, row0 + r, col0 + c]
            reads += 1
        else:
            tile[r, c] = zero
        writes += 1
    return reads, writes


@functools.lru_cache(maxsize=None)
def register_kernel(dtype: np.dtype, block: tuple[int, int, int], per_thread: tuple[int, int],
                    record: bool = False):
    BM, BN, BK = block
    TM, TN = per_thread
    TY, TX = BM // TM, BN // TN  # threads per block along y and x
    THREADS = TY * TX
    zero = np.dtype(dtype).type(0)
    value_type = from_dtype(np.dtype(dtype))

    def register_blocked_matmul(A, B, C, counts):
        a_tile = cuda.shared.array((BM, BK), value_type)
        b_tile = cuda.shared.array((BK, BN), value_type)
        acc = cuda.local.array((TM, TN), value_type)  # this thread's outputs, in registers
        a_frag = cuda.local.array(TM, value_type)
        b_frag = cuda.local.array(TN, value_type)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        me = ty * TX + tx
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        batch = cuda.blockIdx.z
        a = batch if A.shape[0] > 1 else 0
        b = batch if B.shape[0] > 1 else 0
        M, K, N = A.shape[1], A.shape[2], B.shape[2]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = zero
        global_reads, shared_reads, shared_writes, barriers = 0, 0, 0, 0
        for k0 in range(0, K, BK):
            # 1. load: the block's threads share out BM*BK + BK*BN copies
            reads_a, writes_a = copy_tile(a_tile, A, a, row0, k0, me, THREADS, zero)
            reads_b, writes_b = copy_tile(b_tile, B, b, k0, col0, me, THREADS, zero)
            global_reads += reads_a + reads_b
            shared_writes += writes_a + writes_b
            cuda.syncthreads()  # the tiles are complete before anyone reads them
            # 2. outer products: each a_frag value is used TN times, each b_frag value TM times
            for k in range(BK):
                for i in range(TM):
                    a_frag[i] = a_tile[ty + i * TY, k]  # rows interleaved by TY
                for j in range(TN):
                    b_frag[j] = b_tile[k, tx + j * TX]  # neighbouring threads, neighbouring columns
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += a_frag[i] * b_frag[j]
            shared_reads += BK * (TM + TN)
            cuda.syncthreads()  # all reads are done before the next step overwrites the tiles
            barriers += 2
        for i in range(TM):
            for j in range(TN):
                row, col = row0 + ty + i * TY, col0 + tx + j * TX
                if row < M and col < N:
                    C[batch, row, col] = acc[i, j]
        if record:
            add_counts(counts, global_reads, shared_reads, shared_writes, barriers)

    kernel = cuda.jit(register_blocked_matmul)
    kernel.shared_bytes = (BM * BK + BK * BN) * np.dtype(dtype).itemsize
    kernel.threads = (TX, TY)
    return kernel


# -- launchers --------------------------------------------------------------------

_dummies: dict[int, object] = {}


def _dummy(ndim: int, dtype=np.int32):
    """A tiny stand-in for a recording array when not recording (never touched)."""
    key = (ndim, np.dtype(dtype).str)
    if key not in _dummies:
        _dummies[key] = cuda.device_array((1,) * ndim, dtype=dtype)
    return _dummies[key]


def _check(A, B, C) -> None:
    if A.ndim != 3 or B.ndim != 3 or C.ndim != 3:
        raise ValueError("matmul kernels take 3-D (batch, rows, cols) arrays")
    (ba, M, K), (bb, K2, N), (bc, M2, N2) = A.shape, B.shape, C.shape
    if K != K2 or (M, N) != (M2, N2) or ba not in (1, bc) or bb not in (1, bc):
        raise ValueError(f"matmul shapes do not fit: A {A.shape} @ B {B.shape} -> C {C.shape}")


def _launch_batched(kernel, grid_xy, threads, A, B, C, *record_args) -> None:
    """Launch over the batch along grid z, in chunks when it is over the grid's z limit."""
    max_z = device_limits().max_grid_dims[2]
    for start in range(0, C.shape[0], max_z):
        stop = min(start + max_z, C.shape[0])
        a = A if A.shape[0] == 1 else A[start:stop]
        b = B if B.shape[0] == 1 else B[start:stop]
        launch(kernel, (*grid_xy, stop - start), threads, a, b, C[start:stop], *record_args)


def naive(A, B, C, counts=None) -> None:
    _check(A, B, C)
    threads = (16, 16) if not _SIM else (8, 8)
    M, N = C.shape[1], C.shape[2]
    grid = ((N + threads[0] - 1) // threads[0], (M + threads[1] - 1) // threads[1])
    kernel = naive_kernel(np.dtype(C.dtype), counts is not None)
    _launch_batched(kernel, grid, threads, A, B, C, counts if counts is not None else _dummy(1, np.int64))


def tiled(A, B, C, tile: int = TILE, counts=None, a_loads=None, b_loads=None) -> None:
    _check(A, B, C)
    M, N = C.shape[1], C.shape[2]
    grid = ((N + tile - 1) // tile, (M + tile - 1) // tile)
    record = counts is not None
    kernel = tiled_kernel(np.dtype(C.dtype), tile, record)
    _launch_batched(kernel, grid, (tile, tile), A, B, C,
                    counts if record else _dummy(1, np.int64),
                    a_loads if a_loads is not None else _dummy(6),
                    b_loads if b_loads is not None else _dummy(6))


def register_blocked(A, B, C, block: tuple[int, int, int] = REGISTER_BLOCK,
                     per_thread: tuple[int, int] = REGISTER_PER_THREAD, counts=None) -> None:
    _check(A, B, C)
    BM, BN, _ = block
    TM, TN = per_thread
    if BM % TM or BN % TN:
        raise ValueError(f"block {block[:2]} must be a multiple of the per-thread block {per_thread}")
    M, N = C.shape[1], C.shape[2]
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM)
    kernel = register_kernel(np.dtype(C.dtype), tuple(block), tuple(per_thread), counts is not None)
    _launch_batched(kernel, grid, kernel.threads, A, B, C,
                    counts if counts is not None else _dummy(1, np.int64))


KERNELS = {"naive": naive, "tiled": tiled, "register": register_blocked}

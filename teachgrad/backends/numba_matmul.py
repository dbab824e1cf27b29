"""Matrix multiplication on the CPU in three steps, each faster for one reason.

``C[i, j] = sum_k A[i, k] * B[k, j]`` (numpy spec: ``C = A @ B``), the CPU
counterpart of :mod:`teachgrad.kernels.matmul`. The loops take contiguous 3-D
arrays ``A (batch_a, M, K)``, ``B (batch_b, K, N)``, ``C (batch, M, N)``; a
batch of 1 is shared by every product (``x @ W``). Each factory builds its
loop with ``prange`` (rows of C shared over the cores) or, for a small
product, with ``range`` (one core: see ``numba_loops.GRAIN``).

1. :func:`naive_kernel` -- **the formula as written** (loops i, j, k). The
   innermost loop walks *down a column* of B, jumping ``N`` numbers each step,
   so almost every read misses the cache.
2. :func:`loop_order_kernel` -- **the same arithmetic, loops i, k, j.** Now the
   innermost loop walks *along rows* of B and C: neighbouring numbers, which
   the compiler turns into vector instructions (8 float32 multiply-adds at a time).
3. :func:`blocked_kernel` -- **register blocking**, like the GPU's third kernel.
   B is transposed once, so both operands are read along rows, and
   :func:`block_4x4` computes a 4 x 4 block of C with its 16 running sums held
   in registers: 8 numbers read give 16 multiply-adds.

numpy's ``A @ B`` calls a BLAS library (OpenBLAS here) that adds hand-tuned
assembly, packing into cache-sized blocks and more; the benchmarks show how
close these few loops come (``python -m teachgrad.bench --ops matmul``).

The blocked kernel is compiled with ``fastmath={"reassoc", "contract"}``: its
16 sums run along k, and only permission to reorder them lets the compiler
add 8 values of k at once in vector registers (and fuse multiply and add into
one instruction). Results can differ from numpy's in the last bits, as BLAS's
do. Without it the kernel is 4-5 times slower (see ``benchmarks/NOTES.md``).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit, prange

from .numba_loops import parallel_for

_FAST = {"reassoc", "contract"}
#: A multiply-add costs about 1/8 of an elementwise step (8 of them share a vector
#: instruction), so a matmul goes parallel from about 8 * GRAIN multiply-adds (64^3).
MULTIPLY_ADDS_PER_ELEMENT = 8


def runs_parallel(outputs: int, inner: int) -> bool:
    """Whether a product with ``outputs`` output elements, each a sum of ``inner``
    multiply-adds, takes the parallel build of the kernels."""
    return parallel_for(outputs * inner // MULTIPLY_ADDS_PER_ELEMENT)


@functools.lru_cache(maxsize=None)
def naive_kernel(parallel: bool = True):
    loop_range = prange if parallel else range  # prange: rows of C shared over the cores

    def matmul_naive(A, B, C):
        batch, M, N = C.shape
        K = A.shape[2]
        for task in loop_range(batch * M):  # one task per row of C
            z, i = task // M, task % M
            a, b = (z if A.shape[0] > 1 else 0), (z if B.shape[0] > 1 else 0)
            for j in range(N):
                acc = C.dtype.type(0)
                for k in range(K):
                    acc += A[a, i, k] * B[b, k, j]  # B[b, k, j]: a jump of N numbers per k
                C[z, i, j] = acc

    return njit(parallel=parallel, cache=True)(matmul_naive)


@functools.lru_cache(maxsize=None)
def loop_order_kernel(parallel: bool = True):
    loop_range = prange if parallel else range

    def matmul_loop_order(A, B, C):
        batch, M, N = C.shape
        K = A.shape[2]
        for task in loop_range(batch * M):
            z, i = task // M, task % M
            a, b = (z if A.shape[0] > 1 else 0), (z if B.shape[0] > 1 else 0)
            for j in range(N):
                C[z, i, j] = 0
            for k in range(K):
                a_ik = A[a, i, k]
                for j in range(N):  # along a row of B and of C: vector instructions
                    C[z, i, j] += a_ik * B[b, k, j]

    # no fastmath needed: each C[i, j] is its own sum, so the compiler may already
    # compute 8 neighbouring j at once without changing any sum's order
    return njit(parallel=parallel, cache=True)(matmul_loop_order)


@njit(cache=True, fastmath=_FAST)
def block_4x4(A, BT, C, i, j):
    """``C[i:i+4, j:j+4]`` from rows i..i+3 of A and rows j..j+3 of B transposed."""
    zero = C.dtype.type(0)
    c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = zero  # 16 running sums: registers
    c20 = c21 = c22 = c23 = c30 = c31 = c32 = c33 = zero
    for k in range(A.shape[1]):
        a0, a1, a2, a3 = A[i, k], A[i + 1, k], A[i + 2, k], A[i + 3, k]
        b0, b1, b2, b3 = BT[j, k], BT[j + 1, k], BT[j + 2, k], BT[j + 3, k]
        c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3  # noqa: E702
        c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3  # noqa: E702
        c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3  # noqa: E702
        c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3  # noqa: E702
    C[i, j], C[i, j + 1], C[i, j + 2], C[i, j + 3] = c00, c01, c02, c03
    C[i + 1, j], C[i + 1, j + 1], C[i + 1, j + 2], C[i + 1, j + 3] = c10, c11, c12, c13
    C[i + 2, j], C[i + 2, j + 1], C[i + 2, j + 2], C[i + 2, j + 3] = c20, c21, c22, c23
    C[i + 3, j], C[i + 3, j + 1], C[i + 3, j + 2], C[i + 3, j + 3] = c30, c31, c32, c33


@njit(cache=True, fastmath=_FAST)
def block_edge(A, BT, C, i, j):
    """The part of the 4 x 4 block at ``(i, j)`` that lies inside C, one dot at a time."""
    for r in range(i, min(i + 4, C.shape[0])):
        for s in range(j, min(j + 4, C.shape[1])):
            acc = C.dtype.type(0)
            for k in range(A.shape[1]):
                acc += A[r, k] * BT[s, k]
            C[r, s] = acc


@functools.lru_cache(maxsize=None)
def blocked_kernel(parallel: bool = True):
    loop_range = prange if parallel else range

    def matmul_blocked(A, BT, C):
        """``C = A @ BT.T`` (``BT`` is B transposed: ``(batch_b, N, K)``)."""
        batch, M, N = C.shape
        row_blocks = (M + 3) // 4
        for task in loop_range(batch * row_blocks):  # one task: 4 rows of C
            z, i = task // row_blocks, (task % row_blocks) * 4
            a, b = (z if A.shape[0] > 1 else 0), (z if BT.shape[0] > 1 else 0)
            for j in range(0, N, 4):
                if i + 4 <= M and j + 4 <= N:
                    block_4x4(A[a], BT[b], C[z], i, j)
                else:
                    block_edge(A[a], BT[b], C[z], i, j)  # the ragged edge of C

    return njit(parallel=parallel, cache=True, fastmath=_FAST)(matmul_blocked)


#: The three steps by name: kernel factories, ``factory(parallel)`` gives the compiled loop.
KERNELS = {"naive": naive_kernel, "loop_order": loop_order_kernel, "blocked": blocked_kernel}


def run_kernel(kernel: str, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> None:
    """Run one of :data:`KERNELS` on contiguous 3-D arrays (``C`` is overwritten)."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown matmul kernel {kernel!r}: choose one of {', '.join(KERNELS)}")
    if kernel == "blocked":
        B = np.ascontiguousarray(B.transpose(0, 2, 1))  # B transposed: layout work, by numpy
    KERNELS[kernel](runs_parallel(C.size, A.shape[2]))(A, B, C)


def _as_batched(x: np.ndarray, batch_shape: tuple[int, ...]) -> np.ndarray:
    """A contiguous ``(batch or 1, rows, cols)`` array: one shared matrix stays one."""
    rows, cols = x.shape[-2:]
    if math.prod(x.shape[:-2]) == 1:
        return np.ascontiguousarray(x).reshape(1, rows, cols)
    return np.ascontiguousarray(np.broadcast_to(x, batch_shape + (rows, cols))).reshape(-1, rows, cols)


def matmul(a: np.ndarray, b: np.ndarray, kernel: str = "blocked") -> np.ndarray:
    """``numpy.matmul`` semantics (1-D promotion, batch broadcasting) on the loops above."""
    a2 = a.reshape((1,) + a.shape) if a.ndim == 1 else a  # (K,) is a 1 x K row
    b2 = b.reshape(b.shape + (1,)) if b.ndim == 1 else b  # (K,) is a K x 1 column
    (M, K), (K2, N) = a2.shape[-2:], b2.shape[-2:]
    if K != K2:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not fit "
                         f"({K} columns against {K2} rows)")
    batch_shape = tuple(np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]))
    # every kernel writes every element of C; only K == 0 leaves it at the zero sum
    out = (np.empty if K else np.zeros)(batch_shape + (M, N), dtype=a.dtype)
    if out.size and K:
        C = out.reshape(-1, M, N)
        run_kernel(kernel, _as_batched(a2, batch_shape), _as_batched(b2, batch_shape), C)
    if a.ndim == 1:  # drop the axes the 1-D operands gained
        out = out.reshape(out.shape[:-2] + out.shape[-1:])
    if b.ndim == 1:
        out = out.reshape(out.shape[:-1])
    return out

"""The backward pass of tiled attention: gradients without the T x S matrix, recomputed.

The forward (:mod:`.attention`) keeps only ``O`` and ``LSE = m + log l`` per query row.
The backward needs the probabilities ``P[i, j] = exp(s_ij - LSE_i)`` again, and
recomputes them tile by tile from ``Q``, ``K`` and ``LSE`` instead of storing them -- a
few more multiply-adds for far less memory (Dao et al. 2022). With ``dO`` the gradient of
the output and ``D_i = dO_i . O_i``:

* ``dV_j = sum_i P_ij dO_i``;
* ``dP_ij = dO_i . v_j`` and ``dS_ij = P_ij (dP_ij - D_i)`` (the softmax's backward);
* ``dQ_i = scale * sum_j dS_ij k_j`` and ``dK_j = scale * sum_i dS_ij q_i``.

Two kernels, so that no two threads add into the same gradient row (no atomics):
:func:`dq_kernel` (one thread per query row, walking key tiles, as the forward does; it
also writes ``D``) and :func:`dkdv_kernel` (one thread per key row, walking query tiles
staged in shared memory). Causal masking skips the same wholly masked tiles.

Kernel-level API (contiguous float32 or float64 device arrays, leading axis batch*heads)::

    flash_backward(Q, K, V, O, LSE, dO, dQ, dK, dV, causal=False, scale=None,
                   block_q=None, block_k=None)
    query_tile(head_dim, dtype) -> int   # BLOCK_Q, or fewer rows where dkdv's tiles overflow

``block_k`` is the dQ kernel's key tile and the dK/dV kernel's threads per block (default
:func:`.attention.key_tile`); ``block_q`` is the dQ kernel's threads per block and the dK/dV
kernel's query tile (default ``BLOCK_Q`` and :func:`query_tile`, each the largest that fits).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda, float32, from_dtype

from .attention import BLOCK_Q, _check_shapes, fitting_tile, key_tile
from .launch import launch
from .matmul import copy_tile
from .strided import new_array

_ZERO = float32(0.0)


@cuda.jit(device=True)
def dot(a, b, b_row):
    """``a . b[b_row, :]`` (a local row against a row of a shared tile)."""
    total = _ZERO
    for d in range(len(a)):
        total += a[d] * b[b_row, d]
    return total


def query_tile(head_dim: int, dtype=np.float32) -> int:
    """Query rows per shared tile of the dK/dV kernel when none is given: ``BLOCK_Q``, or
    fewer where the tiles of Q and dO (and a value of LSE and of D a row) would not fit.
    On a GPU: 64 rows, except 32 for float32 with a head dimension of 96 or more and for
    float64 of 48 or more, and 16 for float64 of 96 or more."""
    return fitting_tile(BLOCK_Q, (2 * int(head_dim) + 2) * np.dtype(dtype).itemsize)


@functools.lru_cache(maxsize=None)
def dq_kernel(head_dim: int, block_q: int, block_k: int, causal: bool,
              dtype: np.dtype = np.dtype(np.float32)):
    D, BQ, BK = head_dim, block_q, block_k
    value_type, zero = from_dtype(np.dtype(dtype)), np.dtype(dtype).type(0)

    def flash_attention_dq(Q, K, V, O, LSE, dO, dQ, Dvec, scale):
        k_tile = cuda.shared.array((BK, D), value_type)
        v_tile = cuda.shared.array((BK, D), value_type)
        q_row = cuda.local.array(D, value_type)
        do_row = cuda.local.array(D, value_type)
        dq = cuda.local.array(D, value_type)
        me, head = cuda.threadIdx.x, cuda.blockIdx.y
        row = cuda.blockIdx.x * BQ + me
        rows, keys = Q.shape[1], K.shape[1]
        active = row < rows
        delta, lse = zero, zero
        if active:
            lse = LSE[head, row]
            for d in range(D):
                q_row[d] = Q[head, row, d]
                do_row[d] = dO[head, row, d]
                delta += do_row[d] * O[head, row, d]  # D_i = dO_i . O_i
                dq[d] = zero
            Dvec[head, row] = delta
        visited = -(-keys // BK)
        if causal:
            visited = min(visited, (min(cuda.blockIdx.x * BQ + BQ, rows) - 1) // BK + 1)
        for tile in range(visited):
            k0 = tile * BK
            copy_tile(k_tile, K, head, k0, 0, me, BQ, zero)
            copy_tile(v_tile, V, head, k0, 0, me, BQ, zero)
            cuda.syncthreads()
            if active:
                for j in range(BK):
                    key = k0 + j
                    if key < keys and (not causal or key <= row):
                        p = math.exp(scale * dot(q_row, k_tile, j) - lse)  # recomputed
                        ds = p * (dot(do_row, v_tile, j) - delta)
                        for d in range(D):
                            dq[d] += scale * ds * k_tile[j, d]
            cuda.syncthreads()
        if active:
            for d in range(D):
                dQ[head, row, d] = dq[d]

    kernel = cuda.jit(flash_attention_dq)
    kernel.shared_bytes = 2 * BK * D * np.dtype(dtype).itemsize
    return kernel


@functools.lru_cache(maxsize=None)
def dkdv_kernel(head_dim: int, block_q: int, block_k: int, causal: bool,
                dtype: np.dtype = np.dtype(np.float32)):
    D, BQ, BK = head_dim, block_q, block_k
    value_type, zero = from_dtype(np.dtype(dtype)), np.dtype(dtype).type(0)

    def flash_attention_dkdv(Q, K, V, LSE, dO, Dvec, dK, dV, scale):
        q_tile = cuda.shared.array((BQ, D), value_type)
        do_tile = cuda.shared.array((BQ, D), value_type)
        lse_tile = cuda.shared.array(BQ, value_type)
        delta_tile = cuda.shared.array(BQ, value_type)
        k_row = cuda.local.array(D, value_type)
        v_row = cuda.local.array(D, value_type)
        dk = cuda.local.array(D, value_type)
        dv = cuda.local.array(D, value_type)
        me, head = cuda.threadIdx.x, cuda.blockIdx.y
        k0 = cuda.blockIdx.x * BK
        key = k0 + me
        rows, keys = Q.shape[1], K.shape[1]
        active = key < keys
        for d in range(D):
            k_row[d] = K[head, key, d] if active else zero
            v_row[d] = V[head, key, d] if active else zero
            dk[d] = zero
            dv[d] = zero
        first = k0 // BQ if causal else 0  # query tiles wholly above the block's keys: skipped
        for tile in range(first, -(-rows // BQ)):
            q0 = tile * BQ
            copy_tile(q_tile, Q, head, q0, 0, me, BK, zero)
            copy_tile(do_tile, dO, head, q0, 0, me, BK, zero)
            for i in range(me, BQ, BK):
                lse_tile[i] = LSE[head, q0 + i] if q0 + i < rows else zero
                delta_tile[i] = Dvec[head, q0 + i] if q0 + i < rows else zero
            cuda.syncthreads()
            if active:
                for i in range(BQ):
                    query = q0 + i
                    if query < rows and (not causal or key <= query):
                        p = math.exp(scale * dot(k_row, q_tile, i) - lse_tile[i])
                        ds = p * (dot(v_row, do_tile, i) - delta_tile[i])
                        for d in range(D):
                            dv[d] += p * do_tile[i, d]
                            dk[d] += scale * ds * q_tile[i, d]
            cuda.syncthreads()
        if active:
            for d in range(D):
                dK[head, key, d] = dk[d]
                dV[head, key, d] = dv[d]

    kernel = cuda.jit(flash_attention_dkdv)
    kernel.shared_bytes = (2 * BQ * D + 2 * BQ) * np.dtype(dtype).itemsize
    return kernel


def flash_backward(Q, K, V, O, LSE, dO, dQ, dK, dV, causal: bool = False,
                   scale: float | None = None, block_q: int | None = None,
                   block_k: int | None = None) -> None:
    """Enqueue the two backward kernels: ``dQ``, ``dK``, ``dV`` from the forward's ``O``, ``LSE``."""
    _check_shapes(Q, K, V, O, LSE)
    for name, given, like in (("dO", dO, O), ("dQ", dQ, Q), ("dK", dK, K), ("dV", dV, V)):
        if tuple(given.shape) != tuple(like.shape) or given.dtype != like.dtype:
            raise ValueError(f"{name} must be {like.dtype} of shape {tuple(like.shape)}, got "
                             f"{given.dtype} {tuple(given.shape)}")
    for name, size in (("block_q", block_q), ("block_k", block_k)):
        if size is not None and (not isinstance(size, (int, np.integer)) or size < 1):
            raise ValueError(f"{name} must be a positive int, got {size!r}")
    bh, T, D = Q.shape
    S = K.shape[1]
    dtype = np.dtype(Q.dtype)
    # (the tiles a size was not given for: the largest whose shared memory fits)
    keys = int(block_k) if block_k is not None else key_tile(D, dtype)
    dq_rows = int(block_q) if block_q is not None else BLOCK_Q
    dkdv_rows = int(block_q) if block_q is not None else query_tile(D, dtype)
    scale = dtype.type(1.0 / math.sqrt(D) if scale is None else scale)
    delta = new_array((bh, T), dtype).buffer.reshape(bh, T)
    launch(dq_kernel(int(D), dq_rows, keys, bool(causal), dtype), (-(-T // dq_rows), bh),
           dq_rows, Q, K, V, O, LSE, dO, dQ, delta, scale)
    launch(dkdv_kernel(int(D), dkdv_rows, keys, bool(causal), dtype), (-(-S // keys), bh),
           keys, Q, K, V, LSE, dO, delta, dK, dV, scale)

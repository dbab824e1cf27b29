"""Attention the plain way: the whole score matrix, written to global memory and read back.

Three kernels, one idea each, and the ``T x S`` matrices between them live in global
memory -- the traffic the tiled kernel of :mod:`.attention` avoids:

1. :func:`scores_kernel` -- one thread per score: ``S[i, j] = scale * q_i . k_j``
   (``-inf`` above the diagonal when causal, without reading q or k);
2. :func:`softmax_rows_kernel` -- one thread per row: its max, its sum of
   ``exp(s - max)``, then ``P[i, j] = exp(s - max) / sum`` (three passes over the row);
3. :func:`weighted_sum_kernel` -- one thread per output: ``O[i, d] = sum_j P[i, j] V[j, d]``.

Kernel-level API (contiguous float32 device arrays, leading axis batch*heads)::

    naive_forward(Q, K, V, O, causal=False, scale=None) -> (scores, probabilities)
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda, float32

from .launch import launch
from .strided import new_array

_NEG_INF = float32(-np.inf)
_ZERO = float32(0.0)
THREADS = 8  #: threads per block along each axis (small: the simulator runs one OS thread each)


@functools.lru_cache(maxsize=None)
def scores_kernel(causal: bool):
    def attention_scores(Q, K, Sc, scale):
        j, i = cuda.grid(2)
        head = cuda.blockIdx.z
        if i < Sc.shape[1] and j < Sc.shape[2]:
            if causal and j > i:
                Sc[head, i, j] = _NEG_INF  # masked: no need to read q or k
            else:
                s = _ZERO
                for d in range(Q.shape[2]):
                    s += Q[head, i, d] * K[head, j, d]
                Sc[head, i, j] = s * scale

    return cuda.jit(attention_scores)


@cuda.jit
def softmax_rows_kernel(Sc, P):
    i = cuda.grid(1)
    head = cuda.blockIdx.y
    if i < Sc.shape[1]:
        keys = Sc.shape[2]
        top = _NEG_INF
        for j in range(keys):  # pass 1: the max, so that exp never overflows
            top = max(top, Sc[head, i, j])
        total = _ZERO
        for j in range(keys):  # pass 2: the sum
            total += math.exp(Sc[head, i, j] - top)
        for j in range(keys):  # pass 3: the probabilities, written back to global memory
            P[head, i, j] = math.exp(Sc[head, i, j] - top) / total


@cuda.jit
def weighted_sum_kernel(P, V, O):
    d, i = cuda.grid(2)
    head = cuda.blockIdx.z
    if i < O.shape[1] and d < O.shape[2]:
        acc = _ZERO
        for j in range(V.shape[1]):
            acc += P[head, i, j] * V[head, j, d]
        O[head, i, d] = acc


def _blocks(n: int) -> int:
    return -(-n // THREADS)


def naive_launches(Q, K, V, O, Sc, P, causal: bool = False, scale: float | None = None):
    """The three launches as ``(kernel, grid, block, args)``, for running or recording."""
    bh, T, D = Q.shape
    S = K.shape[1]
    scale = np.float32(1.0 / math.sqrt(D) if scale is None else scale)
    return [(scores_kernel(bool(causal)), (_blocks(S), _blocks(T), bh), (THREADS, THREADS),
             (Q, K, Sc, scale)),
            (softmax_rows_kernel, (_blocks(T), bh), THREADS, (Sc, P)),
            (weighted_sum_kernel, (_blocks(D), _blocks(T), bh), (THREADS, THREADS), (P, V, O))]


def naive_forward(Q, K, V, O, causal: bool = False, scale: float | None = None):
    """Enqueue the three kernels; returns the score and probability matrices they wrote."""
    bh, T, _ = Q.shape
    S = K.shape[1]
    Sc = new_array((bh, T, S), np.float32).buffer.reshape(bh, T, S)
    P = new_array((bh, T, S), np.float32).buffer.reshape(bh, T, S)
    for kernel, grid, block, args in naive_launches(Q, K, V, O, Sc, P, causal, scale):
        launch(kernel, grid, block, *args)
    return Sc, P

"""Attention without the T x S matrix: a tiled, FlashAttention-style kernel.

``O = softmax(Q K^T * scale) V`` row by row (numpy spec: :func:`naive_attention`).
The plain way writes the whole score matrix ``Q K^T`` (``T x S`` numbers per head)
to global memory, reads it back for the softmax, writes the probabilities, and reads
them again to multiply by ``V``. For long sequences that matrix is the biggest thing
in memory and the traffic to it dominates the time.

The tiled kernel never stores it. **One block per query tile** (``BLOCK_Q`` query
rows of one batch-and-head) and one thread per query row. The block walks the keys
in tiles of ``BLOCK_K``: together the threads copy a tile of K and a tile of V into
shared memory, wait at a barrier, and each thread scores its row against the tile's
keys. Then comes the **online softmax** (Milakov & Gimelshein 2018; Dao et al. 2022):
each row keeps a running max ``m``, a running sum ``l`` of ``exp(score - m)``, and an
accumulator ``acc`` of ``exp(score - m) * v``. When a tile brings a larger score, the
old sum and accumulator were computed against a smaller max, so both are multiplied
by ``exp(m_old - m_new)`` before the new tile's terms are added. After the last tile
``O = acc / l`` -- exactly the softmax-weighted sum, with only ``BLOCK_K`` scores per
thread alive at any time.

**Causal masking** (``is_causal`` in PyTorch: key ``j`` is allowed for query ``i``
when ``j <= i``, counted from the top left) masks single scores with ``-inf``, and
skips key tiles that lie wholly to the right of the block's last row: their loads,
barriers and arithmetic are never done.

The per-tile update is the device function :func:`online_softmax_update`, and an engine
part, ``cuda.online_softmax``: ``tg.exercises.plug("cuda.online_softmax", yours)`` makes
every later launch (``tg.kernels.flash_attention`` too) run your update instead.

Kernel-level API (contiguous float32 or float64 device arrays ``(batch*heads, rows, head_dim)``)::

    flash_forward(Q, K, V, O, LSE, causal=False, scale=None, block_q=BLOCK_Q,
                  block_k=None, update=None)   # None: key_tile(head_dim, dtype); the part's
    flash_forward_launch(...) -> (kernel, grid, block, args)   # the same, not launched
    simulated_forward(q, k, v, causal, block_q, block_k, update) -> (O, LSE)  # numpy, simulator
    flash_attention_kernel(head_dim, block_q, block_k, causal, update, record, dtype) -> kernel
    key_tile(head_dim, dtype) -> int   # BLOCK_K, or fewer keys where two tiles overflow 48 KiB
    naive_attention(q, k, v, causal=False, scale=None) -> numpy   # the spec

Tensor-level (differentiable, :mod:`.attention_autograd`):
``tg.kernels.flash_attention(q, k, v, causal=False, scale=None)`` on ``cuda`` tensors
shaped ``(..., T, head_dim)``.

The backward pass (:mod:`.attention_backward`) recomputes the probabilities tile by tile
from the stored ``LSE`` (``m + log l``, which this kernel writes too) instead of keeping
them. Real FlashAttention differs in what a teaching kernel leaves out: a warp (not one
thread) shares each row, and the products ``Q K^T`` and ``P V`` run on tensor cores.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np
from numba import cuda, float32, from_dtype

from .. import _cuda_setup
from ..autograd import parts as registry
from .launch import device_limits, launch
from .matmul import copy_tile

_SIM = _cuda_setup.is_simulated()
#: Query rows per block (one thread each) and keys per shared-memory tile.
BLOCK_Q = 8 if _SIM else 64
BLOCK_K = 8 if _SIM else 32
#: The largest head dimension the kernel is built for (its local arrays have this size).
MAX_HEAD_DIM = 128


def fitting_tile(preferred: int, bytes_per_row: int) -> int:
    """``preferred`` rows of shared tiles, halved until ``bytes_per_row`` for each fits the
    device's static shared memory per block (48 KiB)."""
    limit, tile = device_limits().max_shared_bytes_per_block, preferred
    while tile > 1 and tile * bytes_per_row > limit:
        tile //= 2
    return tile


def key_tile(head_dim: int, dtype: Any = np.float32) -> int:
    """Keys per shared tile of the forward (and of the backward's dQ kernel) when none is
    given: ``BLOCK_K``, or fewer where a tile of K and one of V would not fit. On a GPU
    that is 32 keys, except 16 for float64 with a head dimension over 96 (two 32 x 128
    float64 tiles are 64 KiB)."""
    return fitting_tile(BLOCK_K, 2 * int(head_dim) * np.dtype(dtype).itemsize)

_NEG_INF = float32(-np.inf)
_ZERO = float32(0.0)


@cuda.jit(device=True)
def online_softmax_update(scores, v_tile, m, l, acc):
    """Fold one tile of scores into a row's running softmax; returns the new ``(m, l)``.

    ``scores[j]`` is this row's score against key ``j`` of the tile (``-inf`` where the
    key is masked or past the end), ``v_tile[j, :]`` that key's value, ``m`` and ``l``
    the running max and sum so far (``-inf`` and 0 before the first tile), ``acc`` the
    running sum of ``exp(score - m) * v``, updated in place.
    """
    tile_max = m
    for j in range(len(scores)):
        tile_max = max(tile_max, scores[j])
    rescale = math.exp(m - tile_max)  # the old terms were taken against a smaller max
    l = l * rescale
    for d in range(len(acc)):
        acc[d] = acc[d] * rescale
    for j in range(len(scores)):
        p = math.exp(scores[j] - tile_max)
        l += p
        for d in range(len(acc)):
            acc[d] += p * v_tile[j, d]
    return tile_max, l


@cuda.jit(device=True)
def score_tile(scores, q_row, k_tile, k0, row, keys, causal):
    """This row's scores against the tile's keys; ``-inf`` past the end or above the diagonal."""
    for j in range(scores.shape[0]):
        key = k0 + j
        if key < keys and (not causal or key <= row):
            s = _ZERO
            for d in range(q_row.shape[0]):
                s += q_row[d] * k_tile[j, d]
            scores[j] = s
        else:
            scores[j] = _NEG_INF


def tiles_visited(rows: int, keys: int, block_q: int, block_k: int, causal: bool, q_block: int) -> int:
    """How many key tiles query block ``q_block`` loads (causal: none wholly above its last row)."""
    tiles = -(-keys // block_k)
    if causal:
        last_row = min((q_block + 1) * block_q, rows) - 1
        tiles = min(tiles, last_row // block_k + 1)
    return tiles


@functools.lru_cache(maxsize=None)
def flash_attention_kernel(head_dim: int, block_q: int = BLOCK_Q, block_k: int = BLOCK_K,
                           causal: bool = False, update: Callable = online_softmax_update,
                           record: bool = False, dtype: np.dtype = np.dtype(np.float32)):
    """The forward kernel for one head dimension, tile shape, mask and update rule.

    Launch it on a grid of ``(ceil(T / block_q), batch*heads)`` blocks of ``block_q``
    threads. With ``record=True`` the thread of row ``trace_row`` of head ``trace_head``
    writes, after every key tile it visits, its state into the trace arrays (see
    :func:`teachgrad.kernels.attention_record.record_online_softmax`).
    """
    D, BQ, BK = head_dim, block_q, block_k
    value_type = from_dtype(np.dtype(dtype))
    zero, neg_inf = np.dtype(dtype).type(0), np.dtype(dtype).type(-np.inf)

    def flash_attention_forward(Q, K, V, O, LSE, scale, trace_head, trace_row,
                                trace_state, trace_scores, trace_out):
        k_tile = cuda.shared.array((BK, D), value_type)
        v_tile = cuda.shared.array((BK, D), value_type)
        q_row = cuda.local.array(D, value_type)
        acc = cuda.local.array(D, value_type)
        scores = cuda.local.array(BK, value_type)
        me, head = cuda.threadIdx.x, cuda.blockIdx.y
        row = cuda.blockIdx.x * BQ + me
        rows, keys = Q.shape[1], K.shape[1]
        active = row < rows  # threads past the last row still help load and reach barriers
        for d in range(D):
            q_row[d] = Q[head, row, d] * scale if active else zero  # the scale, folded into q
            acc[d] = zero
        m, l = neg_inf, zero
        visited = -(-keys // BK)
        if causal:  # key tiles wholly right of the diagonal are skipped, loads and all
            visited = min(visited, (min(cuda.blockIdx.x * BQ + BQ, rows) - 1) // BK + 1)
        for tile in range(visited):
            k0 = tile * BK
            copy_tile(k_tile, K, head, k0, 0, me, BQ, zero)  # zeros past the last key
            copy_tile(v_tile, V, head, k0, 0, me, BQ, zero)
            cuda.syncthreads()  # both tiles complete before anyone scores against them
            if active:
                score_tile(scores, q_row, k_tile, k0, row, keys, causal)
                m_before = m
                m, l = update(scores, v_tile, m, l, acc)
                if record and head == trace_head and row == trace_row:
                    trace_state[tile, 0] = m_before
                    trace_state[tile, 1] = m
                    trace_state[tile, 2] = l
                    trace_state[tile, 3] = math.exp(m_before - m)
                    for j in range(BK):
                        if k0 + j < keys:
                            trace_scores[k0 + j] = scores[j]
                    for d in range(D):
                        trace_out[tile, d] = acc[d] / l
            cuda.syncthreads()  # everyone is done with the tiles before the next load
        if active:
            for d in range(D):
                O[head, row, d] = acc[d] / l
            LSE[head, row] = m + math.log(l)

    kernel = cuda.jit(flash_attention_forward)
    kernel.shared_bytes = 2 * BK * D * np.dtype(dtype).itemsize
    return kernel


# -- launching -----------------------------------------------------------------------------

def _check_shapes(Q: Any, K: Any, V: Any, O: Any, LSE: Any) -> None:
    if any(a.ndim != 3 for a in (Q, K, V, O)) or LSE.ndim != 2:
        raise ValueError("flash_forward takes 3-D (batch*heads, rows, head_dim) arrays Q, K, V, "
                         "O and a 2-D (batch*heads, rows) LSE")
    (bh, T, D), (bk, S, Dk), (bv, Sv, Dv) = Q.shape, K.shape, V.shape
    if (bk, Dk) != (bh, D) or (bv, Sv) != (bh, S) or Dv != D:
        raise ValueError(f"attention shapes do not fit: Q {Q.shape}, K {K.shape}, V {V.shape} "
                         "(K and V need Q's batch*heads and head_dim, and the same number of keys)")
    if tuple(O.shape) != (bh, T, D) or tuple(LSE.shape) != (bh, T):
        raise ValueError(f"outputs of the wrong shape: O {O.shape} (want {(bh, T, D)}), "
                         f"LSE {LSE.shape} (want {(bh, T)})")
    if T < 1 or S < 1 or D < 1:
        raise ValueError(f"attention needs at least one query, one key and one feature: "
                         f"Q {Q.shape}, K {K.shape}")
    if D > MAX_HEAD_DIM:
        raise ValueError(f"head_dim {D} is over the kernel's limit of {MAX_HEAD_DIM}: split the "
                         "model into more heads")
    dtypes = {np.dtype(a.dtype) for a in (Q, K, V, O, LSE)}
    if len(dtypes) > 1 or dtypes - {np.dtype(np.float32), np.dtype(np.float64)}:
        raise TypeError(f"flash attention computes in float32 or float64, all arrays alike: "
                        f"got {', '.join(sorted(map(str, dtypes)))}")


_dummies: dict[tuple, Any] = {}


def _dummy(ndim: int, dtype: np.dtype):
    """A tiny stand-in for a trace array when not recording (never touched)."""
    key = (ndim, np.dtype(dtype).str)
    if key not in _dummies:
        _dummies[key] = cuda.device_array((1,) * ndim, dtype=dtype)
    return _dummies[key]


def flash_forward(Q, K, V, O, LSE, causal: bool = False, scale: float | None = None,
                  block_q: int = BLOCK_Q, block_k: int | None = None,
                  update: Callable | None = None, trace: tuple | None = None) -> None:
    """Enqueue the tiled attention forward: ``O`` and ``LSE = m + log(l)`` per row.

    ``update``: the per-tile device function (default: whatever runs the part
    ``cuda.online_softmax`` now, the engine's own unless one is plugged). ``trace``:
    ``(head, row, state, scores, out)`` to record one row (see :func:`flash_attention_kernel`);
    ``scale`` defaults to ``1 / sqrt(head_dim)``; ``block_k`` to :func:`key_tile`.
    """
    kernel, grid, block, args = flash_forward_launch(Q, K, V, O, LSE, causal, scale, block_q,
                                                     block_k, update, trace)
    launch(kernel, grid, block, *args)


def flash_forward_launch(Q, K, V, O, LSE, causal: bool = False, scale: float | None = None,
                         block_q: int = BLOCK_Q, block_k: int | None = None,
                         update: Callable | None = None, trace: tuple | None = None) -> tuple:
    """What :func:`flash_forward` launches, checked but not launched:
    ``(kernel, grid, block, args)`` (a checker runs it in the simulator first on a GPU
    machine, where nothing checks bounds)."""
    if update is None:
        update = ONLINE_SOFTMAX.fn or online_softmax_update
    _check_shapes(Q, K, V, O, LSE)
    if block_k is None:
        block_k = key_tile(Q.shape[2], Q.dtype)
    for name, size in (("block_q", block_q), ("block_k", block_k)):
        if not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"{name} must be a positive int, got {size!r}")
    bh, T, D = Q.shape
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    dtype = np.dtype(Q.dtype)
    kernel = flash_attention_kernel(int(D), int(block_q), int(block_k), bool(causal), update,
                                    trace is not None, dtype)
    head, row, *arrays = (trace if trace is not None else
                          (-1, -1, _dummy(2, dtype), _dummy(1, dtype), _dummy(2, dtype)))
    return (kernel, (-(-T // block_q), bh), block_q,
            (Q, K, V, O, LSE, dtype.type(scale), int(head), int(row), *arrays))


def simulated_forward(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False,
                      block_q: int = BLOCK_Q, block_k: int | None = None,
                      update: Callable | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`flash_forward`'s launch run in the simulator on host arrays, on any machine:
    ``(O, LSE)``. On a GPU machine this is how a learner's update is tried before the GPU
    runs it: a GPU checks no bounds, so an update indexing past ``scores``, ``v_tile`` or
    ``acc`` would read and write the block's other memory there, unseen, while the
    simulator raises ``IndexError``."""
    from .race import run_simulated

    q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))
    heads, T, D = q.shape
    O, LSE = np.full((heads, T, D), np.nan, q.dtype), np.full((heads, T), np.nan, q.dtype)
    no_trace = (-1, -1, np.zeros((1, 1), q.dtype), np.zeros(1, q.dtype),
                np.zeros((1, 1), q.dtype))
    kernel, grid, block, args = flash_forward_launch(q, k, v, O, LSE, causal=causal,
                                                     block_q=block_q, block_k=block_k,
                                                     update=update, trace=no_trace)
    run_simulated(kernel, grid, block, *args)
    return O, LSE


def naive_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False,
                    scale: float | None = None) -> np.ndarray:
    """The spec, in numpy (float64 inside): the whole score matrix, softmax, times V."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        T, S = scores.shape[-2:]
        scores = np.where(np.tril(np.ones((T, S), dtype=bool)), scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True) @ v


def _vet_update(update: Callable | None) -> None:
    """Plugging ``cuda.online_softmax`` (``install``: runs before anything changes): the
    update must be a device function; on a GPU machine it is first tried in the simulator,
    in a small causal launch with a ragged last tile."""
    if update is None:  # (unplugging)
        return
    from .launch import is_device_function

    if not is_device_function(update):
        raise TypeError("cuda.online_softmax takes a device function, decorated with "
                        "@cuda.jit(device=True): the attention kernel calls it once per key "
                        f"tile, not a {type(update).__name__}")
    if _SIM:
        return  # (every launch here checks bounds already)
    values = np.linspace(-2.0, 2.0, 3 * 7 * 3, dtype=np.float32).reshape(3, 1, 7, 3)
    try:
        simulated_forward(values[0], values[1], values[2], causal=True, block_q=4, block_k=4,
                          update=update)
    except IndexError as error:
        raise registry.PartError(
            "cuda.online_softmax", f"your cuda.online_softmax ({registry.PLUGGED_WITH}) went "
            f"past the end of an array in a trial launch in the simulator ({error}); a GPU "
            "checks no bounds, so it was not plugged. scores has one entry per key of the "
            "tile, acc one per feature") from None


ONLINE_SOFTMAX = registry.declare(
    "cuda.online_softmax",
    receives="online_softmax_update(scores, v_tile, m, l, acc): a device function "
             "(@cuda.jit(device=True)) called by each query row's thread once per key tile",
    returns="the new (m, l), the running max and sum, with acc (the running sum of "
            "exp(score - m) * v) updated in place",
    engine=online_softmax_update, install=_vet_update)

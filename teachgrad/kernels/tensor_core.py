"""Tensor cores, as an executable model: a warp-wide matrix-multiply-accumulate.

A tensor core does one small matrix operation per clock cycle: ``D = A·B + C`` on
4x4 matrices, ``A`` and ``B`` in half precision (float16), the sum in float32.
Counted as the course notes count it, that is ``(4 + 4 - 1) * 4 * 4`` FLOPs for the
product (each of the 16 outputs: 4 multiplies and 3 adds) plus ``4 * 4`` for ``+ C``:
**128 FLOPs per cycle** (:data:`FLOPS_PER_TENSOR_CORE_STEP`). A V100-class GPU with 72
SMs of 8 tensor cores at 1.77 GHz then peaks at 72 x 8 x 128 x 1.77e9 = 130.5 TFLOP/s
(:func:`tensor_core_peak_tflops`).

Programs never drive one tensor core. In CUDA a **warp** (32 threads) calls
``wmma::load_matrix_sync``, ``wmma::mma_sync`` and ``wmma::store_matrix_sync`` on
*fragments* of 16x16x16, and the hardware splits each ``mma_sync`` into 4x4x4 steps:
``(16/4)**3 = 64`` of them, 64 x 128 = 8192 = 2 * 16**3 FLOPs. This module offers the
same calls as numba.cuda device functions that the 32 threads of a block call together:

* :func:`load_matrix_sync` -- the warp copies an ``F x F`` piece of a float16 matrix
  into a fragment (zeros past the matrix's edge: the padding the notes warn about);
* :func:`mma_sync` -- ``acc = a·b + acc``: lane ``i`` computes outputs ``i, i + 32, ...``
  of the fragment, each a sum of ``F`` float16 x float16 products in float32 (a product
  of two float16s is exact in float32, as in the hardware);
* :func:`store_matrix_sync` -- the warp writes the float32 fragment out;
* :func:`fill_fragment` -- set an accumulator to a value.

:func:`mma_matmul` is the tiled matmul rewritten around them: one warp per ``F x F``
output tile, walking K in steps of ``F``. With ``counts`` it records each ``mma_sync``
the warps made, and :func:`record_tensor_core_matmul` turns that into FLOPs.

**What real hardware does differently.** numba exposes no wmma: nothing here reaches a
tensor core. In the simulator each lane is a Python thread; on a GPU this compiles to
ordinary float32 multiply-adds on the CUDA cores, slower than the tiled kernels of
:mod:`.matmul`. The fragments live in shared memory here, while real fragments are
registers spread over the warp's lanes in a layout CUDA keeps opaque; a real
``mma_sync`` is one warp instruction (a few cycles on the SM's tensor cores), not 32
loops; and the order in which a tensor core adds its float32 partial sums (and how it
rounds them) is the hardware's own, so results may differ from this model's in the
last bits. What the model keeps exact is the arithmetic contract (float16 inputs,
float32 accumulation), the warp-wide calls, and the count of operations.

Kernel-level API (contiguous device arrays: ``A (batch or 1, M, K)`` and ``B (batch or
1, K, N)`` float16, ``C (batch, M, N)`` float32)::

    mma_matmul(A, B, C, fragment=FRAGMENT, counts=None)
    record_tensor_core_matmul(a, b, fragment=FRAGMENT) -> TensorCoreRecord
    tensor_core_matmul(a, b, fragment=FRAGMENT) -> float32 numpy array
    mma_flops(fragment) -> int;  tensor_core_peak_tflops(sms, tensor_cores_per_sm, clock_ghz)
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numba import cuda, float32
from numba.types import float16

from .launch import device_limits
from .matmul import _check, _launch_batched, copy_tile

WARP = 32  #: threads that call the fragment functions together (one block here)
FRAGMENT = 16  #: wmma's m16n16k16
FRAGMENTS = (4, 8, 16)  #: the sizes this model builds: whole 4x4x4 tensor-core steps
#: One tensor-core step, D = A·B + C on 4x4 matrices, counted as the notes count it.
FLOPS_PER_TENSOR_CORE_STEP = (4 + 4 - 1) * 4 * 4 + 4 * 4
#: Zero for every fragment, float16 ones included: a float16 constant in a kernel compiles
#: to IR that NVVM rejects (numba-cuda 0.30), and 0 stored into float16 is exactly 0.
_ZERO32 = np.float32(0)


def mma_flops(fragment: int = FRAGMENT) -> int:
    """FLOPs of one ``mma_sync`` on ``fragment``-sized fragments: its 4x4x4 steps x 128."""
    return tensor_core_steps(fragment) * FLOPS_PER_TENSOR_CORE_STEP


def tensor_core_steps(fragment: int = FRAGMENT) -> int:
    """4x4x4 tensor-core steps (cycles of one tensor core) in one ``mma_sync``."""
    return (fragment // 4) ** 3


def tensor_core_peak_tflops(sms: int = 72, tensor_cores_per_sm: int = 8,
                            clock_ghz: float = 1.77) -> float:
    """Peak TFLOP/s when every tensor core does one 128-FLOP step per cycle."""
    return sms * tensor_cores_per_sm * FLOPS_PER_TENSOR_CORE_STEP * clock_ghz / 1000


# -- the warp-wide calls --------------------------------------------------------------------

@cuda.jit(device=True)
def load_matrix_sync(fragment, source, batch, row0, col0, lane):
    """The warp copies ``source[batch, row0:row0+F, col0:col0+F]`` into ``fragment``."""
    copy_tile(fragment, source, batch, row0, col0, lane, WARP, _ZERO32)
    cuda.syncthreads()  # the whole fragment is in place before any lane uses it


@cuda.jit(device=True)
def fill_fragment(fragment, value, lane):
    """Every element of ``fragment`` becomes ``value`` (lanes share the work)."""
    rows, cols = fragment.shape
    for e in range(lane, rows * cols, WARP):
        fragment[e // cols, e % cols] = value
    cuda.syncthreads()


@cuda.jit(device=True)
def mma_sync(acc, a, b, lane, counts):
    """``acc = a·b + acc``: float16 ``a``, ``b``; float32 ``acc``. ``counts[0]`` (when it
    has room for more than a flag) counts the warp's calls."""
    rows, cols = acc.shape
    inner = a.shape[1]
    for e in range(lane, rows * cols, WARP):  # lane i: outputs i, i + 32, ...
        r, c = e // cols, e % cols
        total = acc[r, c]
        for k in range(inner):
            total += float32(a[r, k]) * float32(b[k, c])  # exact product, float32 sum
        acc[r, c] = total
    if lane == 0 and counts.size > 1:
        cuda.atomic.add(counts, 0, 1)
    cuda.syncthreads()  # acc is complete, and a, b free to be overwritten


@cuda.jit(device=True)
def store_matrix_sync(dest, fragment, batch, row0, col0, lane):
    """The warp writes ``fragment`` to ``dest[batch, row0:, col0:]`` (inside its edges)."""
    rows, cols = fragment.shape
    for e in range(lane, rows * cols, WARP):
        r, c = row0 + e // cols, col0 + e % cols
        if r < dest.shape[1] and c < dest.shape[2]:
            dest[batch, r, c] = fragment[e // cols, e % cols]


# -- the matmul built on them ------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def mma_kernel(fragment: int):
    F = fragment

    def tensor_core_matmul(A, B, C, counts):
        a_frag = cuda.shared.array((F, F), float16)
        b_frag = cuda.shared.array((F, F), float16)
        acc = cuda.shared.array((F, F), float32)
        lane = cuda.threadIdx.x
        row0, col0 = cuda.blockIdx.y * F, cuda.blockIdx.x * F
        batch = cuda.blockIdx.z
        a = batch if A.shape[0] > 1 else 0
        b = batch if B.shape[0] > 1 else 0
        fill_fragment(acc, _ZERO32, lane)
        for k0 in range(0, A.shape[2], F):
            load_matrix_sync(a_frag, A, a, row0, k0, lane)
            load_matrix_sync(b_frag, B, b, k0, col0, lane)
            mma_sync(acc, a_frag, b_frag, lane, counts)
        store_matrix_sync(C, acc, batch, row0, col0, lane)

    kernel = cuda.jit(tensor_core_matmul)
    kernel.shared_bytes = F * F * (2 + 2 + 4)
    return kernel


_no_counts: list = []


def mma_matmul(A, B, C, fragment: int = FRAGMENT, counts=None) -> None:
    """Enqueue ``C = A @ B`` on the model: one warp per ``fragment x fragment`` tile of C.

    ``counts``: an int64 device array of 2 zeros; ``counts[0]`` receives the number of
    ``mma_sync`` calls of the whole launch.
    """
    if fragment not in FRAGMENTS:
        raise ValueError(f"fragment must be one of {FRAGMENTS} (whole 4x4x4 tensor-core "
                         f"steps), got {fragment!r}")
    _check(A, B, C)
    if (np.dtype(A.dtype), np.dtype(B.dtype), np.dtype(C.dtype)) != (np.float16, np.float16, np.float32):
        raise TypeError(f"tensor cores multiply float16 and accumulate in float32: A and B "
                        f"must be float16 and C float32, got {A.dtype}, {B.dtype}, {C.dtype}. "
                        "Fix: round the inputs with .astype(np.float16)")
    if counts is None:
        if not _no_counts:
            _no_counts.append(cuda.device_array(1, dtype=np.int64))
        counts = _no_counts[0]
    if device_limits().warp_size != WARP:
        raise RuntimeError(f"this model assumes warps of {WARP} threads")
    M, N = C.shape[1], C.shape[2]
    grid = (-(-N // fragment), -(-M // fragment))
    _launch_batched(mma_kernel(fragment), grid, WARP, A, B, C, counts)


@dataclass
class TensorCoreRecord:
    """One launch of :func:`mma_matmul`, with its operations counted by the warps.

    ``mma_calls`` were counted in the launch; each is ``tensor_core_steps`` 4x4x4 steps of
    128 FLOPs. ``useful_flops`` is ``2*M*N*K``: the rest is padding at ragged edges.
    """

    M: int
    K: int
    N: int
    batch: int
    fragment: int
    c: np.ndarray
    mma_calls: int
    device: str

    @property
    def tensor_core_steps(self) -> int:
        return self.mma_calls * tensor_core_steps(self.fragment)

    @property
    def flops(self) -> int:
        """FLOPs the tensor cores would do: mma calls x FLOPs per call."""
        return self.mma_calls * mma_flops(self.fragment)

    @property
    def useful_flops(self) -> int:
        return 2 * self.batch * self.M * self.N * self.K

    @property
    def utilisation(self) -> float:
        """Useful FLOPs over FLOPs done: below 1 when sizes are not multiples of the fragment."""
        return self.useful_flops / self.flops if self.flops else 1.0

    def expected_mma_calls(self) -> int:
        """One per fragment of C per step of K: ``ceil(M/F) * ceil(N/F) * ceil(K/F)`` each."""
        F = self.fragment
        return self.batch * (-(-self.M // F)) * (-(-self.N // F)) * (-(-self.K // F))


def _as_batched(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim not in (2, 3) or x.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be a 2-D or 3-D array of numbers, got shape {x.shape} "
                         f"({x.dtype})")
    return (x if x.ndim == 3 else x[None]).astype(np.float16)


def record_tensor_core_matmul(a: np.ndarray, b: np.ndarray,
                              fragment: int = FRAGMENT) -> TensorCoreRecord:
    """``a @ b`` on the model (inputs rounded to float16), with its mma calls counted."""
    from .record import _device_name
    from .transfer import to_device, to_host

    A, B = _as_batched(a, "a"), _as_batched(b, "b")
    if A.shape[2] != B.shape[1] or (A.shape[0] != B.shape[0] and 1 not in (A.shape[0], B.shape[0])):
        raise ValueError(f"matmul shapes do not fit: a {np.shape(a)} @ b {np.shape(b)}")
    batch, M, K, N = max(A.shape[0], B.shape[0]), A.shape[1], A.shape[2], B.shape[2]
    C = cuda.device_array((batch, M, N), dtype=np.float32)
    counts = to_device(np.zeros(2, dtype=np.int64))
    mma_matmul(to_device(A), to_device(B), C, fragment=fragment, counts=counts)
    c = to_host(C)
    if np.ndim(a) == 2 and np.ndim(b) == 2:
        c = c[0]
    return TensorCoreRecord(M, K, N, batch, fragment, c, int(to_host(counts)[0]), _device_name())


def tensor_core_matmul(a: np.ndarray, b: np.ndarray, fragment: int = FRAGMENT) -> np.ndarray:
    """``a @ b`` as tensor cores compute it: float16 inputs, float32 sums (a float32 array)."""
    return record_tensor_core_matmul(a, b, fragment).c

"""The kernels the ``cuda`` device runs, as replaceable parts: your map, reduction and matmul.

Three parts of the engine's registry (:mod:`teachgrad.autograd.parts`) are
kernels. While one is plugged (``tg.exercises.plug("cuda.matmul", make_tiled_matmul)``)
every matching operation on a ``cuda`` tensor launches *your* kernel: a forward,
its backward, an optimizer step, a training loop. The engine chooses each
launch's configuration, as it does for its own kernels:

``cuda.map``: ``make_map(fn) -> kernel(out, x)``
    ``fn`` is a scalar device function (``exp``, ``relu``, ``neg`` ... from
    :mod:`teachgrad.kernels.ops`); the kernel must set ``out[i] = fn(x[i])`` for
    every ``i`` of the 1-D contiguous arrays ``out`` and ``x``. The engine launches
    ``kernel[blocks, threads](out, x)`` with :func:`elementwise.launch_config`
    (``blocks * threads`` is often less than ``n``: use a grid-stride loop).
    Every one-argument operation on ``cuda`` runs on it.
``cuda.reduce``: ``block_sum_rows(x, out)``, a kernel
    ``x`` is ``(rows, n)``, ``out`` is ``(rows, blocks)``; launched as
    ``block_sum_rows[(blocks, rows), REDUCE_THREADS](x, out)`` with
    ``blocks = ceil(n / REDUCE_THREADS)``. Block ``(b, r)`` must write
    ``out[r, b] = x[r, b*T:(b+1)*T].sum()`` (``T = REDUCE_THREADS``). The engine
    launches it again on ``out`` until one column is left. Every ``sum`` on
    ``cuda`` (``mean`` too, and the sums of broadcast gradients) runs on it.
``cuda.matmul``: ``make_tiled_matmul(tile) -> kernel(A, B, C)``
    2-D contiguous ``A (M, K)``, ``B (K, N)``, ``C (M, N)``; launched as
    ``kernel[(ceil(N / tile), ceil(M / tile)), (tile, tile)](A, B, C)`` with
    ``tile = MATMUL_TILE``, once per matrix of a batch. Thread ``(ty, tx)`` of
    block ``(bx, by)`` owns ``C[by*tile + ty, bx*tile + tx]``.

**What the engine checks.** A kernel writes into arrays the engine allocated, so
shape, dtype and device are right by construction; what it writes is not. The
engine fills ``out`` with NaN first (float arrays), runs your kernel, waits for
it, and compares the result with its own kernel's on the same inputs: the first
element that differs (or that nobody wrote) stops the operation with a
:class:`~teachgrad.autograd.parts.PartError` that names the part, your kernel
and the launch. An exception raised inside your kernel (the simulator checks
array bounds) becomes a PartError pointing at your line. That checking costs
a second launch and a copy per operation, so it is paid only while a kernel is
plugged; unplugged, the backend reads one empty dict per operation.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from numba import cuda, float64

from ..autograd import parts as registry
from ..autograd.parts import PartError
from ..backends import cuda_backend
from . import elementwise, matmul as matmul_kernels, ops, reduce as reduce_kernels
from .launch import launch
from .strided import StridedArray, new_array
from .transfer import to_host

#: Threads per block of a plugged ``cuda.reduce`` kernel (a power of two: the tree halves it).
REDUCE_THREADS = 32
#: Tile of a plugged ``cuda.matmul`` kernel: blocks of ``MATMUL_TILE x MATMUL_TILE`` threads.
MATMUL_TILE = matmul_kernels.TILE


# -- the engine's own implementations of the three parts ----------------------------------

def engine_map(fn: Callable):
    """The engine's map as a part: a grid-stride loop over contiguous arrays."""
    def grid_stride_map(out, x):
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            out[i] = fn(x[i])
    return cuda.jit(grid_stride_map)


@cuda.jit
def engine_block_sum(x, out):
    """The engine's reduction as a part: each block sums its REDUCE_THREADS elements as a tree."""
    partial = cuda.shared.array(REDUCE_THREADS, float64)
    t, row = cuda.threadIdx.x, cuda.blockIdx.y
    i = cuda.blockIdx.x * REDUCE_THREADS + t
    partial[t] = x[row, i] if i < x.shape[1] else 0.0
    cuda.syncthreads()
    step = REDUCE_THREADS // 2
    while step > 0:
        if t < step:
            partial[t] += partial[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0 and cuda.blockIdx.x < out.shape[1]:
        out[row, cuda.blockIdx.x] = partial[0]


def engine_matmul(tile: int):
    """The engine's tiled matmul as a part: the 2-D form of :func:`matmul.tiled_kernel`."""
    def tiled_matmul(A, B, C):
        a_tile = cuda.shared.array((tile, tile), float64)
        b_tile = cuda.shared.array((tile, tile), float64)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row, col = cuda.blockIdx.y * tile + ty, cuda.blockIdx.x * tile + tx
        acc = 0.0
        for phase in range((A.shape[1] + tile - 1) // tile):
            k_a, k_b = phase * tile + tx, phase * tile + ty
            a_tile[ty, tx] = A[row, k_a] if row < A.shape[0] and k_a < A.shape[1] else 0.0
            b_tile[ty, tx] = B[k_b, col] if k_b < B.shape[0] and col < B.shape[1] else 0.0
            cuda.syncthreads()
            for k in range(tile):
                acc += a_tile[ty, k] * b_tile[k, tx]
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc
    return cuda.jit(tiled_matmul)


# -- running the learner's kernel ----------------------------------------------------------

def _name(fn: Any) -> str:
    return getattr(getattr(fn, "py_func", fn), "__name__", type(fn).__name__)


def _made(part, factory_arg: Any, cache: dict) -> Any:
    """The kernel the plugged factory makes for ``factory_arg`` (made once, then cached)."""
    if factory_arg not in cache:
        factory = part.fn
        try:
            kernel = factory(factory_arg)
        except NotImplementedError:
            raise  # (the learner edition's stub: "not solved yet", not a mistake)
        except Exception as error:
            raise PartError(part.name, f"in your {part.name} ({registry.PLUGGED_WITH}): "
                            f"{_name(factory)}({_name(factory_arg)}) raised "
                            f"{type(error).__name__}: {error}"
                            f"{registry._where(error, factory)}") from error
        if not hasattr(kernel, "py_func") or not callable(getattr(kernel, "__getitem__", None)):
            raise part.reject(f"{_name(factory)}({_name(factory_arg)}) -> a "
                              f"{type(kernel).__name__}", "a @cuda.jit kernel")
        cache[factory_arg] = kernel
    return cache[factory_arg]


def _launch_learners(part, kernel, grid, block, args, what: str) -> None:
    """Launch the learner's kernel, wait for it, and name the part if it raised."""
    from ..streams import synchronize
    from ..streams.stream import KernelError

    if not hasattr(kernel, "py_func"):
        raise part.reject(f"a {type(kernel).__name__}", "a @cuda.jit kernel")
    part.calls += 1  # launches of the learner's kernel (checkers read it)
    try:
        launch(kernel, grid, block, *args)
        synchronize()
    except (KernelError, IndexError, TypeError, ValueError, ArithmeticError) as error:
        cause = error.__cause__ if isinstance(error, KernelError) and error.__cause__ else error
        raise PartError(part.name, f"in your {part.name} kernel {_name(kernel)} "
                        f"({registry.PLUGGED_WITH}), launched as [{grid}, {block}] on {what}: "
                        f"{type(cause).__name__}: {cause}"
                        f"{registry._where(cause, getattr(kernel, 'py_func', kernel))}") from error


def _compare(part, kernel, got: np.ndarray, expected: np.ndarray, what: str,
             tolerance: np.ndarray | float = 0.0) -> None:
    """Stop at the first element where the learner's kernel and the engine's disagree."""
    close = np.isclose(got, expected, rtol=1e-5 if got.dtype == np.float32 else 1e-10,
                       atol=0.0, equal_nan=True) | (np.abs(got - expected) <= tolerance)
    if close.all():
        return
    at = tuple(int(i) for i in np.argwhere(~close)[0])
    where = at[0] if len(at) == 1 else at
    unwritten = " (never written: it still holds the NaN the engine filled in)" \
        if np.isnan(got[at]) and not np.isnan(expected[at]) else ""
    raise PartError(part.name, f"your {part.name} kernel {_name(kernel)} "
                    f"({registry.PLUGGED_WITH}) wrote {got[at].item()!r} at index {where} of {what}"
                    f"{unwritten}; the engine's own kernel gives {expected[at].item()!r}")


def _nan_filled(shape, dtype):
    out = cuda.device_array(shape, dtype=dtype)
    if np.dtype(dtype).kind == "f":
        elementwise.copy(StridedArray(out.reshape(-1), (out.size,), (1,), 0), math.nan)
    return out


# -- the three seams ---------------------------------------------------------------------

_map_kernels: dict = {}
_matmul_kernels: dict = {}


def run_map(op: str, out: StridedArray, x: StridedArray) -> None:
    """``out = op(x)`` with the plugged ``cuda.map`` kernel, checked against the engine's."""
    part = registry.get("cuda.map")
    n = out.size
    if n == 0:
        return
    kernel = _made(part, ops.UNARY[op], _map_kernels)
    dense = elementwise.contiguous(x)
    source = dense.buffer[dense.offset:dense.offset + n]
    result = _nan_filled((n,), out.dtype)
    grid, block = elementwise.launch_config(n)
    _launch_learners(part, kernel, grid, block, (result, source), f"{op} of {n} elements")
    elementwise.unary(op, out, x)  # the engine's own answer, to check against
    expected = to_host(out.buffer).reshape(-1)[:n]
    _compare(part, kernel, to_host(result), expected, f"{n} elements ({op})")
    out.buffer[:n].copy_to_device(result)  # the learner's values are the ones used


def run_reduce(x) -> Any:
    """Each row of the ``(rows, n)`` device array ``x`` summed by the plugged ``cuda.reduce``."""
    part = registry.get("cuda.reduce")
    kernel = part.fn
    rows, n = x.shape
    expected = to_host(reduce_kernels.reduce_rows("sum", x))
    scale = np.abs(to_host(x)).sum(axis=1) * (1e-5 if x.dtype == np.float32 else 1e-12)
    values = x
    while True:
        blocks = -(-values.shape[1] // REDUCE_THREADS)
        out = _nan_filled((rows, blocks), x.dtype)
        _launch_learners(part, kernel, (blocks, rows), REDUCE_THREADS, (values, out),
                         f"{rows} row(s) of {values.shape[1]}")
        if blocks == 1:
            break
        values = out
    got = out.reshape(rows)
    _compare(part, kernel, to_host(got), expected, f"{rows} row sum(s) of {n} elements",
             tolerance=scale)
    return got


def run_matmul(A, B, C) -> None:
    """``C = A @ B`` for 3-D (batch, rows, cols) device arrays with the plugged ``cuda.matmul``."""
    part = registry.get("cuda.matmul")
    tile = MATMUL_TILE
    kernel = _made(part, tile, _matmul_kernels)
    M, N = C.shape[1], C.shape[2]
    grid, block = (-(-N // tile), -(-M // tile)), (tile, tile)
    got = _nan_filled(C.shape, C.dtype)
    for i in range(C.shape[0]):
        a, b = A[i if A.shape[0] > 1 else 0], B[i if B.shape[0] > 1 else 0]
        _launch_learners(part, kernel, grid, block, (a, b, got[i]),
                         f"A {tuple(a.shape)} @ B {tuple(b.shape)}")
    matmul_kernels.KERNELS[cuda_backend.MATMUL_KERNEL](A, B, C)  # the engine's answer
    expected = to_host(C)
    scale = np.abs(to_host(A)) @ np.abs(to_host(B)) * (1e-5 if C.dtype == np.float32 else 1e-12)
    got, scale = to_host(got), np.broadcast_to(scale, expected.shape)
    if C.shape[0] == 1:  # one product: name C[row, col], not C[0, row, col]
        got, expected, scale = got[0], expected[0], scale[0]
    _compare(part, kernel, got, expected, f"C {tuple(C.shape[1:])}", tolerance=scale)
    C.copy_to_device(got.reshape(C.shape))


# -- declaring the parts -----------------------------------------------------------------

def _installer(key: str, run: Callable, cache: dict | None) -> Callable:
    def install(fn: Callable | None) -> None:
        if cache is not None:
            cache.clear()  # kernels made by the previous factory
        if fn is None:
            cuda_backend.PLUGGED.pop(key, None)
        else:
            cuda_backend.PLUGGED[key] = run
    return install


MAP = registry.declare(
    "cuda.map", receives="make_map(fn): fn a scalar device function",
    returns="a @cuda.jit kernel(out, x) setting out[i] = fn(x[i]) for every i; launched as "
            "kernel[elementwise.launch_config(n)](out, x)",
    engine=engine_map, install=_installer("map", run_map, _map_kernels))
REDUCE = registry.declare(
    "cuda.reduce", receives="a @cuda.jit kernel block_sum_rows(x, out): x (rows, n), "
                            "out (rows, blocks)",
    returns=f"nothing: block (b, r) of block_sum_rows[(blocks, rows), {REDUCE_THREADS}] writes "
            f"out[r, b] = x[r, b*{REDUCE_THREADS}:(b+1)*{REDUCE_THREADS}].sum()",
    engine=engine_block_sum, install=_installer("reduce", run_reduce, None))
MATMUL = registry.declare(
    "cuda.matmul", receives="make_tiled_matmul(tile): the tile size",
    returns="a @cuda.jit kernel(A, B, C) setting C = A @ B (2-D); launched as "
            "kernel[(ceil(N/tile), ceil(M/tile)), (tile, tile)](A, B, C)",
    engine=engine_matmul, install=_installer("matmul", run_matmul, _matmul_kernels))

__all__ = ["MAP", "REDUCE", "MATMUL", "REDUCE_THREADS", "MATMUL_TILE", "engine_map",
           "engine_block_sum", "engine_matmul", "run_map", "run_reduce", "run_matmul"]

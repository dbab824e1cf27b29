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
array bounds) becomes a PartError pointing at your line.

**Past the end of an array.** A real GPU checks no bounds: a thread that writes
past the end of ``out`` overwrites whatever memory follows it, and the values the
engine compares can still be right. So every array your kernel receives is a view
into a larger buffer, with a margin after each axis as wide as the launch reaches
(the whole grid of threads for ``cuda.map``, a block's worth of columns for
``cuda.reduce``, a tile on each side for ``cuda.matmul``), filled with
:func:`guard_value`. After the launch the engine reads the margins back: a value
changed there stops the operation with a PartError naming the array and the
index. A thread that *reads* past the end of an input reads the guard value
(``-2**127`` for floats), which shows in the result (an output's margin holds
another value, so copying an input's guard across is a change too). In the
simulator the same mistake raises ``IndexError`` first. That checking costs
copies and a second launch per operation, so it is paid only while a kernel is
plugged; unplugged, the backend reads one empty dict per operation.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numba import cuda, float64

from ..autograd import parts as registry
from ..autograd.parts import PartError
from ..backends import cuda_backend
from . import elementwise, matmul as matmul_kernels, ops, reduce as reduce_kernels
from .launch import launch
from .strided import StridedArray, contiguous_strides, wrap
from .transfer import to_device, to_host

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
    guard = (f" ({got[at].item():.3g} is near the guard values, about -2**127, the engine "
             f"puts past the end of every array: a thread read past the end of an input)"
             if np.isfinite(got[at]) and abs(float(got[at])) >= 2.0 ** 120 else "")
    raise PartError(part.name, f"your {part.name} kernel {_name(kernel)} "
                    f"({registry.PLUGGED_WITH}) wrote {got[at].item()!r} at index {where} of {what}"
                    f"{unwritten}; the engine's own kernel gives {expected[at].item()!r}{guard}")


def guard_value(dtype, output: bool = False) -> Any:
    """What the margin around a plugged kernel's arrays holds.

    Inputs: ``-2**127`` for floats (exact in float32 and float64, and far from anything a
    kernel computes), the most negative integer for signed integers, the largest for
    unsigned ones. Outputs (``output=True``) hold another value, ``-1.5 * 2**127`` (the
    integers' next one in), which no one-argument operation makes of an input's guard: a
    thread that reads past the end of ``x`` and writes past the end of ``out`` (``identity``,
    ``neg``) still changes the output's margin. Booleans hold ``True``.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype.type(-1.5 * 2.0 ** 127 if output else -2.0 ** 127)
    if dtype.kind == "i":
        return dtype.type(np.iinfo(dtype).min + (1 if output else 0))
    if dtype.kind == "u":
        return dtype.type(np.iinfo(dtype).max - (1 if output else 0))
    return np.True_


class Guarded:
    """One array a plugged kernel receives, inside a larger device buffer.

    The buffer has ``margin[k]`` more elements after axis ``k``, filled with
    :func:`guard_value` (an input's, with a ``source``; an output's, without);
    ``view`` is the array itself (``buffer[inside]``: its first ``shape`` elements along
    each axis), so the kernel sees the shape it expects. ``source`` (a StridedArray of
    ``shape``) is copied in on the device; without one, a float array starts as NaN, so an
    element nobody wrote is found as well. :meth:`margin_written` finds a write past the end.
    """

    def __init__(self, name: str, shape, margin, dtype, source: StridedArray | None = None):
        shape, margin = tuple(shape), tuple(margin)
        if len(margin) != len(shape) or not all(
                isinstance(n, (int, np.integer)) and n >= 0 for n in shape + margin):
            raise ValueError(f"Guarded({name!r}) needs one margin per axis, sizes and margins "
                             f"ints >= 0: shape {shape}, margin {margin}")
        if source is not None and tuple(source.shape) != shape:
            raise ValueError(f"Guarded({name!r}): the source has shape {tuple(source.shape)}, "
                             f"not {shape}")
        self.name, self.shape, self.dtype = name, tuple(int(s) for s in shape), np.dtype(dtype)
        padded = tuple(s + int(m) for s, m in zip(self.shape, margin))
        self.inside = inside = tuple(slice(0, s) for s in self.shape)
        self.guard = guard_value(dtype, output=source is None)
        start = np.full(padded, self.guard, dtype=dtype)
        if source is None and self.dtype.kind == "f":
            start[inside] = np.nan
        self.buffer = to_device(start)  # (ordered on the stream, before any kernel using it)
        if source is not None:
            elementwise.copy(StridedArray(self.buffer.reshape(self.buffer.size), self.shape,
                                          contiguous_strides(padded), 0), source)
        self.view = self.buffer[inside]

    def margin_written(self, host: np.ndarray) -> tuple[tuple[int, ...], Any] | None:
        """``(index, value)`` of the first margin element that no longer holds the guard
        (``host`` is the whole buffer, read back), or None."""
        outside = np.ones(host.shape, dtype=bool)
        outside[self.inside] = False
        changed = outside & (host != self.guard)  # (a NaN written counts too)
        if not changed.any():
            return None
        at = tuple(int(i) for i in np.argwhere(changed)[0])
        return at, host[at].item()


def _check_margins(part, kernel, arrays, grid, block, what: str) -> list[np.ndarray]:
    """Read every guarded array back; stop at the first write past the end of one.
    Returns the buffers read, in order."""
    read = []
    for array in arrays:
        host = to_host(array.buffer)
        read.append(host)
        written = array.margin_written(host)
        if written is None:
            continue
        at, value = written
        shape = array.shape[0] if len(array.shape) == 1 else array.shape
        index = at[0] if len(at) == 1 else at
        raise PartError(part.name, f"your {part.name} kernel {_name(kernel)} "
                        f"({registry.PLUGGED_WITH}), launched as [{grid}, {block}] on {what}, "
                        f"wrote {value!r} at index {index} of {array.name}, outside its "
                        f"{'elements' if len(array.shape) == 1 else 'shape'} {shape}. A GPU "
                        f"checks no bounds: there this write lands in whatever memory follows "
                        f"the array (here, in a margin the engine leaves to catch it). "
                        f"Compare each index with the array's size before using it")
    return read


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
    grid, block = elementwise.launch_config(n)
    reach = (grid * block,)  # a thread of the launch indexing with its own number stays inside
    source = Guarded("x", (n,), reach, x.dtype,
                     StridedArray(dense.buffer, (n,), (1,), dense.offset))
    result = Guarded("out", (n,), reach, out.dtype)
    what = f"{op} of {n} elements"
    _launch_learners(part, kernel, grid, block, (result.view, source.view), what)
    got = _check_margins(part, kernel, (result, source), grid, block, what)[0][:n]
    elementwise.unary(op, out, x)  # the engine's own answer, to check against
    expected = to_host(out.buffer).reshape(-1)[:n]
    _compare(part, kernel, got, expected, f"{n} elements ({op})")
    out.buffer[:n].copy_to_device(got)  # the learner's values are the ones used


def run_reduce(x) -> Any:
    """Each row of the ``(rows, n)`` device array ``x`` summed by the plugged ``cuda.reduce``."""
    part = registry.get("cuda.reduce")
    kernel = part.fn
    rows, n = x.shape
    expected = to_host(reduce_kernels.reduce_rows("sum", x))
    scale = np.abs(to_host(x)).sum(axis=1) * (1e-5 if x.dtype == np.float32 else 1e-12)
    # each pass reads a block's worth of columns past the last full block at most
    values = Guarded("x", (rows, n), (1, REDUCE_THREADS), x.dtype, wrap(x))
    while True:
        width = values.shape[1]
        blocks = -(-width // REDUCE_THREADS)
        out = Guarded("out", (rows, blocks), (1, blocks * REDUCE_THREADS), x.dtype)
        what = f"{rows} row(s) of {width}"
        _launch_learners(part, kernel, (blocks, rows), REDUCE_THREADS, (values.view, out.view),
                         what)
        read = _check_margins(part, kernel, (out, values), (blocks, rows), REDUCE_THREADS, what)
        if blocks == 1:
            break
        values = out  # (its margin, still the guard, is the next pass's)
    got = np.ascontiguousarray(read[0][:rows, 0])
    _compare(part, kernel, got, expected, f"{rows} row sum(s) of {n} elements",
             tolerance=scale)
    result = cuda.device_array(rows, dtype=x.dtype)
    result.copy_to_device(got)
    return result


def run_matmul(A, B, C) -> None:
    """``C = A @ B`` for 3-D (batch, rows, cols) device arrays with the plugged ``cuda.matmul``."""
    part = registry.get("cuda.matmul")
    tile = MATMUL_TILE
    kernel = _made(part, tile, _matmul_kernels)
    M, N = C.shape[1], C.shape[2]
    grid, block = (-(-N // tile), -(-M // tile)), (tile, tile)
    reach = (0, tile, tile)  # a tile past the last row and column of each matrix
    guarded = (Guarded("C", C.shape, reach, C.dtype),
               Guarded("A", A.shape, reach, A.dtype, wrap(A)),
               Guarded("B", B.shape, reach, B.dtype, wrap(B)))
    c, a_all, b_all = (array.view for array in guarded)
    for i in range(C.shape[0]):
        a, b = a_all[i if A.shape[0] > 1 else 0], b_all[i if B.shape[0] > 1 else 0]
        what = f"A {tuple(a.shape)} @ B {tuple(b.shape)}"
        _launch_learners(part, kernel, grid, block, (a, b, c[i]), what)
    got = np.ascontiguousarray(_check_margins(part, kernel, guarded, grid, block, what)[0]
                               [:, :M, :N])
    matmul_kernels.KERNELS[cuda_backend.MATMUL_KERNEL](A, B, C)  # the engine's answer
    expected = to_host(C)
    scale = np.abs(to_host(A)) @ np.abs(to_host(B)) * (1e-5 if C.dtype == np.float32 else 1e-12)
    learners, scale = got, np.broadcast_to(scale, expected.shape)
    if C.shape[0] == 1:  # one product: name C[row, col], not C[0, row, col]
        got, expected, scale = got[0], expected[0], scale[0]
    _compare(part, kernel, got, expected, f"C {tuple(C.shape[1:])}", tolerance=scale)
    C.copy_to_device(learners)


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

__all__ = ["MAP", "REDUCE", "MATMUL", "REDUCE_THREADS", "MATMUL_TILE", "Guarded", "engine_map",
           "engine_block_sum", "engine_matmul", "guard_value", "run_map", "run_reduce",
           "run_matmul"]

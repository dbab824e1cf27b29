"""What each thread did, recorded from real launches of the real kernels.

The thread-map and tile widgets draw these records; nothing here re-enacts a
kernel. Each function launches the kernel built with ``record=True`` -- the
same source as the fast kernel, plus a few lines that write down who did what
-- checks the result against numpy, and returns plain numpy data.

API::

    record_elementwise(n, blocks, threads_per_block, op="mul") -> LaunchRecord
    record_tiled_matmul(M, K, N, tile=4, out_tile=(0, 0), seed=0) -> TileRecord
    record_matmul_counts(M, K, N, seed=0) -> dict[str, dict[str, int]]
    matmul_read_formulas(M, K, N, tile) -> dict[str, dict[str, int]]
    record_accesses(kernel, grid, block, *args) -> AccessRecord   # any kernel, simulated
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from . import _simulator, elementwise, matmul
from ._simulator import TracedShared, _who
from .strided import new_array
from .transfer import download, to_device, to_host, upload

COUNT_NAMES = ("global_reads", "shared_reads", "shared_writes", "barriers")


@dataclass
class LaunchRecord:
    """Who handled each element of one grid-stride elementwise launch.

    Arrays have one entry per element ``i`` (``0 <= i < n``):

    * ``block[i]``  -- ``blockIdx.x`` of the thread that wrote element i;
    * ``thread[i]`` -- its ``threadIdx.x`` within the block;
    * ``pass_[i]``  -- which trip of the grid-stride loop it was (0 = first);
    * ``global_thread[i]`` -- ``block * threads_per_block + thread``.

    The grid-stride formula predicts ``global_thread == i % total_threads`` and
    ``pass_ == i // total_threads``; :meth:`matches_formula` checks it.
    """

    n: int
    blocks: int
    threads_per_block: int
    op: str
    block: np.ndarray
    thread: np.ndarray
    pass_: np.ndarray
    global_thread: np.ndarray
    device: str

    @property
    def total_threads(self) -> int:
        return self.blocks * self.threads_per_block

    @property
    def passes(self) -> int:
        """Trips of the loop the busiest thread made."""
        return int(self.pass_.max()) + 1 if self.n else 0

    @property
    def elements_per_thread(self) -> np.ndarray:
        """How many elements each of the ``total_threads`` threads handled (0 = idle)."""
        return np.bincount(self.global_thread, minlength=self.total_threads)

    @property
    def idle_threads(self) -> int:
        """Threads that found no element at all (more threads than elements)."""
        return int(np.sum(self.elements_per_thread == 0))

    @property
    def idle_in_last_pass(self) -> int:
        """Threads with nothing to do on the last pass (the ragged end)."""
        return int(np.sum(self.elements_per_thread < self.passes))

    def matches_formula(self) -> bool:
        i = np.arange(self.n)
        return bool(np.array_equal(self.global_thread, i % self.total_threads)
                    and np.array_equal(self.pass_, i // self.total_threads))


def _device_name() -> str:
    from .launch import device_limits

    return device_limits().name


def record_elementwise(n: int, blocks: int, threads_per_block: int, op: str = "mul") -> LaunchRecord:
    """Launch the grid-stride ``op`` kernel on ``n`` elements and record who did each one."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    x = np.arange(n, dtype=np.float32)
    owners = to_device(np.full((n, 3), -1, dtype=np.int32))
    out = new_array((n,), np.float32)
    from .ops import BINARY

    if op in BINARY:
        elementwise.binary(op, out, upload(x), 2.0, config=(blocks, threads_per_block), owners=owners)
    else:
        elementwise.unary(op, out, upload(x), config=(blocks, threads_per_block), owners=owners)
    download(out)  # the kernel ran to the end
    who = to_host(owners)
    if (who < 0).any():
        raise RuntimeError("some elements were not recorded: the launch did not cover them")
    block, thread, pass_ = (who[:, k].astype(np.int64) for k in range(3))
    return LaunchRecord(n, blocks, threads_per_block, op, block, thread, pass_,
                        block * threads_per_block + thread, _device_name())


@dataclass
class TileRecord:
    """The phases of the shared-memory tiled matmul, for one output tile.

    ``C = A @ B`` with ``A (M, K)``, ``B (K, N)``. Blocks of ``tile x tile``
    threads; block ``(bi, bj)`` computes ``C[bi*tile:(bi+1)*tile, bj*tile:(bj+1)*tile]``
    in ``phases = ceil(K / tile)`` phases. In phase ``p`` thread ``(ty, tx)``:

    1. loads ``A[a_loads[p, ty, tx]]`` into ``a_tile[ty, tx]`` and
       ``B[b_loads[p, ty, tx]]`` into ``b_tile[ty, tx]`` (``(-1, -1)``: past
       the edge of A or B, it stores a 0 instead);
    2. waits at barrier 1 (both tiles complete);
    3. multiplies row ``ty`` of ``a_tile`` by column ``tx`` of ``b_tile``;
    4. waits at barrier 2 (everyone done reading before the next phase overwrites).

    ``steps`` lists these in order as ``(phase, kind, text)`` with kind one of
    ``"load"``, ``"barrier"``, ``"multiply"``. ``all_a_loads``/``all_b_loads``
    hold the same for every block, shaped ``(grid_rows, grid_cols, phases, tile, tile, 2)``.

    ``counts`` (tiled kernel) and ``naive_counts`` (one thread per output) were
    counted by the kernels themselves: ``global_reads``, ``shared_reads``,
    ``shared_writes``, ``barriers``, summed over all threads. ``formulas``
    gives the closed forms for comparison.
    """

    M: int
    K: int
    N: int
    tile: int
    out_tile: tuple[int, int]
    grid: tuple[int, int]  # (blocks along rows, blocks along columns)
    phases: int
    a_loads: np.ndarray
    b_loads: np.ndarray
    all_a_loads: np.ndarray
    all_b_loads: np.ndarray
    counts: dict[str, int]
    naive_counts: dict[str, int]
    formulas: dict[str, dict[str, int]]
    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    device: str
    steps: list[tuple[int, str, str]] = field(default_factory=list)

    @property
    def out_rows(self) -> range:
        bi = self.out_tile[0]
        return range(bi * self.tile, min((bi + 1) * self.tile, self.M))

    @property
    def out_cols(self) -> range:
        bj = self.out_tile[1]
        return range(bj * self.tile, min((bj + 1) * self.tile, self.N))


def _tile_steps(phases: int, tile: int) -> list[tuple[int, str, str]]:
    steps = []
    for p in range(phases):
        ks = f"k = {p * tile}..{(p + 1) * tile - 1}"
        steps += [
            (p, "load", f"phase {p}: each thread copies one element of A and one of B ({ks}) "
                        "into shared memory"),
            (p, "barrier", "syncthreads: wait until both tiles are complete"),
            (p, "multiply", f"phase {p}: each thread does {tile} multiply-adds from shared memory"),
            (p, "barrier", "syncthreads: wait until everyone has read the tiles"),
        ]
    return steps


def _counts(kernel_name: str, A: np.ndarray, B: np.ndarray, **options):
    """Run one matmul kernel in recording mode; return (C, counts) measured by the kernel."""
    M, N = A.shape[1], B.shape[2]
    counts = to_device(np.zeros(4, dtype=np.int64))
    C = new_array((1, M, N), A.dtype)
    matmul.KERNELS[kernel_name](to_device(A), to_device(B), C.buffer.reshape(1, M, N),
                                counts=counts, **options)
    return download(C)[0], dict(zip(COUNT_NAMES, map(int, to_host(counts))))


def matmul_read_formulas(M: int, K: int, N: int, tile: int) -> dict[str, dict[str, int]]:
    """Closed forms of the global-memory reads, to set beside the measured counts.

    naive: every output reads a row of A and a column of B: ``2*M*N*K``.
    tiled: each block column re-reads all of A, each block row all of B:
    ``ceil(N/tile)*M*K + ceil(M/tile)*K*N`` -- about ``tile`` times fewer.
    """
    grid_rows, grid_cols = -(-M // tile), -(-N // tile)
    return {
        "naive": {"global_reads": 2 * M * N * K},
        "tiled": {"global_reads": grid_cols * M * K + grid_rows * K * N},
    }


def record_tiled_matmul(M: int, K: int, N: int, tile: int = 4,
                        out_tile: tuple[int, int] = (0, 0), seed: int = 0) -> TileRecord:
    """Launch the tiled matmul (recording) on random ``A (M, K)``, ``B (K, N)``."""
    grid = (-(-M // tile), -(-N // tile))
    if not (0 <= out_tile[0] < grid[0] and 0 <= out_tile[1] < grid[1]):
        raise ValueError(f"out_tile {out_tile} is outside the grid of {grid[0]} x {grid[1]} output tiles")
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, size=(1, M, K)).astype(np.float32)  # small ints: exact sums
    B = rng.integers(-3, 4, size=(1, K, N)).astype(np.float32)
    phases = max(-(-K // tile), 1)
    loads = [to_device(np.full((*grid, phases, tile, tile, 2), -2, dtype=np.int32)) for _ in "ab"]
    result, counts = _counts("tiled", A, B, tile=tile, a_loads=loads[0], b_loads=loads[1])
    if not np.array_equal(result, A[0] @ B[0]):
        raise RuntimeError("the recorded tiled matmul gave a wrong product")
    all_a, all_b = to_host(loads[0]), to_host(loads[1])
    _, naive_counts = _counts("naive", A, B)
    bi, bj = out_tile
    return TileRecord(
        M, K, N, tile, tuple(out_tile), grid, phases,
        a_loads=all_a[bi, bj], b_loads=all_b[bi, bj], all_a_loads=all_a, all_b_loads=all_b,
        counts=counts, naive_counts=naive_counts,
        formulas=matmul_read_formulas(M, K, N, tile), A=A[0], B=B[0], C=result,
        device=_device_name(), steps=_tile_steps(phases, tile),
    )


def record_matmul_counts(M: int, K: int, N: int, seed: int = 0,
                         tile: int = 4, block=(8, 8, 4), per_thread=(2, 2)) -> dict[str, dict[str, int]]:
    """Memory traffic of each matmul kernel, counted by the kernels in recording mode."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((1, M, K)).astype(np.float32)
    B = rng.standard_normal((1, K, N)).astype(np.float32)
    options = {"naive": {}, "tiled": {"tile": tile}, "register": {"block": block, "per_thread": per_thread}}
    result = {}
    for name, opts in options.items():
        C, counts = _counts(name, A, B, **opts)
        np.testing.assert_allclose(C, A[0] @ B[0], rtol=1e-4, atol=1e-4)
        result[name] = counts
    return result


# -- any kernel: who read and wrote which element -------------------------------------------

@dataclass(frozen=True)
class Access:
    """One logged access: ``kind`` is ``"R"`` read, ``"W"`` write, ``"A"`` atomic update."""

    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    epoch: int  # barriers this thread had passed
    array: str  # the kernel's parameter name (global) or variable name (shared)
    index: tuple[int, ...]
    kind: str


@dataclass
class AccessRecord:
    """Every global- and shared-memory access of one simulated launch of any kernel.

    ``arrays`` holds each array argument, by parameter name, as the kernel left
    it; ``shared`` names the shared arrays. Threads are numbered globally as
    ``linear block * threads per block + linear thread`` (x fastest), so for a
    1-D launch thread ``g`` is ``cuda.grid(1) == g``.
    """

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    arrays: dict[str, np.ndarray]
    shared: set[str]
    accesses: list[Access]
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  #: every array, shared too
    barriers: int = 0  #: barriers passed, summed over threads

    @property
    def threads_per_block(self) -> int:
        return int(np.prod(self.block))

    def global_thread(self, access: Access) -> int:
        """The global number of the thread that made ``access``."""
        (bx, by, bz), (tx, ty, tz) = access.block, access.thread
        gx, gy, _ = self.grid
        dx, dy, _ = self.block
        return ((bz * gy + by) * gx + bx) * self.threads_per_block + (tz * dy + ty) * dx + tx

    def of(self, array: str, kinds: str = "RWA") -> list[Access]:
        """The accesses to ``array`` of the given kinds, in the order they ran."""
        return [a for a in self.accesses if a.array == array and a.kind in kinds]

    def counts(self, array: str, kinds: str = "W") -> np.ndarray:
        """How many accesses of ``kinds`` each cell of a global ``array`` received."""
        grid = np.zeros(self.arrays[array].shape, dtype=np.int64)
        for access in self.of(array, kinds):
            grid[access.index] += 1
        return grid

    def owner(self, array: str, kinds: str = "W") -> np.ndarray:
        """Per cell of a global ``array``, the thread that accessed it (-1: none, -2: several)."""
        owners = np.full(self.arrays[array].shape, -1, dtype=np.int64)
        for access in self.of(array, kinds):
            g = self.global_thread(access)
            owners[access.index] = g if owners[access.index] in (-1, g) else -2
        return owners

    def per_thread(self, kinds: str = "RWA", array: str | None = None) -> np.ndarray:
        """How many accesses of ``kinds`` (to ``array``, or to any array) each thread made."""
        total = int(np.prod(self.grid)) * self.threads_per_block
        found = np.zeros(total, dtype=np.int64)
        for access in self.accesses:
            if access.kind in kinds and (array is None or access.array == array):
                found[self.global_thread(access)] += 1
        return found

    def lost_updates(self, array: str) -> list[tuple[int, ...]]:
        """Cells of a global ``array`` that two or more threads wrote without an atomic."""
        writers: dict[tuple, set] = {}
        for access in self.of(array, "W"):
            writers.setdefault(access.index, set()).add(self.global_thread(access))
        return sorted(index for index, who in writers.items() if len(who) > 1)


def _dim3(value) -> tuple[int, int, int]:
    return (tuple(int(v) for v in np.atleast_1d(value)) + (1, 1))[:3]


def record_accesses(kernel, grid, block, *args) -> AccessRecord:
    """Run ``kernel[grid, block](*args)`` once in the simulator, logging every array access.

    ``args`` are numpy arrays (copied: the originals are not changed) and
    scalars. Global arrays are logged under the kernel's parameter names,
    shared arrays under their variable names, with the barriers each thread had
    passed; ``cuda.atomic.add`` is logged as one ``"A"`` access.
    """
    from .launch import check_launch
    from .race import run_simulated

    function = getattr(kernel, "py_func", kernel)
    names = function.__code__.co_varnames[:function.__code__.co_argcount]
    check_launch(kernel, grid, block, ())
    with _simulator.tracing() as log, _atomics_logged(), _shared_shapes() as shapes:
        wrapped = [_TracedGlobal(np.array(a), name, log) if isinstance(a, np.ndarray) else a
                   for name, a in zip(names, args)]
        run_simulated(kernel, grid, block, *wrapped)
    arrays = {w.name: w.array for w in wrapped if isinstance(w, _TracedGlobal)}
    accesses = [Access(*entry[:6]) for entry in log if entry[5] != "B"]
    shared = {a.array for a in accesses} - set(arrays)
    shapes.update({name: a.shape for name, a in arrays.items()})
    return AccessRecord(function.__name__, _dim3(grid), _dim3(block), arrays, shared, accesses,
                        shapes, sum(entry[5] == "B" for entry in log))


@contextmanager
def _shared_shapes():
    """While active, note the shape of every traced shared array the simulator creates."""
    shapes: dict[str, tuple[int, ...]] = {}

    class ShapeNoting(TracedShared):
        def __init__(self, array, name, log) -> None:
            super().__init__(array, name, log)
            shapes[name] = array.shape

    saved = _simulator.TracedShared
    _simulator.TracedShared = ShapeNoting  # what _simulator's shared-array hook instantiates
    try:
        yield shapes
    finally:
        _simulator.TracedShared = saved


class _TracedGlobal(TracedShared):
    """A kernel argument that logs each access (the simulator passes it through as is)."""

    ndim = property(lambda self: self.array.ndim)


def _atomic_add(self, array, index, value):
    """``cuda.atomic.add`` for the simulator, logged as one ``"A"`` access when traced."""
    from numba.cuda.simulator import kernelapi

    with kernelapi.addlock:
        if isinstance(array, TracedShared):
            array.log.append((*_who(), array.name, array._flat(index), "A"))
            array = array.array
        old = array[index]
        array[index] += value
    return old


@contextmanager
def _atomics_logged():
    """While active, an atomic add is logged as one access instead of a read and a write."""
    from numba.cuda.simulator import kernelapi

    saved = kernelapi.FakeCUDAAtomic.add
    kernelapi.FakeCUDAAtomic.add = _atomic_add
    try:
        yield
    finally:
        kernelapi.FakeCUDAAtomic.add = saved

"""Pictures of *your* kernels: the thread map and tile records built from a recorded launch.

:mod:`teachgrad.kernels.record` records teachgrad's own kernels (they carry a few
extra lines that write down who did what). A kernel you wrote has no such lines,
so these functions launch it under :func:`~teachgrad.kernels.record.record_accesses`
(every array access logged by the simulator) and read the same records from the
log: ``ThreadMap(kernel=...)`` and ``TileView(make_matmul=...)`` draw them.

API::

    map_launch_record(kernel, n, blocks, threads_per_block) -> LaunchRecord
    tiled_launch_record(make_matmul, M, K, N, tile=4, out_tile=(0, 0), seed=0) -> TileRecord
"""
from __future__ import annotations

import numpy as np

from .record import (COUNT_NAMES, LaunchRecord, TileRecord, _counts, _device_name, _tile_steps,
                     matmul_read_formulas, record_accesses)


def _name(kernel) -> str:
    return getattr(getattr(kernel, "py_func", kernel), "__name__", "kernel")


def map_launch_record(kernel, n: int, blocks: int, threads_per_block: int) -> LaunchRecord:
    """Launch a map kernel ``kernel(out, x)`` on ``n`` elements; who wrote each ``out[i]``, and
    on which of its own trips (pass) that thread wrote it."""
    record = record_accesses(kernel, blocks, threads_per_block, np.zeros(n),
                             np.arange(n, dtype=np.float64))
    out = next(iter(record.arrays))
    owner = np.full(n, -1, dtype=np.int64)
    pass_ = np.zeros(n, dtype=np.int64)
    trips: dict[int, int] = {}
    for access in record.of(out, "W"):
        g, i = record.global_thread(access), access.index[0]
        if owner[i] != -1:
            raise RuntimeError(f"{_name(kernel)} wrote element {i} twice: no thread map to draw")
        owner[i], pass_[i] = g, trips.get(g, 0)
        trips[g] = pass_[i] + 1
    if (owner < 0).any():
        raise RuntimeError(f"{_name(kernel)} never wrote element {int(np.argmax(owner < 0))}")
    return LaunchRecord(n, blocks, threads_per_block, _name(kernel), owner // threads_per_block,
                        owner % threads_per_block, pass_, owner, _device_name())


def tiled_launch_record(make_matmul, M: int, K: int, N: int, tile: int = 4,
                        out_tile: tuple[int, int] = (0, 0), seed: int = 0) -> TileRecord:
    """Launch ``make_matmul(tile)`` on random small integers; which element of A and B each
    thread read from global memory in each phase (two barriers a phase), and the counts."""
    grid = (-(-M // tile), -(-N // tile))
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, size=(M, K)).astype(np.float64)
    B = rng.integers(-3, 4, size=(K, N)).astype(np.float64)
    record = record_accesses(make_matmul(tile), (grid[1], grid[0]), (tile, tile), A, B,
                             np.zeros((M, N)))
    a_name, b_name, c_name = list(record.arrays)
    C = record.arrays[c_name]
    if not np.array_equal(C, A @ B):
        raise RuntimeError(f"{_name(make_matmul)}({tile}) gave a wrong product: no tiles to draw")
    phases = max(-(-K // tile), 1)
    loads = {name: np.full((*grid, phases, tile, tile, 2), -1, dtype=np.int64)
             for name in (a_name, b_name)}
    for access in record.accesses:
        if access.kind == "R" and access.array in loads:
            (bx, by, _), (tx, ty, _) = access.block, access.thread
            loads[access.array][by, bx, min(access.epoch // 2, phases - 1), ty, tx] = access.index
    shared = [a for a in record.accesses if a.array in record.shared]
    counts = dict(zip(COUNT_NAMES, (
        sum(a.kind == "R" and a.array in loads for a in record.accesses),
        sum(a.kind == "R" for a in shared), sum(a.kind == "W" for a in shared),
        record.barriers)))
    _, naive_counts = _counts("naive", A[None].astype(np.float32), B[None].astype(np.float32))
    bi, bj = out_tile
    all_a, all_b = loads[a_name], loads[b_name]
    return TileRecord(
        M, K, N, tile, tuple(out_tile), grid, phases,
        a_loads=all_a[bi, bj], b_loads=all_b[bi, bj], all_a_loads=all_a, all_b_loads=all_b,
        counts=counts, naive_counts=naive_counts, formulas=matmul_read_formulas(M, K, N, tile),
        A=A, B=B, C=C, device=_device_name(), steps=_tile_steps(phases, tile))

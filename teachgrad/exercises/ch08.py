"""Checkers for chapter 8, *Matrix multiplication on the GPU*.

* Exercise 8.1 asks for a formula, the number of global-memory reads of the
  tiled kernel; the checker compares it with the counts teachgrad's tiled
  kernel records during real launches on ragged sizes.
* Exercise 8.2 asks for the missing piece of a tiled kernel, its load step;
  the checker plugs it into :func:`tiled_matmul_with` and compares the
  product with numpy.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np
from numba import cuda, float64  # module level: the simulator swaps `cuda` in a kernel's globals

from .core import Feedback, Mismatch, Test, check, expect_true, unseen_rng
from .kernel_runs import first_index, is_device_function, is_stub, launch_on_host_arrays

#: (M, K, N, tile): square multiples of the tile, then ragged shapes.
READ_CASES = [(8, 8, 8, 4), (10, 13, 7, 4), (5, 3, 9, 4), (1, 1, 1, 4), (6, 9, 4, 2), (7, 5, 3, 8)]


def recorded_global_reads(M: int, K: int, N: int, tile: int) -> int:
    """Global reads of one real launch of teachgrad's tiled kernel, counted by its threads."""
    from ..kernels.record import record_tiled_matmul

    return record_tiled_matmul(M, K, N, tile=tile).counts["global_reads"]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# -- exercise 8.1: global reads of the tiled kernel ------------------------------------------

def check_tiled_global_reads(tiled_global_reads: Callable) -> Feedback:
    """Exercise 8.1: ``tiled_global_reads(M, K, N, tile)``, checked against recorded launches."""
    def make(M: int, K: int, N: int, tile: int) -> Test:
        def run() -> None:
            got = tiled_global_reads(M, K, N, tile)
            expect_true(got is not None, "your function returned None",
                        hint="did you forget a `return`?")
            expected = recorded_global_reads(M, K, N, tile)
            if isinstance(got, float) and got.is_integer():
                got = int(got)
            if got == expected:
                return
            if got == 2 * M * K * N // tile or got == 2 * M * K * N / tile:
                hint = ("2MNK/tile holds only when every side is a multiple of the tile; at the "
                        "edges threads skip the reads that fall outside A or B")
            elif got == 2 * M * K * N:
                hint = "that is the naive kernel's count: with tiles, each element is read once per tile"
            elif got == M * K * _ceil_div(M, tile) + K * N * _ceil_div(N, tile):
                hint = ("A's elements are re-read once per block *column* (N / tile of them), "
                        "B's once per block *row* (M / tile)")
            else:
                hint = ("count per matrix: every element of A is read once by each block in its "
                        "block row, i.e. ceil(N / tile) times; every element of B ceil(M / tile) times")
            raise Mismatch("wrong number of global reads", expected, got, hint)

        return Test(f"A {M}x{K} @ B {K}x{N}, tile {tile}", run)

    rng = unseen_rng()
    unseen = tuple(int(v) for v in rng.integers(3, 12, size=3)) + (int(rng.choice([2, 4])),)
    return check("8.1", [make(*case) for case in READ_CASES + [unseen]],
                 candidate=tiled_global_reads,
                 solved="your formula matches the reads counted in real launches, ragged sizes too.")


# -- exercise 8.2: the tiled kernel's load step -----------------------------------------------

@functools.lru_cache(maxsize=32)
def tiled_matmul_with(load_phase: Callable, tile: int):
    """The chapter's tiled kernel for 2-D float64 matrices, with its load step left to ``load_phase``.

    ``load_phase(A, B, a_tile, b_tile, row, col, phase)`` must fill this
    thread's slot of both shared tiles for the given phase (zeros past an edge).
    """
    @cuda.jit
    def tiled_matmul(A, B, C):
        a_tile = cuda.shared.array((tile, tile), float64)
        b_tile = cuda.shared.array((tile, tile), float64)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * tile + ty  # the output this thread computes
        col = cuda.blockIdx.x * tile + tx
        acc = 0.0
        for phase in range((A.shape[1] + tile - 1) // tile):
            load_phase(A, B, a_tile, b_tile, row, col, phase)  # 1. copy the tiles in
            cuda.syncthreads()                                 #    ... all of them
            for k in range(tile):                              # 2. multiply from shared memory
                acc += a_tile[ty, k] * b_tile[k, tx]
            cuda.syncthreads()                                 #    before the next overwrite
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc

    return tiled_matmul


LOAD_CASES = [(8, 8, 8, 4), (10, 13, 7, 4), (3, 5, 2, 4), (6, 2, 9, 2)]


def check_load_phase(load_phase: Callable) -> Feedback:
    """Exercise 8.2: the load step of the tiled kernel, ``load_phase(A, B, a_tile, b_tile, row, col, phase)``."""
    def make(M: int, K: int, N: int, tile: int, seed: int | None = None) -> Test:
        seed = M * 100 + K * 10 + N if seed is None else seed

        def run() -> None:
            if is_stub(load_phase):
                raise NotImplementedError
            if not is_device_function(load_phase):
                raise Mismatch("load_phase must be a device function", show_values=False,
                               hint="decorate it with @cuda.jit(device=True): kernels call it, "
                                    "the host never launches it")
            rng = np.random.default_rng(seed)
            A, B = rng.integers(-4, 5, size=(M, K)).astype(np.float64), \
                rng.integers(-4, 5, size=(K, N)).astype(np.float64)
            grid = (_ceil_div(N, tile), _ceil_div(M, tile))
            *_, got = launch_on_host_arrays(tiled_matmul_with(load_phase, tile), grid, (tile, tile),
                                            A, B, np.full((M, N), np.nan))
            expected = A @ B
            if np.array_equal(got, expected):
                return
            r, c = first_index(got != expected)
            hint = ("thread (ty, tx) copies A[row, phase*tile + tx] into a_tile[ty, tx] and "
                    "B[phase*tile + ty, col] into b_tile[ty, tx]")
            if K % tile:
                hint += "; slots past the edge of A or B must be set to 0, not left as they were"
            raise Mismatch(f"wrong value at C[{r}, {c}]", expected[r, c], got[r, c], hint)

        ragged = " (ragged: not multiples of the tile)" if (M % tile or K % tile or N % tile) else ""
        return Test(f"A {M}x{K} @ B {K}x{N}, tile {tile}{ragged}", run,
                    hint="check the guards: read A[row, k] only when row < A.shape[0] and "
                         "k < A.shape[1] (and likewise for B)")

    rng = unseen_rng()
    unseen = tuple(int(v) for v in rng.integers(2, 11, size=3)) + (int(rng.choice([2, 4])),)
    tests = [make(*case) for case in LOAD_CASES] + [make(*unseen, int(rng.integers(2**31)))]
    return check("8.2", tests, candidate=load_phase,
                 solved="the tiled kernel multiplies correctly with your load step, at ragged "
                        "sizes too.")

"""What the kernel-practice checkers (chapter 8b) share: launch sizes and race-check tests."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..core import Mismatch, Test
from ..kernel_runs import is_stub

THREADS = 32  #: threads per block of the 1-D kernels
BLOCKS = 2  #: blocks of the histogram launch (a grid-stride loop covers the rest)
NBINS = 8  #: bins of the histogram
RADIUS = 2  #: the convolution reads RADIUS neighbours on each side
TILE, BLOCK_ROWS = 32, 4  #: transpose: a 32 x 32 tile per block of 32 x 4 threads


def not_yet(kernel) -> None:
    if is_stub(kernel):
        raise NotImplementedError


def first_problem(kernel, *args, grid=2, block=THREADS) -> str | None:
    from ...kernels.race import race_check

    return race_check(kernel, grid, block, *args).first_problem()


def blamed(kernel, wrong: Mismatch, args: Callable[[], tuple], grid=2,
            block=THREADS) -> Mismatch:
    """``wrong``, pointing at a race or a skipped barrier when the race check finds one."""
    problem = first_problem(kernel, *args(), grid=grid, block=block)
    if problem is not None:
        wrong.hint = (f"the race check found a problem, which explains a wrong answer that "
                      f"comes and goes: {problem}")
    return wrong


def race_test(kernel, args: Callable[[], tuple], hint: str, grid=2, block=THREADS) -> Test:
    def run() -> None:
        not_yet(kernel)
        problem = first_problem(kernel, *args(), grid=grid, block=block)
        if problem is not None:
            raise Mismatch(f"the race check found a problem: {problem}", hint=hint,
                           show_values=False)
    return Test(f"race check: {grid} block(s) of {block} threads", run)


def several_writers(record, array: str) -> str | None:
    """The first cell of global ``array`` that two or more threads wrote, in words, or None.

    Two threads writing one cell with plain writes is a data race on a GPU (which
    write lands is undefined), even when they happen to write the same value; and
    it is work done twice. A right answer writes each output cell from one thread.
    """
    owner = record.owner(array, "W")
    if not (owner == -2).any():
        return None
    cell = tuple(int(i) for i in np.argwhere(owner == -2)[0])
    writers = sorted({record.global_thread(a) for a in record.of(array, "W") if a.index == cell})
    shown = ", ".join(map(str, writers[:4])) + (", ..." if len(writers) > 4 else "")
    return (f"{array}[{', '.join(map(str, cell))}] was written by {len(writers)} threads "
            f"(threads {shown})")


def row_work_test(kernel, args: Callable[[], tuple], read: str, written: str,
                  hint: str) -> Test:
    """How a one-block-per-row kernel spread its work, from a recorded launch.

    Each block reads its row of ``read`` with all its threads (no thread reads much
    more than its strided share), and every cell of ``written`` has one writer.
    """
    def run() -> None:
        from ...kernels.record import record_accesses

        not_yet(kernel)
        arrays = args()
        rows, cols = arrays[0].shape
        record = record_accesses(kernel, rows, THREADS, *arrays)
        share = -(-cols // THREADS)
        columns: dict[int, set] = {}
        for access in record.of(read, "R"):
            columns.setdefault(record.global_thread(access), set()).add(access.index[-1])
        busiest = max(columns, key=lambda g: len(columns[g]), default=0)
        if len(columns.get(busiest, ())) > 2 * share:
            raise Mismatch(
                f"thread {busiest % THREADS} of block {busiest // THREADS} read "
                f"{len(columns[busiest])} of the row's {cols} columns: one thread did the work "
                "of the block", show_values=False,
                hint=f"thread t takes columns t, t + THREADS, ... (about {share} each), then "
                     "the block combines the THREADS partial results")
        problem = several_writers(record, written)
        if problem is not None:
            raise Mismatch(f"{problem}: several threads writing one cell is a race on a GPU",
                           show_values=False, hint=hint)
    shape = args()[0].shape
    return Test(f"who read and wrote what: {read} of shape {shape}, recorded", run)

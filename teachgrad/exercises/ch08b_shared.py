"""What the kernel-practice checkers (chapter 8b) share: launch sizes and race-check tests."""
from __future__ import annotations

from typing import Callable

from .core import Mismatch, Test
from .kernel_runs import is_stub

THREADS = 32  #: threads per block of the 1-D kernels
BLOCKS = 2  #: blocks of the histogram launch (a grid-stride loop covers the rest)
NBINS = 8  #: bins of the histogram
RADIUS = 2  #: the convolution reads RADIUS neighbours on each side
TILE, BLOCK_ROWS = 32, 4  #: transpose: a 32 x 32 tile per block of 32 x 4 threads


def not_yet(kernel) -> None:
    if is_stub(kernel):
        raise NotImplementedError


def first_problem(kernel, *args, grid=2, block=THREADS) -> str | None:
    from ..kernels.race import race_check

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

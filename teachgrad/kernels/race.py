"""Finding a missing ``syncthreads()``: a race checker for shared memory.

Threads of a block run in no fixed order. Between two barriers, if one thread
writes a shared-memory cell and *another* thread reads or writes the same
cell, the result depends on who gets there first: a **data race**. The usual
cause is a missing ``cuda.syncthreads()``. Such a kernel often gives the right
answer anyway, which is what makes the bug hard to find -- so this checker does
not look at answers. It runs the kernel once in numba's CUDA simulator with
every shared-memory access logged as ``(block, thread, epoch, array, index,
read/write)``, where a thread's *epoch* counts the barriers it has passed. Two
accesses in the same block and epoch to the same cell, by different threads,
at least one a write, are a race. The verdict depends only on which cells
each thread touches between barriers, not on the order the threads happened
to run in, so it is the same every time.

Lesson material: :func:`block_sum_kernel` builds a block-wide tree sum with the
barrier inside the tree loop, or without it (``tree_barrier=False``).

API::

    race_check(kernel, grid, block, *args) -> RaceReport
    block_sum_kernel(threads, tree_barrier=True)   # kernel(x (n,), out (blocks,)), float64
"""
from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from numba import cuda, float64

from . import _simulator
from .launch import check_launch, is_device_array
from .transfer import to_host


@functools.lru_cache(maxsize=None)
def block_sum_kernel(threads: int, tree_barrier: bool = True):
    """Each block sums its ``threads`` elements of ``x`` into ``out[blockIdx.x]``.

    numpy spec: ``out = np.add.reduceat(x, range(0, len(x), threads))``.
    With ``tree_barrier=False`` the barrier inside the tree loop is left out:
    thread 0 may read ``partial[2]`` before thread 2 has added into it.
    """

    def block_sum(x, out):
        partial = cuda.shared.array(threads, float64)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * threads + t
        partial[t] = x[i] if i < x.size else 0.0
        cuda.syncthreads()  # every value is in shared memory before the tree starts
        step = threads // 2
        while step > 0:
            if t < step:
                partial[t] += partial[t + step]
            if tree_barrier:
                cuda.syncthreads()  # this level is done before the next one reads it
            step //= 2
        if t == 0:
            out[cuda.blockIdx.x] = partial[0]

    return cuda.jit(block_sum)


@dataclass(frozen=True)
class SharedAccess:
    """One logged access to shared memory."""

    block: tuple[int, int, int]  # blockIdx (x, y, z)
    thread: tuple[int, int, int]  # threadIdx (x, y, z)
    epoch: int  # barriers this thread had passed
    array: str  # the shared array's variable name in the kernel
    index: tuple[int, ...]
    kind: str  # "R" read, "W" write, "B" passed a barrier (array "" and index (); epoch is the new one)


@dataclass(frozen=True)
class Race:
    """Conflicting accesses to one shared cell between the same two barriers."""

    block: tuple[int, int, int]
    array: str
    index: tuple[int, ...]
    epoch: int  # after barrier number ``epoch``, before the next (0: before the first)
    writers: tuple[tuple[int, int, int], ...]  # threads that wrote it
    readers: tuple[tuple[int, int, int], ...]  # other threads that read it

    def describe(self) -> str:
        """One line, e.g. ``block 0: partial[2] after barrier 1, ...: written by thread(s) 2; read by ...``."""
        cell = f"{self.array}[{', '.join(map(str, self.index))}]"
        when = ("before the first barrier" if self.epoch == 0
                else f"after barrier {self.epoch}, before the next")
        who = "written by thread(s) " + _threads(self.writers)
        if self.readers:
            who += "; read by thread(s) " + _threads(self.readers)
        return f"block {_label(self.block)}: {cell} {when}: {who}"


def _label(index: tuple[int, int, int]):
    """``3`` for a 1-D index ``(3, 0, 0)``, else the whole tuple."""
    return index[0] if index[1:] == (0, 0) else index


def _threads(threads) -> str:
    return ", ".join(str(_label(t)) for t in threads)


@dataclass
class RaceReport:
    """The result of :func:`race_check`.

    ``races`` lists every conflicting cell; ``accesses`` is the whole log
    (barriers included, kind ``"B"``), in the order the simulator ran it, for a
    viewer to replay; ``barriers`` is the most barriers any thread passed.
    """

    kernel: str
    grid: tuple[int, ...]
    block: tuple[int, ...]
    races: list[Race]
    accesses: list[SharedAccess]
    barriers: int

    @property
    def ok(self) -> bool:
        return not self.races

    @property
    def offending_indices(self) -> dict[str, list[tuple[int, ...]]]:
        """Per shared array, the cells involved in a race."""
        cells: dict[str, set] = defaultdict(set)
        for race in self.races:
            cells[race.array].add(race.index)
        return {name: sorted(found) for name, found in cells.items()}

    def summary(self) -> str:
        if self.ok:
            return (f"{self.kernel}: no shared-memory races ({len(self.accesses)} accesses, "
                    f"{self.barriers} barrier(s) per thread)")
        lines = [f"{self.kernel}: {len(self.races)} shared-memory race(s) -- a missing "
                 "cuda.syncthreads()?"]
        lines += ["  " + race.describe() for race in self.races[:10]]
        if len(self.races) > 10:
            lines.append(f"  ... and {len(self.races) - 10} more")
        return "\n".join(lines)


def find_races(accesses: list[SharedAccess]) -> list[Race]:
    """Group accesses by (block, array, cell, epoch); flag groups with a write and two threads."""
    groups: dict[tuple, list[SharedAccess]] = defaultdict(list)
    for access in accesses:
        if access.kind == "B":
            continue
        groups[(access.block, access.array, access.index, access.epoch)].append(access)
    races = []
    for (block, array, index, epoch), group in sorted(groups.items()):
        writers = {a.thread for a in group if a.kind == "W"}
        threads = {a.thread for a in group}
        if writers and len(threads) > 1:
            readers = {a.thread for a in group if a.kind == "R"} - writers
            races.append(Race(block, array, index, epoch, tuple(sorted(writers)), tuple(sorted(readers))))
    return races


def _simulated(kernel):
    """The kernel as the simulator runs it (on a GPU machine too)."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    return FakeCUDAKernel(getattr(kernel, "py_func", kernel), device=False)


def race_check(kernel, grid, block, *args) -> RaceReport:
    """Run ``kernel[grid, block](*args)`` once in the simulator, logging shared memory.

    ``args`` may be numpy arrays (the simulator copies results back into them)
    or device arrays. On a real GPU machine only kernels that call no other
    device functions can be checked this way.
    """
    host_args = tuple(to_host(a) if is_device_array(a) else a for a in args)
    check_launch(kernel, grid, block, ())  # limits only: host arrays are fine here
    with _simulator.tracing() as log:
        _simulated(kernel)[grid, block](*host_args)
    for given, used in zip(args, host_args):
        if given is not used:
            given.copy_to_device(used)
    accesses = [SharedAccess(*entry) for entry in log]
    name = getattr(getattr(kernel, "py_func", kernel), "__name__", "kernel")
    return RaceReport(
        kernel=name,
        grid=tuple(np.atleast_1d(grid)), block=tuple(np.atleast_1d(block)),
        races=find_races(accesses), accesses=accesses,
        barriers=max((a.epoch for a in accesses), default=0),
    )


def compile_cases():
    """The lesson kernels, for :mod:`teachgrad.kernels.compile_check`."""
    from numba import types

    for barrier in (True, False):
        yield (f"block_sum tree_barrier={barrier}", block_sum_kernel(256, barrier),
               (types.Array(types.float64, 1, "C"), types.Array(types.float64, 1, "C")))

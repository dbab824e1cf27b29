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

It also checks the barriers themselves. Every thread of a block must reach
every ``cuda.syncthreads()``: a barrier inside a branch that some threads skip
(``if t < step: ... cuda.syncthreads()``) hangs or silently misbehaves on a
GPU, while the simulator lets it through (it releases a barrier once every
*live* thread waits). So the checker notes, per thread, the source line of each
barrier it passes; threads of one block that reach different barriers, or a
different number of them, are reported as a :class:`BarrierMismatch`.

Lesson material: :func:`block_sum_kernel` builds a block-wide tree sum with the
barrier inside the tree loop, or without it (``tree_barrier=False``).

API::

    race_check(kernel, grid, block, *args) -> RaceReport
    block_sum_kernel(threads, tree_barrier=True)   # kernel(x (n,), out (blocks,)), float64
"""
from __future__ import annotations

import functools
import linecache
import sys
import threading
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from numba import cuda, float64

from . import _simulator
from .launch import check_launch, is_device_array, is_device_function
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


def _thread_ranges(threads) -> str:
    """``0-15, 20`` for 1-D thread indices; the tuples otherwise."""
    labels = [_label(t) for t in sorted(threads)]
    if not all(isinstance(x, int) for x in labels):
        return ", ".join(map(str, labels))
    parts, start = [], None
    for x, following in zip(labels, labels[1:] + [None]):
        start = x if start is None else start
        if following != x + 1:
            parts.append(str(start) if start == x else f"{start}-{x}")
            start = None
    return ", ".join(parts)


@dataclass(frozen=True)
class BarrierMismatch:
    """Threads of one block that did not all pass the same barriers.

    ``line`` is the barrier (a line of the kernel, counted from its first line,
    the decorator) that ``reached`` threads passed at this point and ``skipped``
    threads did not; ``most``/``fewest`` give the largest and smallest barrier
    counts as ``(thread, count)``.
    """

    block: tuple[int, int, int]
    line: int
    code: str
    reached: tuple[tuple[int, int, int], ...]
    skipped: tuple[tuple[int, int, int], ...]
    most: tuple[tuple[int, int, int], int]
    fewest: tuple[tuple[int, int, int], int]

    def describe(self) -> str:
        """What went wrong and what to do, in words a learner can act on."""
        (top, high), (low, few) = self.most, self.fewest
        counts = (f"thread {_label(top)} passed {high} barrier(s) but thread {_label(low)} "
                  f"only {few}" if high != few else "the threads passed different barriers")
        return (f"block {_label(self.block)}: not every thread reached the same barriers "
                f"({counts}). The barrier at line {self.line} of the kernel "
                f"(`{self.code}`) was reached by thread(s) {_thread_ranges(self.reached)} but "
                f"skipped by thread(s) {_thread_ranges(self.skipped)}: it sits inside a branch "
                "that some threads do not take. Every thread of a block must reach every "
                "cuda.syncthreads() (on a GPU this hangs or gives wrong answers): move it out "
                "of the `if`, so all threads wait at it")


def find_barrier_mismatches(barriers: dict, block_dim: tuple) -> list[BarrierMismatch]:
    """Compare, block by block, the sequence of barrier lines each thread passed.

    ``barriers`` maps ``(block, thread)`` to the list of lines of the barriers
    that thread passed, in order; threads missing from it passed none.
    """
    dims = (tuple(int(d) for d in np.atleast_1d(block_dim)) + (1, 1))[:3]
    threads = [tuple(int(v) for v in point) for point in np.ndindex(*dims)]
    by_block: dict[tuple, dict] = defaultdict(dict)
    for (block, thread), lines in barriers.items():
        by_block[block][thread] = lines
    found = []
    for block, seen in sorted(by_block.items()):
        sequences = {t: tuple(seen.get(t, ())) for t in threads}
        if len(set(sequences.values())) == 1:
            continue
        depth = 0  # the first barrier where the threads part ways
        while len({s[depth] if depth < len(s) else None for s in sequences.values()}) == 1:
            depth += 1
        at_depth = Counter(s[depth] for s in sequences.values() if depth < len(s))
        line, _ = at_depth.most_common(1)[0]
        reached = tuple(t for t, s in sequences.items() if depth < len(s) and s[depth] == line)
        skipped = tuple(t for t in threads if t not in reached)
        by_count = sorted(sequences, key=lambda t: (-len(sequences[t]), t))
        found.append(BarrierMismatch(
            block, line[0], line[1], reached, skipped,
            (by_count[0], len(sequences[by_count[0]])),
            (by_count[-1], len(sequences[by_count[-1]]))))
    return found


@dataclass
class RaceReport:
    """The result of :func:`race_check`.

    ``races`` lists every conflicting cell; ``accesses`` is the whole log
    (barriers included, kind ``"B"``), in the order the simulator ran it, for a
    viewer to replay; ``barriers`` is the most barriers any thread passed;
    ``barrier_mismatches`` lists blocks whose threads did not all pass the same
    barriers (a barrier inside a branch).
    """

    kernel: str
    grid: tuple[int, ...]
    block: tuple[int, ...]
    races: list[Race]
    accesses: list[SharedAccess]
    barriers: int
    barrier_mismatches: list[BarrierMismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.races and not self.barrier_mismatches

    def first_problem(self) -> str | None:
        """The first problem found, in words (a skipped barrier before a race), or None."""
        if self.barrier_mismatches:
            return self.barrier_mismatches[0].describe()
        return self.races[0].describe() if self.races else None

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
        lines = [f"{self.kernel}: barriers not reached by every thread -- " + m.describe()
                 for m in self.barrier_mismatches[:3]]
        if self.races:
            lines.append(f"{self.kernel}: {len(self.races)} shared-memory race(s) -- a missing "
                         "cuda.syncthreads()?")
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


def run_simulated(kernel, grid, block, *args) -> None:
    """``kernel[grid, block](*args)`` in the simulator, on any machine. On a GPU machine
    the device functions it calls are simulated too, while it runs (see
    :func:`_device_functions_simulated`)."""
    with _device_functions_simulated(getattr(kernel, "py_func", kernel)):
        _simulated(kernel)[grid, block](*args)


def _gpu_device_function(value) -> bool:
    """A device function compiled for a GPU (``@cuda.jit(device=True)`` with numba set up
    for one): the simulator cannot call it, but can run its Python function."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    return (not isinstance(value, FakeCUDAKernel) and hasattr(value, "py_func")
            and is_device_function(value))


@contextmanager
def _device_functions_simulated(function):
    """While active, every device function ``function`` calls, and every one those call,
    is the simulator's version of it: found by name in the function's module, in a module
    it reads an attribute of (``ops.neg``), or in its closure (a factory's ``update``).
    Only on a GPU machine; where numba is the simulator they are simulated already.
    Everything is put back afterwards, so the module's kernels still compile for the GPU.
    """
    import types as python_types

    from numba.cuda.simulator.kernel import FakeCUDAKernel

    from .. import _cuda_setup

    if _cuda_setup.is_simulated():
        yield
        return
    undo: list[tuple] = []
    seen: set[int] = set()

    def swap(set_value, value) -> None:
        undo.append((set_value, value))
        set_value(FakeCUDAKernel(value.py_func, device=True))
        visit(value.py_func)

    def visit(fn) -> None:
        if id(fn) in seen or not hasattr(fn, "__code__"):
            return
        seen.add(id(fn))
        names, namespace = fn.__code__.co_names, fn.__globals__
        for name in names:
            value = namespace.get(name)
            if _gpu_device_function(value):
                swap(functools.partial(namespace.__setitem__, name), value)
            elif isinstance(value, python_types.ModuleType) and value.__name__.startswith(
                    "teachgrad."):
                for attribute in names:
                    inner = getattr(value, attribute, None)
                    if _gpu_device_function(inner):
                        swap(functools.partial(setattr, value, attribute), inner)
        for cell in fn.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # a cell not filled yet
                continue
            if _gpu_device_function(value):
                swap(functools.partial(setattr, cell, "cell_contents"), value)

    visit(function)
    try:
        yield
    finally:
        for set_value, value in reversed(undo):
            set_value(value)


def race_check(kernel, grid, block, *args) -> RaceReport:
    """Run ``kernel[grid, block](*args)`` once in the simulator, logging shared memory.

    ``args`` may be numpy arrays (the simulator copies results back into them)
    or device arrays. On a GPU machine too (the device functions it calls are
    simulated with it).
    """
    host_args = tuple(to_host(a) if is_device_array(a) else a for a in args)
    check_launch(kernel, grid, block, ())  # limits only: host arrays are fine here
    with _simulator.tracing() as log, _barrier_lines() as barriers:
        run_simulated(kernel, grid, block, *host_args)
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
        barrier_mismatches=find_barrier_mismatches(barriers, block),
    )


@contextmanager
def _barrier_lines():
    """While active, note for each simulated thread the kernel line of every barrier it passes."""
    from numba.cuda.simulator import kernelapi

    passed: dict[tuple, list] = defaultdict(list)
    inner = kernelapi.FakeCUDAModule.syncthreads

    def syncthreads(module) -> None:
        frame = sys._getframe(1)  # the kernel (or device function) calling the barrier
        code = frame.f_code
        line = frame.f_lineno - code.co_firstlineno + 1
        text = linecache.getline(code.co_filename, frame.f_lineno).strip() or "cuda.syncthreads()"
        thread = threading.current_thread()
        passed[(tuple(thread.blockIdx), tuple(thread.threadIdx))].append((line, text))
        inner(module)

    kernelapi.FakeCUDAModule.syncthreads = syncthreads
    try:
        yield passed
    finally:
        kernelapi.FakeCUDAModule.syncthreads = inner


def compile_cases():
    """The lesson kernels, for :mod:`teachgrad.kernels.compile_check`."""
    from numba import types

    for barrier in (True, False):
        yield (f"block_sum tree_barrier={barrier}", block_sum_kernel(256, barrier),
               (types.Array(types.float64, 1, "C"), types.Array(types.float64, 1, "C")), 256)

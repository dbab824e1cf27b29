"""How a warp's accesses meet the memory system, read from a recorded launch.

A GPU runs the threads of a block in **warps** of 32 (consecutive thread
numbers, x fastest). When a warp reads or writes global memory, the hardware
combines the 32 addresses into as few 128-byte segments as it can: 32
neighbouring float32s take one segment (a **coalesced** access), 32 floats a
row apart take 32. Shared memory is split into 32 **banks** (4-byte words,
word ``w`` in bank ``w % 32``); two threads of a warp touching different words
of one bank wait for each other (a **bank conflict**).

These functions replay an :class:`~teachgrad.kernels.record.AccessRecord`:
the ``k``-th access of every thread of a warp to one array counts as one warp
instruction (the threads of a warp run the same code in step). The simulator
has no warps or banks; the counts say what a GPU would do with those addresses.

API::

    warp_steps(record, array, kinds="R")                -> list of lists of Access
    segments_per_step(record, array, kinds, itemsize=4) -> list[int]
    bank_conflict_degree(record, array, kinds="R")      -> int  (1: none)
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

WARP = 32
SEGMENT_BYTES = 128
BANKS = 32


def _warp_of(record: Any, thread: tuple[int, int, int]) -> int:
    dx, dy, _ = record.block
    tx, ty, tz = thread
    return (tx + ty * dx + tz * dx * dy) // WARP


def warp_steps(record: Any, array: str, kinds: str = "R") -> list[list[Any]]:
    """Each warp instruction on ``array``: the k-th access of each thread of one warp."""
    per_thread: dict[tuple, dict[tuple, list]] = defaultdict(lambda: defaultdict(list))
    for access in record.of(array, kinds):
        warp = (access.block, _warp_of(record, access.thread))
        per_thread[warp][access.thread].append(access)
    steps = []
    for threads in per_thread.values():
        for k in range(max(len(a) for a in threads.values())):
            steps.append([a[k] for a in threads.values() if len(a) > k])
    return steps


def _flat(record: Any, array: str, index: tuple[int, ...]) -> int:
    return int(np.ravel_multi_index(index, record.shapes[array]))


def segments_per_step(record: Any, array: str, kinds: str = "R", itemsize: int = 4) -> list[int]:
    """How many 128-byte segments each warp instruction on a global ``array`` touches."""
    return [len({_flat(record, array, a.index) * itemsize // SEGMENT_BYTES for a in step})
            for step in warp_steps(record, array, kinds)]


def bank_conflict_degree(record: Any, array: str, kinds: str = "R", itemsize: int = 4) -> int:
    """The worst number of different words one bank must serve in one warp instruction."""
    worst = 1
    words_per_item = max(itemsize // 4, 1)
    for step in warp_steps(record, array, kinds):
        words_in_bank: dict[int, set] = defaultdict(set)
        for access in step:
            word = _flat(record, array, access.index) * words_per_item
            words_in_bank[word % BANKS].add(word)
        worst = max(worst, max(len(w) for w in words_in_bank.values()))
    return worst

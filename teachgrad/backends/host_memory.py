"""Keep freed host memory for reuse, instead of handing it back and faulting it in again.

A training step allocates its activations (megabytes each), frees them all at
the end, and allocates them again in the next step. glibc's ``malloc`` serves
blocks of more than a few hundred KiB with ``mmap`` and returns freed memory to
the operating system once enough of it sits at the top of the heap; the next
step then touches brand-new pages, and each first touch of a 4 KiB page is a
page fault in which the kernel zeroes it. For a small CNN on one core that was
half of the backward's time (``benchmarks/NOTES.md``, "CNN training step").

:func:`keep_freed_memory` raises the two thresholds (``mallopt``): blocks up to
32 MiB come from the heap, and up to 256 MiB of freed heap is kept for the
next allocation. The memory a process holds then stays near its peak instead
of shrinking between steps. It runs when the first cpu backend is made; set
``TEACHGRAD_KEEP_FREED_MEMORY=0`` before that to leave ``malloc`` as it was.
It does nothing outside glibc (macOS, Windows, musl), whose allocators behave
differently.
"""
from __future__ import annotations

import ctypes
import os

#: ``mallopt`` parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: blocks up to this size come from the heap (glibc's largest allowed value on 64-bit)
HEAP_BLOCKS_UP_TO = 32 << 20
#: freed memory at the top of the heap kept for reuse, up to this much
KEEP_UP_TO = 256 << 20

_done = False


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed blocks for reuse (once per process); True if it did."""
    global _done
    if _done:
        return True
    if os.environ.get("TEACHGRAD_KEEP_FREED_MEMORY", "1") == "0":
        return False
    if not _glibc():
        return False
    try:
        libc = ctypes.CDLL(None)
        _done = bool(libc.mallopt(M_MMAP_THRESHOLD, HEAP_BLOCKS_UP_TO)) and bool(
            libc.mallopt(M_TRIM_THRESHOLD, KEEP_UP_TO))
    except (OSError, AttributeError):  # no mallopt in this C library
        return False
    return _done


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (AttributeError, ValueError, OSError):  # not a POSIX system that knows the name
        return False

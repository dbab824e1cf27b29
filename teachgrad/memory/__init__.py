"""``tg.cuda.memory``: how much device memory the ``cuda`` tensors hold, after ``torch.cuda``'s.

Every ``cuda`` tensor's storage comes from one caching allocator per device
(:mod:`teachgrad.kernels.caching_allocator`); these functions read its counters::

    tg.cuda.memory_allocated()        # bytes held by live tensors (rounded to 512-byte blocks)
    tg.cuda.max_memory_allocated()    # the most held at once since the last reset
    tg.cuda.reset_peak_memory_stats()
    tg.cuda.memory_reserved()         # allocated + freed blocks kept for reuse
    tg.cuda.empty_cache()             # give the kept blocks back
    tg.cuda.memory_stats()            # PyTorch's key names: "allocated_bytes.all.current", ...
    print(tg.cuda.memory_summary())

A block is freed when the last tensor (or queued kernel) using it is gone, so call
``tg.cuda.synchronize()`` first for a settled number. What the live bytes *are*
(parameters, activations saved for backward, gradients, optimizer state) is
:func:`teachgrad.memory.timeline.memory_timeline`'s business.
"""
from __future__ import annotations

from .counters import (
    empty_cache, format_bytes, max_memory_allocated, max_memory_reserved, memory_allocated,
    memory_reserved, memory_stats, memory_summary, reset_peak_memory_stats,
)
from .timeline import MemoryTimeline, categorize, memory_timeline

__all__ = ["memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "empty_cache", "memory_summary",
           "memory_timeline", "MemoryTimeline", "categorize", "format_bytes"]

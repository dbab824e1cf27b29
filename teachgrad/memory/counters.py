"""The counters behind ``tg.cuda.memory_allocated()`` and its family (:mod:`teachgrad.memory`)."""
from __future__ import annotations

from .. import cuda_devices
from ..kernels.caching_allocator import (
    CachingAllocator, all_allocators, allocator_for, current_device_index,
)


def allocator_of(device=None) -> CachingAllocator:
    """The allocator of ``device``: None (the current device), an index, "cuda:N" or a Device."""
    if device is None:
        return allocator_for(current_device_index())
    index = device
    if not isinstance(device, int):
        text = str(getattr(device, "type", device))
        given = getattr(device, "index", None)
        if isinstance(device, str):
            text, _, number = device.partition(":")
            given = int(number) if number.isdigit() else None
            if number and given is None:
                raise ValueError(f"bad device {device!r}: write 'cuda', 'cuda:0' or an index")
        if text != "cuda":
            raise ValueError(f"memory counters are kept for cuda devices, not {device!r}")
        index = current_device_index() if given is None else given
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"bad device {device!r}: give a device index (0, 1, ...) or 'cuda:N'")
    if index >= _device_count():
        raise ValueError(f"device {index} does not exist: there are {_device_count()} "
                         "cuda device(s) (tg.cuda.device_count())")
    return allocator_for(index)


def _device_count() -> int:
    """The devices a counter may name: ``tg.cuda.device_count()``."""
    return cuda_devices.device_count()


def memory_stats(device=None) -> dict[str, int]:
    """The allocator's counters under PyTorch's names (``"allocated_bytes.all.peak"``, ...).

    For each of ``allocated_bytes``, ``requested_bytes`` (before rounding),
    ``reserved_bytes``, ``allocation`` (live blocks) and ``segment`` (blocks the
    device gave the allocator): ``.all.current``, ``.all.peak``, ``.all.allocated``
    (the running total) and ``.all.freed``.
    """
    return allocator_of(device).stats()


def memory_allocated(device=None) -> int:
    """Bytes of device memory held by live tensors now (each rounded up to 512 bytes)."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None) -> int:
    """The most bytes held at once since the start or :func:`reset_peak_memory_stats`."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None) -> int:
    """Bytes the allocator holds from the device: allocated plus its cache of free blocks."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None) -> None:
    """Start every peak again from the current value (as ``torch.cuda`` does)."""
    allocator_of(device).reset_peak_stats()


def empty_cache() -> None:
    """Give every cached free block back to the device (live tensors keep theirs)."""
    for allocator in all_allocators():
        allocator.empty_cache()


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A table of the counters, like ``torch.cuda.memory_summary()`` (in fewer rows)."""
    allocator = allocator_of(device)
    stats = allocator.stats()
    rows = [("Allocated memory", "allocated_bytes", True),
            ("Requested memory", "requested_bytes", True),
            ("Reserved memory", "reserved_bytes", True),
            ("Allocations", "allocation", False),
            ("Segments", "segment", False)]
    width = 75
    lines = ["=" * width,
             f" teachgrad CUDA memory summary, device {allocator.device_index}".ljust(width),
             "-" * width,
             f"{'Metric':<22}|{'Cur Usage':>12} |{'Peak Usage':>12} |{'Tot Alloc':>12} |"
             f"{'Tot Freed':>11}",
             "-" * width]
    for label, key, is_bytes in rows:
        shown = [stats[f"{key}.all.{kind}"] for kind in ("current", "peak", "allocated", "freed")]
        text = [format_bytes(v) if is_bytes else str(v) for v in shown]
        lines.append(f"{label:<22}|{text[0]:>12} |{text[1]:>12} |{text[2]:>12} |{text[3]:>11}")
    lines.append("=" * width)
    return "\n".join(lines)


def format_bytes(n: int) -> str:
    """``512 B``, ``4.0 KiB``, ``1.5 MiB``: the units of PyTorch's summary."""
    if abs(n) < 1024:
        return f"{n} B"
    if abs(n) < 1024 ** 2:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024 ** 2:.1f} MiB"


__all__ = ["memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "empty_cache", "memory_summary",
           "format_bytes"]

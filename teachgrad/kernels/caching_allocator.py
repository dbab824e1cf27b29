"""Where every ``cuda`` tensor's device memory comes from: a small caching allocator.

Asking the driver for device memory (``cudaMalloc``) is slow and synchronises the
device, so PyTorch keeps the memory of a dead tensor instead of giving it back, and
hands it to the next tensor that needs a block of that size. Two numbers follow:

* **allocated**: bytes held by live tensors (and kernels' scratch arrays), each
  request rounded up to a multiple of 512 bytes as PyTorch rounds it;
* **reserved**: allocated plus the freed blocks kept in the cache. This is what the
  device sees as used (``nvidia-smi``), and what ``empty_cache()`` brings down.

A block goes back to the cache when the last array that reads it dies: every
array handed out (and every slice or reshape of it) keeps one small owner object
alive, and ``weakref.finalize`` on that owner returns the block. A kernel still
queued on a stream holds its arrays, so a block is never reused under it.

teachgrad keeps one list of free blocks per rounded size and reuses only an exact
fit; PyTorch also splits larger cached blocks and groups them in segments. In
numba's simulator the blocks are host memory posing as device memory; on a real
GPU numba's own allocator is asked each time and only the counting is done here
(nothing is cached, so reserved equals allocated).

Kernel-level API::

    d = allocate((rows, cols), np.float32)   # a numba device array, counted
    allocator_for(0).stats()                 # {"allocated_bytes.all.current": ..., ...}
    allocator_for(0).empty_cache()           # give cached blocks back
    block_of(d)                              # the Block behind a device array (or None)
"""
from __future__ import annotations

import ctypes
import itertools
import math
import threading
import weakref
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import cuda

from .. import _cuda_setup, cuda_devices

#: Every request is rounded up to a multiple of this many bytes (PyTorch's ``kMinBlockSize``).
ROUND_BYTES = 512

_ids = itertools.count()


def rounded_size(nbytes: int) -> int:
    """The bytes a request of ``nbytes`` takes: at least 512, a multiple of 512 (0 stays 0)."""
    if nbytes <= 0:
        return 0
    return -(-nbytes // ROUND_BYTES) * ROUND_BYTES


@dataclass(eq=False)
class Block:
    """One piece of device memory the allocator handed out (or keeps in its cache)."""

    size: int  # rounded bytes
    requested: int  # bytes the array asked for
    memory: object  # the raw storage (a uint8 array), reused while cached
    id: int = 0


def _owner_of(block: Block):
    """A fresh object that exposes ``block``'s bytes; every array cut from it keeps it alive.

    numpy arrays made from it (and their slices and reshapes) hold it at the end of
    their ``.base`` chain, so it dies exactly when the last of them does. (A ctypes
    array: a plain object with the buffer protocol and weak references.)
    """
    owner = (ctypes.c_uint8 * block.size).from_buffer(block.memory)
    owner.block = block
    return owner


class CachingAllocator:
    """Device memory for one device: live blocks, cached free blocks, and counters."""

    def __init__(self, device_index: int = 0) -> None:
        self.device_index = device_index
        self._lock = threading.RLock()  # a finalizer may run inside allocate (garbage collection)
        self._free: dict[int, list[Block]] = {}  # rounded size -> cached blocks
        self._live: dict[int, Block] = {}  # block id -> block
        self.listeners: list[Callable[[str, Block], None]] = []
        # name -> {"current", "peak", "allocated" (running total), "freed"}
        self._counts = {name: dict.fromkeys(_KINDS, 0) for name in _COUNTED}

    # -- handing memory out and taking it back ------------------------------------------
    def allocate(self, shape, dtype):
        """A new device array of ``shape`` and ``dtype`` (uninitialised), counted."""
        dtype = np.dtype(dtype)
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
        requested = math.prod(shape) * dtype.itemsize
        if requested == 0:
            return cuda.device_array(shape, dtype=dtype)  # no memory behind it: nothing to count
        if not _cuda_setup.is_simulated():
            return self._allocate_uncached(shape, dtype, requested)
        with self._lock:
            block = self._take_block(rounded_size(requested), requested)
            owner = _owner_of(block)
            array = np.frombuffer(owner, dtype=np.uint8)[:requested].view(dtype).reshape(shape)
            weakref.finalize(owner, self._release, block)
            self._count_allocation(block)
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return FakeCUDAArray(array)

    def _allocate_uncached(self, shape, dtype, requested: int):
        """On a GPU: numba allocates; the block is counted until the array dies."""
        array = cuda.device_array(shape, dtype=dtype)
        with self._lock:
            block = Block(rounded_size(requested), requested, None, next(_ids))
            self._count_new_segment(block)
            self._count_allocation(block)
        owner = array.gpu_data.owner  # what every slice of the array keeps alive
        _gpu_blocks[id(owner)] = block
        weakref.finalize(owner, self._release_uncached, block, id(owner))
        return array

    def _take_block(self, size: int, requested: int) -> Block:
        """A cached block of exactly ``size`` bytes, or a new one (a new segment)."""
        cached = self._free.get(size)
        if cached:
            block = cached.pop()
            block.requested = requested
            return block
        block = Block(size, requested, np.empty(size, dtype=np.uint8), next(_ids))
        self._count_new_segment(block)
        return block

    def _release(self, block: Block) -> None:
        """The last array reading ``block`` died: keep it in the cache for the next request."""
        with self._lock:
            self._count_free(block)
            self._free.setdefault(block.size, []).append(block)

    def _release_uncached(self, block: Block, owner_id: int) -> None:
        _gpu_blocks.pop(owner_id, None)
        with self._lock:
            self._count_free(block)
            self._count_segment_freed(block)

    def empty_cache(self) -> None:
        """Give every cached (free) block back; live tensors keep theirs."""
        with self._lock:
            for blocks in self._free.values():
                for block in blocks:
                    self._count_segment_freed(block)
            self._free.clear()

    # -- counting ------------------------------------------------------------------------
    def _count_allocation(self, block: Block) -> None:
        self._live[block.id] = block
        self._bump("allocated_bytes", block.size)
        self._bump("requested_bytes", block.requested)
        self._bump("allocation", 1)
        self._tell("alloc", block)

    def _count_free(self, block: Block) -> None:
        self._live.pop(block.id, None)
        self._drop("allocated_bytes", block.size)
        self._drop("requested_bytes", block.requested)
        self._drop("allocation", 1)
        self._tell("free", block)

    def _count_new_segment(self, block: Block) -> None:
        self._bump("reserved_bytes", block.size)
        self._bump("segment", 1)

    def _count_segment_freed(self, block: Block) -> None:
        self._drop("reserved_bytes", block.size)
        self._drop("segment", 1)

    def _bump(self, name: str, amount: int) -> None:
        """``name`` grows by ``amount``: current, peak and the running total."""
        c = self._counts[name]
        c["current"] += amount
        c["allocated"] += amount
        if c["current"] > c["peak"]:
            c["peak"] = c["current"]

    def _drop(self, name: str, amount: int) -> None:
        c = self._counts[name]
        c["current"] -= amount
        c["freed"] += amount

    def _tell(self, event: str, block: Block) -> None:
        for listener in list(self.listeners):
            listener(event, block)

    def stats(self) -> dict[str, int]:
        """The counters, under PyTorch's ``memory_stats()`` names."""
        with self._lock:
            return {f"{name}.all.{kind}": value for name, counts in self._counts.items()
                    for kind, value in counts.items()}

    def reset_peak_stats(self) -> None:
        """Every ``.peak`` starts again from its current value."""
        with self._lock:
            for counts in self._counts.values():
                counts["peak"] = counts["current"]

    def live_blocks(self) -> list[Block]:
        with self._lock:
            return list(self._live.values())

    def cached_bytes(self) -> int:
        with self._lock:
            return sum(b.size for blocks in self._free.values() for b in blocks)


_COUNTED = ("allocated_bytes", "requested_bytes", "reserved_bytes", "allocation", "segment")
_KINDS = ("current", "peak", "allocated", "freed")

_allocators: dict[int, CachingAllocator] = {}
_gpu_blocks: dict[int, Block] = {}  # on a GPU: id of numba's memory owner -> its block
_allocators_lock = threading.Lock()


def allocator_for(device_index: int = 0) -> CachingAllocator:
    """The allocator of device ``device_index`` (made on first use)."""
    allocator = _allocators.get(device_index)
    if allocator is None:
        with _allocators_lock:
            allocator = _allocators.setdefault(device_index, CachingAllocator(device_index))
    return allocator


def all_allocators() -> list[CachingAllocator]:
    """Every device's allocator made so far."""
    return list(_allocators.values())


def current_device_index() -> int:
    """The device new arrays go to: the host thread's current device (an operation on
    ``cuda:1`` tensors makes ``cuda:1`` current while it runs, see ``cuda_devices.using``)."""
    return cuda_devices.current_index()


def allocate(shape, dtype):
    """A counted device array on the current device (what every tensor's storage comes from)."""
    return allocator_for(current_device_index()).allocate(shape, dtype)


def block_of(device_array) -> Block | None:
    """The block a device array (or a slice of one) reads, if this allocator made it."""
    gpu_data = getattr(device_array, "gpu_data", None)
    if gpu_data is not None:  # a real GPU's array: its memory's owner identifies the block
        return _gpu_blocks.get(id(gpu_data.owner))
    array = getattr(device_array, "_ary", None)  # the simulator's array wraps a numpy one
    while array is not None and not hasattr(array, "block"):
        array = getattr(array, "base", None)  # (a numpy view's base, up to the owner)
    return array.block if array is not None else None


__all__ = ["Block", "CachingAllocator", "ROUND_BYTES", "all_allocators", "allocate",
           "allocator_for", "block_of", "current_device_index", "rounded_size"]

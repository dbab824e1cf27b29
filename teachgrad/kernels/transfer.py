"""Copies between host (numpy) memory and device memory, counted.

A GPU computes fast but sits at the end of a slow bus: every copy between the
host and the device costs far more than a kernel that touches the same bytes.
So the ``cuda`` backend keeps data on the device between operations, and every
copy it makes goes through these two functions, which count them.
``teachgrad.cuda.transfer_stats()`` shows the counts; a test checks that a
chain of operations copies nothing until the result is read back.

Kernel-level API::

    d = to_device(np_array)   # host -> device, counted
    a = to_host(device_array) # device -> host, counted
    x = upload(np_array)      # the same, as a StridedArray (what the cuda backend holds)
    a = download(x)           # a StridedArray back to numpy (contiguous first, on the device)
    transfer_stats() -> {"host_to_device": n, "device_to_host": n, "bytes_h2d": b, "bytes_d2h": b}
    reset_transfer_stats()
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from .caching_allocator import allocate

if TYPE_CHECKING:  # pragma: no cover
    from .strided import StridedArray

_lock = threading.Lock()
_stats = {"host_to_device": 0, "device_to_host": 0, "bytes_h2d": 0, "bytes_d2h": 0,
          "device_to_device": 0, "bytes_d2d": 0}


def to_device(a: np.ndarray):
    """Copy a host array to a new device array (one counted host-to-device copy)."""
    from ..streams.stream import enqueue

    a = np.array(a, order="C", copy=True)  # a snapshot: the copy may run after we return
    with _lock:
        _stats["host_to_device"] += 1
        _stats["bytes_h2d"] += a.nbytes
    d = allocate(a.shape, a.dtype)  # counted device memory (caching_allocator)
    # ordered on the current stream, like every kernel launched after it
    enqueue("h2d", f"copy {a.nbytes} bytes to the device",
            lambda handle: d.copy_to_device(a, stream=0 if handle is None else handle))
    return d


def to_host(d) -> np.ndarray:
    """Copy a device array back to a new numpy array (one counted device-to-host copy).

    The host waits here for the device: every kernel queued so far must have run.
    """
    from ..streams.stream import synchronize

    synchronize()
    with _lock:
        _stats["device_to_host"] += 1
        _stats["bytes_d2h"] += int(d.size) * np.dtype(d.dtype).itemsize
    return d.copy_to_host()


def upload(a) -> "StridedArray":
    """A host array as a contiguous :class:`~teachgrad.kernels.strided.StridedArray` on the device."""
    from .strided import StridedArray, contiguous_strides, new_array

    a = np.asarray(a)
    if a.size == 0:
        return new_array(a.shape, a.dtype)
    return StridedArray(to_device(a.reshape(-1)), a.shape, contiguous_strides(a.shape), 0)


def download(x) -> np.ndarray:
    """A :class:`~teachgrad.kernels.strided.StridedArray` back as a numpy array (one copy)."""
    from . import elementwise

    if x.size == 0:
        return np.empty(x.shape, dtype=x.dtype)
    x = elementwise.contiguous(x)  # gather strided elements on the device first
    return to_host(x.buffer[x.offset:x.offset + x.size]).reshape(x.shape)


def copy_to_peer(x: "StridedArray", source: int, target: int) -> "StridedArray":
    """A contiguous copy of ``x`` (on cuda:``source``) on cuda:``target``, counted.

    The copy is enqueued on the target's current stream, after the work queued so
    far on the source's current stream (an event between them), and the source's
    stream waits for the copy in turn, so that a later in-place change of ``x``
    cannot overtake it. The host does not wait: both devices run on. (On a GPU
    this is a peer copy over NVLink/PCIe; here the simulator copies in memory.)
    """
    from ..cuda_devices import using
    from ..streams import Event, current_stream
    from . import elementwise
    from .strided import new_array

    with using(source):
        x = elementwise.contiguous(x)  # (a strided view becomes dense on its own device first)
        source_stream = current_stream()
        ready = Event().record(source_stream)
    nbytes = x.size * np.dtype(x.dtype).itemsize
    with _lock:
        _stats["device_to_device"] += 1
        _stats["bytes_d2d"] += nbytes
    with using(target):
        out = new_array(x.shape, x.dtype)
        target_stream = current_stream()
        target_stream.wait_event(ready)
        if x.size:
            src, dst = x.buffer[x.offset:x.offset + x.size], out.buffer[:x.size]
            target_stream.enqueue(
                "d2d", f"copy {nbytes} bytes cuda:{source} -> cuda:{target}",
                lambda handle: dst.copy_to_device(src, stream=0 if handle is None else handle))
        source_stream.wait_event(Event().record(target_stream))
    return out


def transfer_stats() -> dict[str, int]:
    """How many copies (and bytes) went each way since the last reset."""
    with _lock:
        return dict(_stats)


def reset_transfer_stats() -> None:
    with _lock:
        for key in _stats:
            _stats[key] = 0

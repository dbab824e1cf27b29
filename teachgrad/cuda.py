"""``tg.cuda``: what the ``cuda`` device is, and what it has been doing.

Like ``torch.cuda``::

    tg.cuda.is_available()     # True only with a real GPU (as in PyTorch)
    tg.cuda.is_simulated()     # True when cuda tensors run in the simulator
    tg.cuda.get_device_name()  # "CUDA simulator" or the GPU's name
    tg.cuda.describe()         # one line: which, and why

and, for the lessons on what makes GPU code fast::

    tg.cuda.transfer_stats()   # host<->device copies made so far
    tg.cuda.get_device_limits()  # threads per block, shared memory, warp size, ...
    tg.cuda.set_matmul_kernel("tiled")  # which of the three matmul kernels runs

The choice between GPU and simulator is made when teachgrad is imported (see
``teachgrad._cuda_setup``; override it with ``TEACHGRAD_CUDA=auto|sim|gpu``).
"""
from __future__ import annotations

from . import _cuda_setup, cuda_devices

# numba is imported on first use, so that ``import teachgrad`` stays quick.

__all__ = [
    "is_available", "is_simulated", "get_device_name", "device_count", "synchronize",
    "current_device", "set_device", "device", "set_simulated_device_count",
    "describe", "transfer_stats", "reset_transfer_stats", "get_device_limits",
    "set_matmul_kernel", "get_matmul_kernel",
]


def is_available() -> bool:
    """Whether a real GPU runs ``cuda`` tensors here, as ``torch.cuda.is_available()`` means.

    Without a GPU this is False even though ``device="cuda"`` still works (in
    numba's CUDA simulator, see :func:`is_simulated`): the usual idiom
    ``"cuda" if tg.cuda.is_available() else "cpu"`` must not pick a simulator
    that is thousands of times slower than the CPU.
    """
    if _cuda_setup.SETUP.mode != "gpu":
        return False
    from numba import cuda

    return bool(cuda.is_available())


def is_simulated() -> bool:
    """True when ``cuda`` tensors run in numba's CUDA simulator rather than on a GPU."""
    return _cuda_setup.is_simulated()


def get_device_name(device: int = 0) -> str:
    """``"CUDA simulator"``, or the GPU's name."""
    _cuda_setup.require_cuda()
    return get_device_limits().name


def device_count() -> int:
    """Number of ``cuda`` devices: the GPUs numba sees, or the simulator's configured
    count (``TEACHGRAD_CUDA_DEVICES``, default 2; see :func:`set_simulated_device_count`)."""
    return cuda_devices.device_count()


def set_simulated_device_count(n: int) -> None:
    """How many devices the simulator offers (before the first cuda tensor or stream)."""
    cuda_devices.set_simulated_device_count(n)


def current_device() -> int:
    """The index of the current cuda device (what ``device="cuda"`` means), as in PyTorch."""
    return cuda_devices.current_index()


def set_device(device) -> None:
    """Make ``device`` (an int, ``"cuda:1"`` or a device) the current cuda device."""
    from .streams.stream import device_index

    cuda_devices.set_current(device_index(device))


class device:
    """``with tg.cuda.device(1):`` makes cuda:1 the current device inside the block, and
    restores the previous one after it (also on an error), as ``torch.cuda.device``."""

    def __init__(self, device) -> None:
        from .streams.stream import device_index

        self.index = None if device is None else device_index(device)  # checked now
        self._previous: list[int] = []

    def __enter__(self) -> "device":
        self._previous.append(cuda_devices.current_index())
        if self.index is not None:
            cuda_devices.set_current(self.index)
        return self

    def __exit__(self, *exc) -> None:
        cuda_devices.set_current(self._previous.pop())


def synchronize(device=None) -> None:
    """Wait until every kernel launched so far has finished: on every device, or on
    ``device`` only (an int, ``"cuda:1"`` or a device).

    PyTorch's ``synchronize()`` without an argument waits for the current device;
    teachgrad's waits for all of them, so that a timing ended by it misses no device.
    """
    _cuda_setup.require_cuda()
    from . import streams

    streams.synchronize(device)


def describe() -> str:
    """One line saying where ``cuda`` tensors run and why."""
    return _cuda_setup.describe()


def get_device_limits():
    """The launch limits (a ``DeviceLimits``) teachgrad checks every kernel launch against."""
    from .kernels.launch import device_limits

    return device_limits()


def transfer_stats() -> dict[str, int]:
    """Copies made between host and device so far, each way, and their bytes::

        {"host_to_device": n, "device_to_host": n, "bytes_h2d": b, "bytes_d2h": b}
    """
    from .kernels import transfer

    return transfer.transfer_stats()


def reset_transfer_stats() -> None:
    """Start counting host<->device copies from zero."""
    from .kernels import transfer

    transfer.reset_transfer_stats()


def set_matmul_kernel(name: str) -> None:
    """Choose the matmul kernel of ``cuda`` tensors: ``"naive"``, ``"tiled"`` or ``"register"``."""
    from .backends import cuda_backend
    from .kernels.matmul import KERNELS

    if name not in KERNELS:
        raise ValueError(f"unknown matmul kernel {name!r}: choose one of {', '.join(KERNELS)}")
    cuda_backend.MATMUL_KERNEL = name


def get_matmul_kernel() -> str:
    from .backends import cuda_backend

    return cuda_backend.MATMUL_KERNEL


# Asynchronous dispatch (teachgrad.streams): streams and events after torch.cuda's.
from .streams import (  # noqa: E402
    DeviceFault, Event, KernelError, Stream, current_stream, default_stream, stream,
)
from .streams import recording as record_timeline  # noqa: E402

__all__ += ["Stream", "Event", "KernelError", "DeviceFault", "current_stream", "default_stream",
            "stream", "record_timeline"]

# Device memory (teachgrad.memory): the caching allocator's counters, after torch.cuda's.
from . import memory  # noqa: E402
from .memory import (  # noqa: E402
    empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated, memory_reserved,
    memory_stats, memory_summary, reset_peak_memory_stats,
)

__all__ += ["memory", "memory_allocated", "max_memory_allocated", "memory_reserved",
            "max_memory_reserved", "reset_peak_memory_stats", "memory_stats", "memory_summary",
            "empty_cache"]

# CUDA graphs (teachgrad.streams.graphs): capture a step's launches once, replay them.
from .streams.graphs import (  # noqa: E402
    CUDAGraph, GraphCaptureError, graph, graph_pool_handle, is_current_stream_capturing,
)
from .streams.graphed import make_graphed_callables  # noqa: E402

__all__ += ["CUDAGraph", "GraphCaptureError", "graph", "graph_pool_handle",
            "is_current_stream_capturing", "make_graphed_callables"]

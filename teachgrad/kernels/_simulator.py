"""Hooks into numba's CUDA simulator: thread-safety fixes, and shared-memory tracing.

**One kernel at a time, from any thread.** While a simulated kernel runs, numba
swaps the name ``cuda`` in the kernel's module for a fake module that answers
``cuda.threadIdx``, and swaps it back at the end. With asynchronous dispatch
kernels run on a stream's worker thread while the host thread goes on running
code from the *same* modules (``cuda.jit`` in a kernel factory), which would
then see the fake. So instead ``cuda`` becomes, once, a :class:`ThreadRoutedCuda`
that answers as the fake module inside the kernel's own threads and as the
real ``numba.cuda`` everywhere else; and :data:`DEVICE_LOCK` lets one kernel
run at a time, whichever thread launches it (numba's simulator allows no more).

**Shared arrays.**
The simulator runs each CUDA thread as a Python thread. ``cuda.shared.array``
gives every thread of a block the same numpy array, found by the source line
that asks for it -- but the lookup-or-create is not locked, so two threads
arriving at once can each create their own "shared" array and never see each
other's writes. That shows up as rare wrong answers from correct kernels (more
often the more the threads interleave). The version below does the same
lookup under a lock.

**Tracing.** Inside :func:`tracing`, every shared array a kernel asks for is
wrapped so that each read and write is logged with the thread, its block, and
its *epoch* -- how many ``syncthreads()`` that thread has passed. The race
checker (:mod:`teachgrad.kernels.race`) reads that log.
"""
from __future__ import annotations

import contextlib
import linecache
import sys
import threading

import numpy as np

_lock = threading.Lock()
_patched = False
_numba_swap = None  #: numba's own ``swapped_cuda_module``, kept when it is replaced

#: Held while a simulated kernel runs: the simulated device runs one kernel at a time.
DEVICE_LOCK = threading.RLock()


class ThreadRoutedCuda:
    """``numba.cuda`` for the host, the running kernel's fake module inside its threads."""

    def __init__(self, real) -> None:
        object.__setattr__(self, "_real", real)

    def __getattr__(self, name: str):
        from numba.cuda.simulator import kernel

        context = kernel._kernel_context  # the fake module of the kernel running now
        if context is not None and isinstance(threading.current_thread(), kernel.BlockThread):
            return getattr(context, name)
        return getattr(self._real, name)

    def __repr__(self) -> str:  # what a learner printing ``cuda`` expects to see
        return repr(self._real)

    def __dir__(self) -> list[str]:  # tab completion in a notebook
        return dir(self._real)


@contextlib.contextmanager
def _routed_cuda_module(fn, fake_cuda_module):
    """Replace numba's swap: route ``cuda`` in ``fn``'s module by thread, for good.

    Only where numba is the simulator. On a GPU machine the race checker and the access
    recorder still simulate kernels, but numba compiles the same modules' kernels for the
    GPU, which needs the name to be ``numba.cuda`` itself: there numba's own swap runs,
    and puts it back when the simulated kernel ends (no worker thread runs kernels there).
    """
    from numba import cuda

    from .. import _cuda_setup

    if not _cuda_setup.is_simulated():
        with _numba_swap(fn, fake_cuda_module):
            yield
        return
    globs = fn.__globals__
    for name, value in list(globs.items()):
        if value is cuda:
            globs[name] = ThreadRoutedCuda(cuda)
    yield


#: Called before a thread that does not hold the device calls a kernel itself (not
#: through a stream): ``teachgrad.streams`` sets it to wait for the queued work first,
#: as a launch on a GPU's default stream waits for the work before it.
before_direct_call = None


def holds_device() -> bool:
    """Whether this thread is running a simulated kernel (or its copies back to the host)."""
    return DEVICE_LOCK._is_owned()


def _locked_call(original):
    def __call__(self, *args):
        if self._device:  # a device function runs inside a kernel that holds the lock
            return original(self, *args)
        if before_direct_call is not None and not holds_device():
            before_direct_call()
        with DEVICE_LOCK:
            return original(self, *args)
    return __call__


def _shared_array(self, shape, dtype, alignment=None):
    """``cuda.shared.array`` for the simulator: one array per source line, created once."""
    from numba.cuda import types
    from numba.cuda.np import numpy_support

    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    dtype = np.dtype(dtype)
    if shape == 0:  # dynamic shared memory: one buffer, viewed with this dtype
        count = self._dynshared_size // dtype.itemsize
        return np.frombuffer(self._dynshared.data, dtype=dtype, count=count)
    frame = sys._getframe(1)
    caller = (frame.f_code.co_filename, frame.f_lineno)
    with _lock:
        array = self._allocations.get(caller)
        if array is None:
            array = np.empty(shape, dtype)
            if _shared_fill is not None and dtype.kind == "f":
                array.fill(_shared_fill)
            if _trace is not None:
                array = TracedShared(array, _array_name(*caller), _trace)
            self._allocations[caller] = array
    return array


_shared_fill: float | None = None  # what new float shared arrays start with (None: np.empty's)


@contextlib.contextmanager
def uninitialised_shared(value: float = np.nan):
    """Inside, new float shared arrays start filled with ``value``.

    On a GPU, shared memory starts with whatever the last block left there; ``np.empty``
    here usually gives zeros, which hides a kernel that reads a slot it never wrote.
    Filled with NaN, such a read shows in the result.
    """
    global _shared_fill
    patch_simulator()
    before, _shared_fill = _shared_fill, value
    try:
        yield
    finally:
        _shared_fill = before


# -- tracing shared memory ----------------------------------------------------------

_trace: list | None = None  # the access log while tracing, else None


def _array_name(filename: str, lineno: int) -> str:
    """The variable a shared array is assigned to (``partial = cuda.shared.array(...)``)."""
    line = linecache.getline(filename, lineno).strip()
    name = line.split("=")[0].strip() if "=" in line else ""
    return name if name.isidentifier() else f"shared@{lineno}"


def _who() -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    thread = threading.current_thread()
    return tuple(thread.blockIdx), tuple(thread.threadIdx), getattr(thread, "epoch", 0)


class TracedShared:
    """A shared array that logs ``(block, thread, epoch, name, index, "R"/"W")`` per access."""

    def __init__(self, array: np.ndarray, name: str, log: list) -> None:
        self.array, self.name, self.log = array, name, log

    def _flat(self, index) -> tuple[int, ...]:
        index = index if isinstance(index, tuple) else (index,)
        return tuple(int(i) for i in index)

    def __getitem__(self, index):
        self.log.append((*_who(), self.name, self._flat(index), "R"))
        return self.array[index]

    def __setitem__(self, index, value) -> None:
        self.log.append((*_who(), self.name, self._flat(index), "W"))
        self.array[index] = value

    shape = property(lambda self: self.array.shape)
    dtype = property(lambda self: self.array.dtype)
    size = property(lambda self: self.array.size)

    def __len__(self) -> int:
        return len(self.array)


def _counting_syncthreads(module) -> None:
    thread = threading.current_thread()
    thread.epoch = getattr(thread, "epoch", 0) + 1  # the barrier starts a new epoch
    if _trace is not None:
        _trace.append((*_who(), "", (), "B"))
    thread.syncthreads()


@contextlib.contextmanager
def tracing():
    """Log every shared-memory access of the kernels launched inside; yields the log list."""
    global _trace
    from numba.cuda.simulator import kernelapi

    patch_simulator()
    log: list = []
    original_sync = kernelapi.FakeCUDAModule.syncthreads
    kernelapi.FakeCUDAModule.syncthreads = _counting_syncthreads
    _trace = log
    try:
        yield log
    finally:
        _trace = None
        kernelapi.FakeCUDAModule.syncthreads = original_sync


def patch_simulator() -> None:
    """Make the simulator thread-safe (once; a no-op afterwards): see the module's docstring."""
    global _patched, _numba_swap
    if _patched:
        return
    from numba.cuda.simulator import kernel, kernelapi

    with _lock:
        if _patched:
            return
        kernelapi.FakeCUDAShared.array = _shared_array
        _numba_swap = kernel.swapped_cuda_module
        kernel.swapped_cuda_module = _routed_cuda_module
        kernel.FakeCUDAKernel.__call__ = _locked_call(kernel.FakeCUDAKernel.__call__)
        _patched = True

"""Which ``cuda`` device the host is talking to: ``cuda:0``, ``cuda:1``, ...

A machine may have several GPUs. Each has its own memory and its own streams,
and the host picks one at a time, the *current device* (``tg.cuda.set_device``,
``with tg.cuda.device(n):``). ``device="cuda"`` means the current device, as in
PyTorch; an operation on tensors of ``cuda:1`` runs on ``cuda:1`` whatever the
current device is (its kernels go to ``cuda:1``'s current stream): the engine
wraps it in :func:`using`, PyTorch's "device guard".

How many devices there are:

* on a real GPU, as many as numba sees (``len(numba.cuda.gpus)``); an index
  beyond them is refused;
* in numba's CUDA simulator, as many as configured: ``TEACHGRAD_CUDA_DEVICES``
  (default 2) or :func:`set_simulated_device_count` before the first stream
  exists. The simulated devices share one simulator (one kernel runs at a time,
  on one CPU) but each has its own streams, so the host can queue work on two
  devices and wait for one of them only.

The current device belongs to the host thread, as ``cudaSetDevice`` does.
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading
from typing import Any, Callable, Iterator

from . import _cuda_setup

#: simulated devices when ``TEACHGRAD_CUDA_DEVICES`` is not set
DEFAULT_SIMULATED_DEVICES = 2


class _Current(threading.local):
    index = 0  #: each host thread starts on cuda:0


_current = _Current()
_simulated_count: int | None = None  # fixed by the first stream (see streams.stream)
_count_fixed = False
#: ``teachgrad.device.as_device``'s one Device object per checked index (tensors share it)
checked_devices: dict = {}


def _env_count() -> int:
    text = os.environ.get("TEACHGRAD_CUDA_DEVICES", "").strip()
    if not text:
        return DEFAULT_SIMULATED_DEVICES
    if not text.isdigit() or int(text) < 1:
        raise RuntimeError(f"TEACHGRAD_CUDA_DEVICES={text!r}: it must be a whole number >= 1 "
                           "(how many cuda devices the simulator offers)")
    return int(text)


def device_count() -> int:
    """How many ``cuda`` devices there are (0 when cuda is unavailable)."""
    if _cuda_setup.SETUP.mode == "none":
        return 0
    if _cuda_setup.is_simulated():
        global _simulated_count
        if _simulated_count is None:
            _simulated_count = _env_count()
        return _simulated_count
    from numba import cuda

    return len(cuda.gpus)


def set_simulated_device_count(n: int) -> None:
    """How many devices the simulator offers; only before the first stream or cuda tensor."""
    global _simulated_count
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_simulated_device_count takes a whole number >= 1, got {n!r}")
    if not _cuda_setup.is_simulated():
        raise RuntimeError("set_simulated_device_count: cuda runs on a real GPU here, whose "
                           f"device count is the hardware's ({device_count()})")
    if _count_fixed and n != device_count():
        raise RuntimeError(f"set_simulated_device_count({n}): the simulator already has "
                           f"{device_count()} devices in use. Fix: call it before the first "
                           "cuda tensor or stream, or set TEACHGRAD_CUDA_DEVICES before starting")
    _simulated_count = n
    checked_devices.clear()  # (indexes checked against the old count)


def fix_count() -> None:
    """Called when the first stream is made: from then on the device count cannot change."""
    global _count_fixed
    device_count()
    _count_fixed = True


def check_index(index: object, what: str = "device") -> int:
    """``index`` as a valid cuda device index, or an error naming the valid ones."""
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"{what} must be a cuda device index (an int), got {index!r}")
    _cuda_setup.check_cuda()  # (no cuda at all: say why, not "0 devices")
    count = device_count()
    if not 0 <= index < count:
        where = ("the simulator is configured with" if _cuda_setup.is_simulated()
                 else "this machine has")
        fix = ("set TEACHGRAD_CUDA_DEVICES (or call tg.cuda.set_simulated_device_count) "
               "before the first cuda tensor" if _cuda_setup.is_simulated()
               else "use an index below the number of GPUs")
        raise RuntimeError(f"invalid {what} cuda:{index}: {where} {count} cuda device(s), "
                           f"cuda:0 to cuda:{count - 1}. Fix: {fix}")
    return index


def current_index() -> int:
    """The host thread's current cuda device."""
    return _current.index


def set_current(index: int) -> None:
    """Make ``index`` the current device (checked first; nothing changes on an error)."""
    index = check_index(index)
    if not _cuda_setup.is_simulated():
        _select_gpu(index)
    _current.index = index


def _select_gpu(index: int) -> None:
    """Make numba's context of GPU ``index`` the current one on this thread."""
    from numba import cuda

    cuda.select_device(index)


@contextlib.contextmanager
def using(index: int | None) -> Iterator[None]:
    """Run the block with ``index`` as the current device, then restore the previous one.

    ``None`` changes nothing (a cpu tensor's device has no index).
    """
    if index is None or index == _current.index:
        yield
        return
    index = check_index(index)
    previous = _current.index
    if _cuda_setup.is_simulated():
        _current.index = index
        try:
            yield
        finally:
            _current.index = previous
        return
    from numba import cuda

    with cuda.gpus[index]:  # numba's context for that GPU: its memory, its streams
        _current.index = index
        try:
            yield
        finally:
            _current.index = previous


def on_tensors_device(fn: Callable) -> Callable:
    """Run ``fn`` on the device of its first tensor argument (``self`` for a method).

    The device guard for the few places that call the backend directly rather than
    through ``Function.apply`` (in-place updates, gradient accumulation, comparisons).
    """
    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        for a in args:  # the first argument that has a device (a tensor) decides
            device = getattr(a, "device", None)
            if device is not None:
                index = getattr(device, "index", None)
                if type(index) is not int or index == _current.index:  # (cpu: None)
                    break
                with using(index):
                    return fn(*args, **kwargs)
        return fn(*args, **kwargs)

    return guarded


def is_elsewhere(tensor: Any) -> bool:
    """True for a tensor on a cuda device other than the current one (it needs the guard)."""
    index = tensor.device.index
    return index is not None and index != _current.index

"""Backends: which code runs the primitives for each device.

``cpu`` tensors use the numpy backend (the reference) unless the user picks the
numba one with :func:`set_cpu_backend`; ``cuda`` tensors use the project's
numba.cuda kernels. Backends are created lazily, so importing teachgrad never
compiles a kernel.
"""
from __future__ import annotations

import threading

from .base import Backend

_CPU_CHOICES = ("numpy", "numba")
_cpu_choice = "numpy"
_instances: dict[str, Backend] = {}
#: The one backend object every ``cpu`` tensor computes with (made on first use).
_cpu_backend: Backend | None = None
#: held while the cpu backend's class changes (a background thread may change it)
_switching = threading.Lock()


def _make(name: str) -> Backend:
    if name in _CPU_CHOICES:
        from .host_memory import keep_freed_memory
        keep_freed_memory()  # (once per process: see host_memory.py)
    if name == "numpy":
        from .numpy_backend import NumpyBackend
        return NumpyBackend()
    if name == "numba":
        from .numba_cpu import NumbaCPUBackend
        return NumbaCPUBackend()
    if name == "cuda":
        from .cuda_backend import CudaBackend
        return CudaBackend()
    raise ValueError(name)


def backend_by_name(name: str) -> Backend:
    """The (single) instance of the backend called ``name``."""
    if name not in _instances:
        _instances[name] = _make(name)
    return _instances[name]


def get_backend(device_type: str) -> Backend:
    """The backend that runs ``device_type`` ('cpu' or 'cuda') right now."""
    global _cpu_backend
    if device_type != "cpu":
        return backend_by_name(device_type)
    if _cpu_backend is None:
        _cpu_backend = _make("numpy")
        _switch_to_choice()
    return _cpu_backend


def set_cpu_backend(name: str, wait: bool = False) -> None:
    """Choose how ``cpu`` tensors compute: ``"numpy"`` (default) or ``"numba"``.

    The choice applies to *every* cpu tensor, those that exist already (a model's
    parameters, a batch) as well as those made afterwards: both backends keep data
    in plain numpy arrays, so only *who computes* changes. (Every cpu tensor refers
    to one backend object; switching gives that object the other backend's class,
    so no tensor needs to be found and changed.)

    Loading numba takes a fraction of a second, once per process. The first
    ``set_cpu_backend("numba")`` therefore returns at once and loads it in a
    background thread; until it is loaded, cpu tensors go on computing with numpy
    (the same values within rounding). ``wait=True`` blocks until numba computes,
    for timing or testing the numba backend itself.
    """
    global _cpu_choice
    if name not in _CPU_CHOICES:
        raise ValueError(f"unknown cpu backend {name!r}: choose one of {', '.join(_CPU_CHOICES)}")
    if not isinstance(wait, bool):
        raise TypeError(f"set_cpu_backend: wait must be True or False, got {wait!r}")
    from . import numba_loading

    _cpu_choice = name
    if name == "numba" and not numba_loading.ready():
        numba_loading.start(lambda: backend_by_name("numba"), _switch_to_choice)  # (switches when loaded)
        if wait:
            numba_loading.wait()
        return
    _switch_to_choice()


def _switch_to_choice() -> None:
    """Give the cpu backend object the chosen backend's class (once that can compute)."""
    from . import numba_loading

    with _switching:
        loadable = _cpu_choice == "numpy" or numba_loading.ready()
        if _cpu_backend is not None and loadable and _cpu_backend.name != _cpu_choice:
            _cpu_backend.__class__ = type(backend_by_name(_cpu_choice))


def get_cpu_backend() -> str:
    return _cpu_choice


__all__ = ["Backend", "get_backend", "set_cpu_backend", "get_cpu_backend", "backend_by_name"]

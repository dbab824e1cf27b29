"""Backends: which code runs the primitives for each device.

``cpu`` tensors use the numpy backend (the reference) unless the user picks the
numba one with :func:`set_cpu_backend`; ``cuda`` tensors use the project's
numba.cuda kernels. Backends are created lazily, so importing teachgrad never
compiles a kernel.
"""
from __future__ import annotations

from .base import Backend

_CPU_CHOICES = ("numpy", "numba")
_cpu_choice = "numpy"
_instances: dict[str, Backend] = {}
#: The one backend object every ``cpu`` tensor computes with (made on first use).
_cpu_backend: Backend | None = None


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
        _cpu_backend = _make(_cpu_choice)
    return _cpu_backend


def set_cpu_backend(name: str) -> None:
    """Choose how ``cpu`` tensors compute: ``"numpy"`` (default) or ``"numba"``.

    The choice applies at once to *every* cpu tensor, those that exist already
    (a model's parameters, a batch) as well as those made afterwards: both
    backends keep data in plain numpy arrays, so only *who computes* changes.
    (Every cpu tensor refers to one backend object; switching gives that object
    the other backend's class, so no tensor needs to be found and changed.)
    The first numba operation of a process loads numba and its compiled loops:
    a fraction of a second, once.
    """
    global _cpu_choice
    if name not in _CPU_CHOICES:
        raise ValueError(f"unknown cpu backend {name!r}: choose one of {', '.join(_CPU_CHOICES)}")
    _cpu_choice = name
    if _cpu_backend is not None and _cpu_backend.name != name:
        _cpu_backend.__class__ = type(backend_by_name(name))


def get_cpu_backend() -> str:
    return _cpu_choice


__all__ = ["Backend", "get_backend", "set_cpu_backend", "get_cpu_backend", "backend_by_name"]

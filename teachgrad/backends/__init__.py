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


def _make(name: str) -> Backend:
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
    return backend_by_name(_cpu_choice if device_type == "cpu" else device_type)


def set_cpu_backend(name: str) -> None:
    """Choose how ``cpu`` tensors compute: ``"numpy"`` (default) or ``"numba"``.

    Both keep data in numpy arrays, so tensors made under one work under the other.
    """
    global _cpu_choice
    if name not in _CPU_CHOICES:
        raise ValueError(f"unknown cpu backend {name!r}: choose one of {', '.join(_CPU_CHOICES)}")
    _cpu_choice = name


def get_cpu_backend() -> str:
    return _cpu_choice


__all__ = ["Backend", "get_backend", "set_cpu_backend", "get_cpu_backend", "backend_by_name"]

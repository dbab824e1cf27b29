"""Launching a kernel: the grid, the block, and the checks a real GPU would make.

A kernel launch ``kernel[grid, block](*args)`` starts ``grid`` blocks of
``block`` threads each. The hardware has limits: at most 1024 threads in a
block, at most (1024, 1024, 64) along the block's x, y and z, 48 KiB of static
shared memory per block, and kernels can only read *device* memory. A real GPU
refuses a launch that breaks them; numba's simulator does not, so a kernel that
"works" in the simulator could fail on a GPU. :func:`launch` makes the same
checks everywhere, before anything runs, and says how to fix the launch.

Kernel-level API::

    launch(kernel, grid, block, *args, shared_bytes=0)
    device_limits() -> DeviceLimits
    is_device_array(x) -> bool
    is_device_function(fn) -> bool   # made with @cuda.jit(device=True)

``grid`` and ``block`` are an int or a tuple of up to three ints. A kernel made
by one of teachgrad's factories carries its static shared memory size in a
``shared_bytes`` attribute, which is added to the ``shared_bytes`` argument.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numba import cuda

Dims = int | tuple[int, ...]


@dataclass(frozen=True)
class DeviceLimits:
    """The launch limits of the current device (CUDA's, for compute capability >= 3)."""

    name: str = "CUDA simulator"
    max_threads_per_block: int = 1024
    max_block_dims: tuple[int, int, int] = (1024, 1024, 64)
    max_grid_dims: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_shared_bytes_per_block: int = 48 * 1024
    warp_size: int = 32
    multiprocessors: int = 1


@functools.lru_cache(maxsize=1)
def device_limits() -> DeviceLimits:
    """Limits read from the GPU when there is one; CUDA's usual values in the simulator."""
    from .. import _cuda_setup

    if _cuda_setup.is_simulated() or not cuda.is_available():
        return DeviceLimits()
    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    return DeviceLimits(
        name=name,
        max_threads_per_block=dev.MAX_THREADS_PER_BLOCK,
        max_block_dims=(dev.MAX_BLOCK_DIM_X, dev.MAX_BLOCK_DIM_Y, dev.MAX_BLOCK_DIM_Z),
        max_grid_dims=(dev.MAX_GRID_DIM_X, dev.MAX_GRID_DIM_Y, dev.MAX_GRID_DIM_Z),
        # static shared memory is capped at 48 KiB even where more can be opted into
        max_shared_bytes_per_block=min(dev.MAX_SHARED_MEMORY_PER_BLOCK, 48 * 1024),
        warp_size=dev.WARP_SIZE,
        multiprocessors=dev.MULTIPROCESSOR_COUNT,
    )


def is_device_function(fn: object) -> bool:
    """Whether ``fn`` was made with ``@cuda.jit(device=True)`` (GPU or simulator)."""
    options = getattr(fn, "targetoptions", None) or {}
    return bool(getattr(fn, "_device", False) or options.get("device", False))


def is_device_array(x: object) -> bool:
    """True for a numba device array (on a GPU or in the simulator)."""
    return hasattr(x, "copy_to_host") and not isinstance(x, np.ndarray)


def _given(dims: Dims) -> tuple[int, ...]:
    if isinstance(dims, (int, np.integer)):
        return (dims,)
    if not isinstance(dims, (tuple, list)):
        raise TypeError(f"grid and block must be an int or a tuple of 1 to 3 ints, got {dims!r} "
                        f"({type(dims).__name__}). Fix: e.g. launch(kernel, blocks, 256, ...) "
                        "with blocks = (n + 255) // 256")
    return tuple(dims)


def _as_dims(dims: Dims, what: str) -> tuple[int, int, int]:
    """``dims`` padded to (x, y, z) with 1s."""
    t = _given(dims)
    if not 1 <= len(t) <= 3 or not all(isinstance(d, (int, np.integer)) for d in t):
        raise ValueError(f"{what} must be an int or a tuple of 1 to 3 ints, got {dims!r}")
    return tuple(int(d) for d in t) + (1,) * (3 - len(t))


def _kernel_name(kernel) -> str:
    fn = getattr(kernel, "py_func", kernel)
    return getattr(fn, "__name__", repr(kernel))


def check_launch(kernel, grid: Dims, block: Dims, args: tuple, shared_bytes: int = 0) -> None:
    """Raise a clear error if this launch would break a device limit."""
    limits = device_limits()
    name = _kernel_name(kernel)
    g, b = _as_dims(grid, "grid"), _as_dims(block, "block")
    threads = b[0] * b[1] * b[2]
    if min(g) < 1 or min(b) < 1:
        raise ValueError(f"{name}: grid {grid!r} and block {block!r} need at least 1 along every axis")
    if threads > limits.max_threads_per_block:
        raise ValueError(
            f"{name}: a block of {' x '.join(map(str, _given(block)))} = {threads} threads "
            f"is over the limit of {limits.max_threads_per_block} threads per block. "
            f"Use at most {limits.max_threads_per_block} threads per block (e.g. 256) and more blocks."
        )
    for axis, size, limit in zip("xyz", b, limits.max_block_dims):
        if size > limit:
            raise ValueError(
                f"{name}: block size {size} along {axis} is over the limit of {limit} "
                f"for that axis (limits x, y, z = {limits.max_block_dims}). "
                f"Move threads to another axis or use at most {limit} along {axis}."
            )
    for axis, size, limit in zip("xyz", g, limits.max_grid_dims):
        if size > limit:
            raise ValueError(
                f"{name}: grid size {size} along {axis} is over the limit of {limit} blocks. "
                "Use fewer blocks and let each thread loop over more elements (a grid-stride loop)."
            )
    total_shared = shared_bytes + getattr(kernel, "shared_bytes", 0)
    if total_shared > limits.max_shared_bytes_per_block:
        raise ValueError(
            f"{name}: {total_shared} bytes of shared memory per block is over the limit of "
            f"{limits.max_shared_bytes_per_block} bytes (48 KiB). Use smaller tiles."
        )
    for position, arg in enumerate(args):
        if isinstance(arg, list) or hasattr(arg, "requires_grad"):  # (a teachgrad Tensor)
            raise TypeError(
                f"{name}: argument {position} is a {type(arg).__name__}, but kernels take device "
                "arrays (and numbers). Fix: copy the values to the device first, e.g. "
                "teachgrad.kernels.transfer.to_device(np.asarray(values))"
            )
        if isinstance(arg, np.ndarray) and arg.ndim > 0:
            raise TypeError(
                f"{name}: argument {position} is a numpy array (host memory) of shape "
                f"{arg.shape}, but kernels read device memory. Copy it to the device first, "
                "e.g. with teachgrad.kernels.transfer.to_device(array)."
            )


def launch(kernel, grid: Dims, block: Dims, *args, shared_bytes: int = 0) -> None:
    """Check the launch against the device limits, then enqueue ``kernel[grid, block](*args)``.

    The kernel goes on the current stream (:mod:`teachgrad.streams`) and this
    returns at once: the device (a worker thread in the simulator) runs it later,
    in order. A bad launch configuration is still refused here, at once.
    """
    from ..streams.stream import enqueue

    check_launch(kernel, grid, block, args, shared_bytes)
    enqueue("kernel", _kernel_name(kernel),
            functools.partial(_run_kernel, kernel, grid, block, args))


def _run_kernel(kernel, grid: Dims, block: Dims, args: tuple, handle) -> None:
    """Run one launch: on the GPU stream ``handle``, or (None) in the simulator."""
    if handle is not None:
        kernel[grid, block, handle](*args)
        return
    from ._simulator import patch_simulator

    patch_simulator()
    kernel[grid, block](*args)

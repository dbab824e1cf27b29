"""Running a learner's kernel for a checker: compile, copy in, launch (checked), copy out.

The GPU chapters ask the learner for ``@cuda.jit`` kernels (or device
functions). A checker launches them on small, ragged inputs and compares with
numpy. Two details need care:

* **The stub of the learner edition.** Its body is ``raise
  NotImplementedError(...)``. In numba's CUDA simulator the exception comes
  back from the launch as it would from Python; on a real GPU a kernel cannot
  raise to the host. :func:`is_stub` spots the stub before anything is
  launched, so "not solved yet" reads the same on both.
* **Launch checks.** Launches go through :func:`teachgrad.kernels.launch.launch`,
  so a learner's launch is held to a real GPU's limits even in the simulator.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

#: What the learner edition's stubs raise (see :mod:`teachgrad.exercises.edition`).
_STUB_NAME = "NotImplementedError"


def python_function(fn: Any) -> Callable | None:
    """The plain Python function behind a numba dispatcher (or ``fn`` itself)."""
    fn = getattr(fn, "py_func", fn)
    return fn if hasattr(fn, "__code__") else None


def is_stub(fn: Any) -> bool:
    """Whether ``fn`` (a function, a kernel or a device function) still raises NotImplementedError."""
    code = getattr(python_function(fn), "__code__", None)
    return code is not None and _STUB_NAME in code.co_names


def as_kernel(fn: Any):
    """A launchable kernel: ``fn`` if it already is one, else ``cuda.jit(fn)``."""
    from numba import cuda

    if is_device_function(fn):
        raise TypeError("this is a device function (@cuda.jit(device=True)); "
                        "a kernel is decorated with plain @cuda.jit")
    if hasattr(fn, "py_func"):
        return fn  # already a @cuda.jit kernel
    return cuda.jit(fn)


def is_device_function(fn: Any) -> bool:
    """Whether ``fn`` was made with ``@cuda.jit(device=True)`` (GPU or simulator)."""
    from ..kernels.launch import is_device_function as kernel_level

    return kernel_level(fn)


def launch_on_host_arrays(kernel: Any, grid: Any, block: Any, *args: Any) -> list[np.ndarray]:
    """Launch ``kernel[grid, block]`` with numpy arrays copied to the device; return them copied back.

    Scalars are passed as they are. The returned list holds one numpy array per
    array argument, in order, as the kernel left it.

    On a GPU machine the kernel first runs in the simulator as well, on copies: a GPU
    checks no bounds, so a thread reading or writing past the end of an array would go
    unnoticed there, while a checker must see it. The simulator raises ``IndexError``
    for it, here, before anything is launched on the GPU.
    """
    from numba import cuda

    from .. import _cuda_setup
    from ..kernels.launch import check_launch, launch
    from ..streams import synchronize

    kernel = as_kernel(kernel)
    if not _cuda_setup.is_simulated():
        from ..kernels.race import run_simulated

        check_launch(kernel, grid, block, ())  # (the simulator would not refuse)
        run_simulated(kernel, grid, block,
                      *[np.array(a) if isinstance(a, np.ndarray) else a for a in args])

    device_args = [cuda.to_device(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a
                   for a in args]
    launch(kernel, grid, block, *device_args)
    synchronize()  # the launch was only enqueued
    return [d.copy_to_host() for a, d in zip(args, device_args) if isinstance(a, np.ndarray)]


def first_index(mask: np.ndarray) -> int | tuple[int, ...]:
    """The first position where ``mask`` is true, as an int (1-D) or a tuple."""
    position = tuple(int(i) for i in np.argwhere(mask)[0])
    return position[0] if len(position) == 1 else position


def launch_within_bounds(kernel: Any, grid: Any, block: Any, *args: Any,
                         hint: str) -> list[np.ndarray]:
    """:func:`launch_on_host_arrays`, with a thread that went past the end of an array
    (the simulator checks bounds, on a GPU machine too; the error arrives wrapped by the
    stream, or from the simulated run that comes first on a GPU machine) reported as a
    :class:`~teachgrad.exercises.core.Mismatch` that says so, with ``hint``."""
    from ..streams.stream import KernelError

    try:
        return launch_on_host_arrays(kernel, grid, block, *args)
    except (IndexError, KernelError) as error:
        cause = error.__cause__ if isinstance(error, KernelError) else error
        if not isinstance(cause, IndexError):
            raise
        raise past_the_end(cause, hint) from None


def past_the_end(error: IndexError, hint: str):
    """The :class:`~teachgrad.exercises.core.Mismatch` for a thread that went past the end
    of an array: the simulator's ``IndexError`` (on a GPU machine too, where the learner's
    kernel is simulated first), with ``hint``."""
    from .core import Mismatch

    return Mismatch(f"a thread went past the end of an array ({error})", show_values=False,
                    hint=hint)


def negative_index_test(record) -> None:
    """Raise a Mismatch for the first access at a negative index in a recorded launch.

    Python (and so the simulator) wraps ``partial[-1]`` around to the last slot, so such a
    kernel can give right numbers here; on a GPU it reads or writes outside the array.
    """
    from .core import Mismatch

    for access in record.accesses:
        if any(i < 0 for i in access.index):
            raise Mismatch(
                f"thread {access.thread} of block {access.block} "
                f"{'wrote' if access.kind == 'W' else 'read'} "
                f"{access.array}[{', '.join(map(str, access.index))}]: a negative index wraps "
                "around in Python and in the simulator, but on a GPU it is outside the array",
                show_values=False, hint="check the index arithmetic: each thread's slot is its "
                                        "own number, from 0")

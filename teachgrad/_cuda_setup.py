"""Choose, once and before numba is imported, where ``cuda`` tensors run.

numba decides at import time whether ``numba.cuda`` talks to a real GPU or to
its *CUDA simulator* (pure Python, one OS thread per CUDA thread). The switch
is the environment variable ``NUMBA_ENABLE_CUDASIM``, read when numba is first
imported. So teachgrad imports this module first and decides here, without
importing numba, by asking the CUDA driver itself whether it sees a GPU.

The learner can override the choice with ``TEACHGRAD_CUDA``:

* ``auto`` (default): a real GPU if the driver reports one, else the simulator;
* ``sim``: always the simulator (handy to watch threads even on a GPU machine);
* ``gpu``: require a real GPU; the first ``cuda`` use fails with a clear error
  when there is none.

:func:`describe` says in one line what was chosen and why.
"""
from __future__ import annotations

import ctypes
import os
import sys
import warnings
from dataclasses import dataclass

_CHOICES = ("auto", "sim", "gpu")


@dataclass(frozen=True)
class CudaSetup:
    """What teachgrad decided about the ``cuda`` device."""

    requested: str  #: the value of TEACHGRAD_CUDA ("auto", "sim" or "gpu")
    mode: str  #: "gpu", "sim" or "none" (a GPU was required but none works)
    reason: str  #: why, in words
    gpu_count: int  #: GPUs the driver reported (0 when none / not asked)


def _driver_gpu_count() -> tuple[int, str]:
    """Ask the CUDA driver (libcuda) how many GPUs it sees, without numba."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll", "libcuda.dylib"):
        try:
            driver = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return 0, "no CUDA driver found"
    if driver.cuInit(0) != 0:
        return 0, "the CUDA driver found no usable GPU"
    count = ctypes.c_int(0)
    if driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0, "the CUDA driver could not count GPUs"
    if count.value == 0:
        return 0, "the CUDA driver reports no GPU"
    return count.value, f"the CUDA driver reports {count.value} GPU(s)"


def _decide() -> CudaSetup:
    requested = os.environ.get("TEACHGRAD_CUDA", "auto").strip().lower() or "auto"
    if requested not in _CHOICES:
        warnings.warn(
            f"TEACHGRAD_CUDA={requested!r} is not one of {', '.join(_CHOICES)}; using 'auto'",
            stacklevel=3,
        )
        requested = "auto"
    if requested == "sim":
        return CudaSetup(requested, "sim", "TEACHGRAD_CUDA=sim", 0)
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1" and requested == "auto":
        return CudaSetup(requested, "sim", "NUMBA_ENABLE_CUDASIM=1 was already set", 0)
    count, why = _driver_gpu_count()
    if count > 0:
        return CudaSetup(requested, "gpu", why, count)
    if requested == "gpu":
        return CudaSetup(requested, "none", f"TEACHGRAD_CUDA=gpu but {why}", 0)
    return CudaSetup(requested, "sim", f"{why}; set TEACHGRAD_CUDA=gpu to require one", 0)


def _numba_simulator_state() -> bool | None:
    """Whether an already-imported ``numba.cuda`` uses the simulator (None: not imported yet)."""
    if "numba.cuda" not in sys.modules:
        return None  # numba.cuda reads NUMBA_ENABLE_CUDASIM when it is first imported
    config = sys.modules.get("numba.cuda.core.config")
    return bool(getattr(config, "ENABLE_CUDASIM", 0))


def _apply(setup: CudaSetup) -> CudaSetup:
    """Make numba follow ``setup``; if numba.cuda came first, report what it really does."""
    want_sim = setup.mode == "sim"
    if want_sim:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    elif setup.mode == "gpu" and os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
    actual = _numba_simulator_state()
    if actual is None or actual == want_sim:
        return setup
    if actual:
        actual_mode, why = "sim", "numba.cuda was imported first, with the simulator"
    elif setup.gpu_count:
        actual_mode, why = "gpu", "numba.cuda was imported first, for the GPU"
    else:  # numba wants a real GPU, and there is none: cuda cannot run
        actual_mode, why = "none", ("numba.cuda was imported first without the simulator and "
                                    "there is no GPU; import teachgrad before numba, or set "
                                    "NUMBA_ENABLE_CUDASIM=1")
    warnings.warn(
        f"numba was imported before teachgrad, so teachgrad could not choose the "
        f"{'CUDA simulator' if want_sim else 'GPU'} for 'cuda' tensors ({setup.reason}); "
        f"numba uses the {'simulator' if actual else 'real CUDA driver'}. "
        "Fix: import teachgrad before numba, or set NUMBA_ENABLE_CUDASIM=1 "
        "(simulator) / 0 (GPU) in the environment before starting Python.",
        stacklevel=4,
    )
    return CudaSetup(setup.requested, actual_mode, why, setup.gpu_count)


SETUP: CudaSetup = _apply(_decide())


def describe() -> str:
    """One line saying where ``cuda`` tensors run, e.g. for a notebook's first cell."""
    if SETUP.mode == "sim":
        return f"teachgrad cuda: numba CUDA simulator ({SETUP.reason})"
    if SETUP.mode == "gpu":
        return f"teachgrad cuda: real GPU ({SETUP.reason})"
    return f"teachgrad cuda: unavailable ({SETUP.reason})"


def is_simulated() -> bool:
    return SETUP.mode == "sim"


class SimulatedDeviceWarning(UserWarning):
    """The ``cuda`` device is numba's CUDA simulator, not a GPU (warned once per process)."""


#: Measured on this project's machines (a 2-core VM): a 4,096-element add took about
#: 12,000 times, a 64 x 64 matmul about 130,000 times, as long as numpy on the CPU.
SIMULATOR_WARNING = (
    "teachgrad: 'cuda' tensors run in numba's CUDA simulator here, not on a GPU ({reason}). "
    "Every CUDA thread becomes a Python thread, so operations are roughly 10,000 to "
    "100,000 times slower than on the CPU. The simulator is for watching and checking "
    "kernels on tiny arrays (the GPU chapters), not for training: use device='cpu' "
    "there. tg.cuda.is_available() is False here, so `'cuda' if tg.cuda.is_available() "
    "else 'cpu'` already picks the CPU."
)
_warned = False


#: True in a child process that ``fork`` made from one using a real GPU: the parent asked
#: the CUDA driver for GPUs (``cuInit``) when teachgrad was imported, and CUDA does not
#: survive a fork, so the child cannot use it. (The simulator has no such limit.)
_forked_from_gpu_process = False


def _after_fork_in_child() -> None:
    global _forked_from_gpu_process
    if SETUP.mode == "gpu":
        _forked_from_gpu_process = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

FORKED_CHILD_MESSAGE = (
    "cuda cannot be used in a child process made by fork from one that had started CUDA "
    "(teachgrad asks the CUDA driver for GPUs when it is imported), because CUDA does not "
    "survive a fork. Start child processes that use cuda with the 'spawn' method, e.g. "
    "multiprocessing.get_context('spawn'), as PyTorch requires too; a forked child may "
    "still use the CPU."
)


def check_cuda() -> None:
    """Raise a clear error when ``cuda`` cannot run (a GPU was required, none found; or
    this is a forked child of a process using a GPU)."""
    if SETUP.mode == "none":
        raise RuntimeError(
            f"cuda is not available: {SETUP.reason}. Unset TEACHGRAD_CUDA (or set it to "
            "'sim') to run cuda tensors in numba's CUDA simulator instead."
        )
    if _forked_from_gpu_process:
        raise RuntimeError(FORKED_CHILD_MESSAGE)


def require_cuda() -> None:
    """:func:`check_cuda`, and on first use of simulated ``cuda`` tensors, warn once that
    it is a simulator. (Kernels launched for the GPU lessons only check: watching kernels
    on tiny arrays is what the simulator is for.)"""
    global _warned
    check_cuda()
    if SETUP.mode == "sim" and not _warned:
        _warned = True
        warnings.warn(SIMULATOR_WARNING.format(reason=SETUP.reason), SimulatedDeviceWarning,
                      stacklevel=_first_frame_outside_teachgrad())


def _first_frame_outside_teachgrad() -> int:
    """The stacklevel that makes a warning point at the learner's line, not teachgrad's."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level

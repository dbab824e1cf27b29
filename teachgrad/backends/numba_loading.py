"""Loading the numba CPU backend in a background thread.

The first numba operation of a process used to take half a second to a second even
with numba's on-disk cache warm: importing numba (about 0.3 s), numba's own
first-use set-up of its type registries (about 0.3 s), and one ufunc wrapper per
binary operation that numba builds afresh in every process (about 0.2 s each).
None of that is the learner's computation.

So ``set_cpu_backend("numba")`` returns at once when numba is not loaded yet: a
daemon thread imports the backend and runs one tiny operation through it (numba's
first-use set-up), and only then is the cpu backend switched.
Until that moment cpu tensors keep computing with numpy, whose results agree with
numba's within rounding (both keep plain numpy arrays, so nothing has to move).
``set_cpu_backend("numba", wait=True)``, or :func:`wait`, blocks until numba computes:
what a timing of the numba backend, or a test of it, needs.
"""
from __future__ import annotations

import sys
import threading
from typing import Any, Callable

_MODULE = "teachgrad.backends.numba_cpu"
_thread: threading.Thread | None = None
_loaded = threading.Event()
_failure: BaseException | None = None


def ready() -> bool:
    """Whether the numba backend can compute now (loaded by the thread, or imported
    by the program itself)."""
    if _thread is not None:
        return _loaded.is_set()
    return _MODULE in sys.modules


def loading() -> bool:
    """Whether the background load has started and not yet finished (numba may then be in
    ``sys.modules`` half imported, or busy compiling for the thread: code that used it now
    would wait for the thread)."""
    return _thread is not None and not _loaded.is_set() and _failure is None


def start(make_backend: Callable[[], Any], on_loaded: Callable[[], None]) -> None:
    """In a daemon thread (once per process): make the backend with ``make_backend``,
    run one operation through it, then call ``on_loaded``."""
    global _thread
    if _thread is None:
        _thread = threading.Thread(target=_load, args=(make_backend, on_loaded),
                                   name="teachgrad-numba-loader", daemon=True)
        _thread.start()


def wait(timeout: float | None = None) -> bool:
    """Block until the background load has finished (and the switch is made); return
    whether it has. Raises the load's error if numba could not be loaded."""
    if _thread is not None:
        _thread.join(timeout)
    if _failure is not None:
        raise RuntimeError("teachgrad could not load the numba cpu backend; cpu tensors "
                           "compute with numpy") from _failure
    return ready()


def _load(make_backend: Callable[[], Any], on_loaded: Callable[[], None]) -> None:
    global _failure
    try:
        _warm_up(make_backend())
    except BaseException as error:  # (kept for wait() to raise in the caller's thread)
        _failure = error
        return
    _loaded.set()
    on_loaded()


def _warm_up(backend: Any) -> None:
    """One operation through the new backend: numba's own first-use set-up happens then,
    whichever loop runs first. (Each further kind of operation loads its own loop the
    first time it runs, a few milliseconds from the cache.)"""
    import numpy as np

    backend.binary("mul", np.ones(4, np.float32), 2.0)

"""CUDA graphs on a real GPU: numba-cuda launches into a ``cuda.core`` GraphBuilder.

numba-cuda (0.2x and later) accepts a ``cuda.core`` ``GraphBuilder`` wherever it
takes a stream: ``kernel[grid, block, builder](*args)`` is then *captured* by
the driver (CUDA stream capture) instead of run. ``builder.complete()`` makes
an executable graph and ``graph.launch(stream)`` replays every captured kernel
with one call. Where numba-cuda or cuda.core lacks that, :func:`begin` returns
None and :class:`~teachgrad.streams.graphs.CUDAGraph` re-issues the recorded
launches itself (its backend then says ``"recorded launches"``).

numba's deferred frees are held back while capturing (a free inside a capture
would make the driver wait), and the capture uses the ``relaxed`` mode unless
told otherwise, so that numba may allocate the graph's buffers as it goes.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable

BACKEND = "cuda.core graph"


def _graph_builder_support() -> Any:
    """cuda.core's Stream class when numba-cuda can launch into a GraphBuilder, else None."""
    try:
        from numba.cuda.cudadrv import driver as numba_driver

        if not hasattr(numba_driver, "GraphBuilder"):
            return None  # an older numba-cuda: it cannot launch into a builder
        try:
            from cuda.core import Stream as CoreStream
        except ImportError:
            from cuda.core.experimental import Stream as CoreStream
        return CoreStream
    except ImportError:
        return None


def core_stream(numba_stream: Any) -> Any:
    """The ``cuda.core`` view of a numba stream (the same CUDA stream, not a new one),
    made as numba-cuda makes it for its own launches."""
    return _graph_builder_support().from_handle(numba_stream.handle or 0)


class CoreGraph:
    """One capture on a GPU: the builder while capturing, then the executable graph."""

    def __init__(self, numba_stream: Any, mode: str) -> None:
        from numba import cuda

        self._no_frees = contextlib.ExitStack()
        self._no_frees.enter_context(cuda.defer_cleanup())
        self.builder = core_stream(numba_stream).create_graph_builder()
        # relaxed: numba allocates the graph's buffers with cuMemAlloc, which the stricter
        # modes forbid (PyTorch switches to relaxed around its own cudaMalloc calls);
        # ``mode`` still decides which host waits teachgrad refuses
        self.builder.begin_building("relaxed")
        self.executable: Any = None

    def launch(self, run: Callable[[Any], None]) -> None:
        """Launch a captured kernel into the builder (numba takes it as the stream)."""
        run(self.builder)

    def end(self) -> None:
        try:
            self.builder.end_building()
            self.executable = self.builder.complete()
        finally:
            self._no_frees.close()

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            if self.builder.is_building:
                self.builder.end_building()
        self._no_frees.close()

    def replay_on(self, numba_stream: Any) -> None:
        """The one call a replay makes: launch the whole graph on ``numba_stream``."""
        self.executable.launch(core_stream(numba_stream))


def begin(stream: Any, mode: str) -> CoreGraph | None:
    """Start capturing ``stream`` (a teachgrad Stream on a GPU), or None without support."""
    if _graph_builder_support() is None:
        return None
    return CoreGraph(stream._handle, mode)

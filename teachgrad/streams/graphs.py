"""CUDA graphs: capture a step's kernel launches once, then replay them with one call.

Every eager step pays the host's price for every op again: Python runs the
forward, the dispatcher picks a backend, autograd records a node, and only then
is a kernel enqueued. When the shapes never change, the kernels, their grids and
their buffers are the same every step, so all that host work repeats to produce
the same list of launches. A CUDA graph keeps the list::

    g = tg.cuda.CUDAGraph()
    with tg.cuda.graph(g):                 # capture: launches are recorded, not run
        static_out = model(static_in)
    static_in.copy_(new_batch)             # new data goes INTO the captured buffers
    g.replay()                             # the recorded launches run again
    static_out                             # ... and write the same output buffers

As in PyTorch (docs: "CUDA Graphs"):

* capture runs on a side stream (never the default stream), after a few warm-up
  iterations on a side stream (they allocate optimizer state, compile kernels);
* captured work does not run during capture: outputs hold their values after a
  replay, not before;
* memory allocated during capture belongs to the graph (its *private pool*) and
  stays alive until :meth:`CUDAGraph.reset`: replays write into those buffers;
* what a graph cannot hold is refused with :class:`GraphCaptureError`: a host
  wait (``.item()``, ``.numpy()``, ``.cpu()``, printing, ``synchronize()``), a
  copy from host memory (``tg.tensor(...)`` of new data, host-side random
  numbers), a tensor whose storage is swapped for a new buffer (replay would
  keep using the old one), and an optimizer that keeps its step count on the host.

How a replay runs, :attr:`CUDAGraph.backend`:

* ``"simulator"``: numba's simulator has no graph object, so the replay is one
  item on the stream that runs the recorded launches in order (the same kernel
  objects, grids, blocks and device arrays); each shows on a timeline, marked
  as a replay.
* ``"cuda.core graph"``: on a GPU, numba-cuda launches into a ``cuda.core``
  GraphBuilder (CUDA stream capture); replay is one ``cudaGraphLaunch``.
* ``"recorded launches"``: a GPU without that support: the host re-issues each
  recorded launch (no Python forward, no dispatch, but one launch each).
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from . import records
from .records import OpRecord
from .stream import Stream, capturing, current_stream, default_stream, stream as use_stream, synchronize

__all__ = ["CUDAGraph", "GraphCaptureError", "graph", "graph_pool_handle", "is_current_stream_capturing"]

CAPTURE_ERROR_MODES = ("global", "thread_local", "relaxed")


class GraphCaptureError(RuntimeError):
    """Something a CUDA graph cannot hold was asked for while capturing."""


@dataclass(frozen=True)
class CapturedLaunch:
    """One item recorded during capture: what it was, where from, and how to run it again."""

    kind: str  #: "kernel" (or an event marker)
    name: str  #: the kernel's name
    op: str | None  #: the autograd op that launched it, e.g. "Mul.forward"
    site: str  #: the learner's line
    run: Callable[[Any], None]  #: runs it, given the stream handle (None in the simulator)

    @property
    def kernel_launch(self) -> tuple | None:
        """``(kernel, grid, block, args)`` of a kernel launch: the very objects replay reuses."""
        run = self.run
        if isinstance(run, functools.partial) and len(run.args) == 4:
            return run.args
        return None


class MemPool:
    """A graph's private memory pool (``torch.cuda.graph_pool_handle()``'s handle).

    Buffers allocated while a graph is captured stay alive as long as the graph:
    its recorded launches hold their arrays, so the caching allocator
    (``teachgrad/kernels/caching_allocator.py``) cannot hand those blocks to another
    tensor while the graph lives. The pool here is a label: PyTorch's allocator also
    lets graphs that share a pool (``pool=g1.pool()``) reuse each other's freed blocks,
    and teachgrad's keeps no blocks apart per pool, so sharing one saves nothing here.
    """

    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.id = next(self._ids)

    def __repr__(self) -> str:
        return f"<teachgrad.cuda graph memory pool {self.id}>"


def graph_pool_handle() -> MemPool:
    """A new memory pool handle, to share between graphs (``graph(g, pool=...)``)."""
    return MemPool()


_captures: list["CUDAGraph"] = []  # graphs capturing now (any thread)
_lock = threading.Lock()


def is_current_stream_capturing() -> bool:
    """True while the current stream is capturing a CUDA graph (``torch.cuda`` has it too)."""
    return current_stream()._capture is not None


class CUDAGraph:
    """A recorded list of kernel launches that :meth:`replay` runs again, as ``torch.cuda.CUDAGraph``."""

    _ids = itertools.count(1)

    def __init__(self, keep_graph: bool = False) -> None:
        if not isinstance(keep_graph, bool):
            raise TypeError(f"keep_graph must be True or False, got {keep_graph!r}")
        self.id = next(self._ids)
        self.keep_graph = keep_graph
        self.backend: str | None = None  #: which replay runs (see the module docstring)
        self._launches: list[CapturedLaunch] = []
        self._stream: Stream | None = None  # capturing now
        self._thread: int | None = None
        self._mode = "global"
        self._pool: MemPool | None = None
        self._captured = False
        self._replays = 0
        self._gpu: Any = None  # the GPU's graph (graphs_gpu.CoreGraph) or None

    def __repr__(self) -> str:
        state = ("capturing" if self._stream is not None
                 else f"{len(self._launches)} launches, {self.backend}" if self._captured else "empty")
        return f"<teachgrad.cuda.CUDAGraph {self.id} ({state})>"

    # -- what was captured -----------------------------------------------------------------
    @property
    def launches(self) -> tuple[CapturedLaunch, ...]:
        """The recorded launches, in the order a replay runs them."""
        return tuple(self._launches)

    @property
    def replays(self) -> int:
        """How many times :meth:`replay` has run."""
        return self._replays

    def pool(self) -> MemPool:
        """This graph's memory pool, to share with a graph captured later (``pool=g.pool()``)."""
        if self._pool is None:
            raise RuntimeError("this CUDAGraph has no memory pool yet: capture it first")
        return self._pool

    # -- capture ---------------------------------------------------------------------------
    def capture_begin(self, pool: MemPool | None = None, capture_error_mode: str = "global") -> None:
        """Start recording the launches of the current stream (which must not be the default)."""
        stream = current_stream()
        _check_capture(self, stream, pool, capture_error_mode)
        self._pool = pool or MemPool()
        self._mode, self._thread = capture_error_mode, threading.get_ident()
        self._launches = []
        if stream._handle is not None:  # a GPU: the driver records what numba launches
            from . import graphs_gpu

            self._gpu = graphs_gpu.begin(stream, capture_error_mode)
            self.backend = graphs_gpu.BACKEND if self._gpu is not None else "recorded launches"
        else:
            self.backend = "simulator"
        with _lock:
            self._stream = stream
            stream._capture = self
            _captures.append(self)
            capturing.append(stream)

    def capture_end(self) -> None:
        """Stop recording; the graph is ready to :meth:`replay`."""
        if self._stream is None:
            raise RuntimeError("capture_end: this CUDAGraph is not capturing. "
                               "Fix: call capture_begin() first (or use `with tg.cuda.graph(g):`)")
        self._stop_capturing()
        if self._gpu is not None:
            self._gpu.end()
        self._captured = True

    def _stop_capturing(self) -> None:
        with _lock:
            stream = self._stream
            stream._capture = None
            _captures.remove(self)
            capturing.remove(stream)
            self._stream = None

    def _abort(self) -> None:
        """A capture that failed: forget all of it (the graph is empty again)."""
        if self._stream is not None:
            self._stop_capturing()
        if self._gpu is not None:
            self._gpu.abort()
        self.reset()

    def take(self, stream: Stream, record: OpRecord, run: Callable[[Any], None],
             uses_device: bool) -> OpRecord:
        """What :meth:`Stream.enqueue` does while capturing: record the item instead of running it."""
        if record.kind == "h2d":
            self._abort()
            raise GraphCaptureError(
                f"CUDA graph capture: {record.describe()} copies host memory to the device, and "
                "a graph cannot hold that copy (a replay would copy the same host values again). "
                "This happens with tg.tensor(data, device='cuda'), .to('cuda') or .cuda() of host "
                "data, and random numbers drawn on the host (dropout, tg.randn on cuda). Fix: make "
                "such tensors before the capture (a static input you copy_ new data into), "
                "and keep dropout off (model.eval()) in the captured step.")
        record.status = "captured"
        self._launches.append(CapturedLaunch(record.kind, record.name, record.op, record.site, run))
        if self._gpu is not None and uses_device:
            self._gpu.launch(run)  # numba launches into the capturing GraphBuilder
        return record

    # -- replay ----------------------------------------------------------------------------
    def replay(self) -> None:
        """Run the recorded launches again on the current stream (returns at once)."""
        if not self._captured:
            raise RuntimeError("replay: this CUDAGraph holds no captured graph. Fix: capture "
                               "it first, `with tg.cuda.graph(g): ...`")
        stream = current_stream()
        if stream._capture is not None:
            raise GraphCaptureError("replay: the current stream is capturing a CUDA graph; "
                                    "teachgrad cannot nest one graph in another. Fix: replay "
                                    "outside the `with tg.cuda.graph(...)` block")
        self._replays += 1
        label = f"graph {self.id}, replay {self._replays}"
        if self._gpu is not None:
            record = stream.enqueue("graph", f"CUDA graph {self.id} ({len(self._launches)} launches)",
                                    self._gpu.replay_on)
            record.replay = label
        elif stream._handle is not None:
            for launch in self._launches:  # a GPU without graph support: one launch each
                stream.enqueue(launch.kind, launch.name, launch.run,
                               site=(launch.site, launch.op)).replay = label
        else:
            record = stream.enqueue("graph", f"CUDA graph {self.id} ({len(self._launches)} launches)",
                                    functools.partial(_replay_launches, tuple(self._launches),
                                                      stream.id, label, records.now()))
            record.replay = label

    def reset(self) -> None:
        """Forget the captured graph and free its buffers (a new capture may follow)."""
        if self._stream is not None:
            raise RuntimeError("reset: this CUDAGraph is capturing. Fix: end the capture first")
        self._launches, self._captured, self._gpu, self.backend = [], False, None, None

    def refuse_host_wait(self, reason: str, site: str) -> None:
        """What every host wait calls while this graph captures (see :func:`refuse_host_wait`)."""
        refuse_host_wait(reason, site)

    def debug_dump(self) -> str:
        """The recorded launches, one a line (PyTorch writes a DOT file; this is text)."""
        return "\n".join(f"{i:3d} {c.kind} {c.name}" + (f" ({c.op})" if c.op else "")
                         for i, c in enumerate(self._launches))


def _replay_launches(launches: tuple[CapturedLaunch, ...], stream_id: int, label: str,
                     launched: float, handle: Any) -> None:
    """The device's side of a simulated replay: run each recorded launch, recording it
    (as enqueued when the host launched the graph: the host did nothing more for it)."""
    for launch in launches:
        record = OpRecord(launch.kind, launch.name, launch.op, launch.site, stream_id,
                          launched, replay=label)
        record.started, record.status = records.now(), "running"
        records.note_op(record)
        try:
            launch.run(handle)
            record.status = "done"
        except BaseException:
            record.status = "failed"
            raise  # the replay item fails: reported at the next wait, as any kernel error
        finally:
            record.finished = records.now()


def _check_capture(g: CUDAGraph, stream: Stream, pool: Any, mode: Any) -> None:
    """Everything capture_begin checks before it changes anything."""
    if pool is not None and not isinstance(pool, MemPool):
        raise TypeError(f"pool must be a handle from tg.cuda.graph_pool_handle() or g.pool(), "
                        f"got {type(pool).__name__}")
    if mode not in CAPTURE_ERROR_MODES:
        raise ValueError(f"capture_error_mode must be one of {', '.join(CAPTURE_ERROR_MODES)}, "
                         f"got {mode!r}")
    if g._stream is not None:
        raise RuntimeError("capture_begin: this CUDAGraph is capturing already")
    if g._captured:
        raise RuntimeError("this CUDAGraph instance already owns a captured graph. Fix: make a "
                           "new tg.cuda.CUDAGraph() for a new capture, or call g.reset() first")
    if stream is default_stream():
        raise GraphCaptureError(
            "CUDA graphs cannot be captured on the default stream (as in PyTorch): capture on "
            "a side stream. Fix: `with tg.cuda.graph(g):` picks one for you, or pass "
            "stream=tg.cuda.Stream()")
    if stream._capture is not None:
        raise GraphCaptureError(f"stream {stream.id} is capturing another CUDA graph already. "
                                "Fix: end that capture first, or capture on another stream")


def refuse_host_wait(reason: str, site: str) -> None:
    """Called by every host wait while a graph captures: a wait cannot be part of a graph."""
    here = threading.get_ident()
    with _lock:
        blocking = [g for g in _captures if g._mode == "global" or g._thread == here]
    if not blocking:
        return
    for g in blocking:
        g._abort()
    raise GraphCaptureError(
        f"CUDA graph capture: {reason} at {site} makes the host wait for the device, but the "
        "captured work has not run (it runs at replay), and a graph cannot hold a host wait. "
        "The capture was abandoned. Fix: keep .item(), .numpy(), .cpu(), print() and "
        "synchronize() out of the captured step: read the static outputs after g.replay().")


def refuse_storage_swap(shape: tuple) -> None:
    """Called when a tensor's storage is replaced by a new buffer during a capture."""
    here = threading.get_ident()
    with _lock:
        blocking = [g for g in _captures if g._thread == here]
    if not blocking:
        return
    for g in blocking:
        g._abort()
    raise GraphCaptureError(
        f"CUDA graph capture: a tensor of shape {list(shape)} that existed before the capture "
        "had its storage replaced by a new buffer (a gradient accumulated into an existing "
        ".grad, or t.data = ...). Replays would keep reading the old buffer and never see the "
        "new values. The capture was abandoned. Fix: optimizer.zero_grad(set_to_none=True) "
        "before capturing (the captured backward then owns the .grad buffers), and update "
        "tensors in place (copy_, add_) instead of rebinding them.")


def refuse_host_step(optimizer: str) -> None:
    """Called by an optimizer whose update reads a step count kept on the host."""
    if not is_current_stream_capturing():
        return
    current_stream()._capture._abort()
    raise GraphCaptureError(
        f"CUDA graph capture of {optimizer}.step(): it keeps its step count on the host, so "
        "every replay would repeat the bias correction of the captured step (PyTorch refuses "
        "it too unless capturable=True). The capture was abandoned. Fix: capture the forward "
        "and backward only and call optimizer.step() after g.replay(), or use SGD")


@contextlib.contextmanager
def graph(cuda_graph: CUDAGraph, pool: MemPool | None = None, stream: Stream | None = None,
          capture_error_mode: str = "global") -> Iterator[CUDAGraph]:
    """``with tg.cuda.graph(g):`` captures the launches inside into ``g`` (``torch.cuda.graph``).

    Waits for the device first (the warm-up's work must be done), then captures on
    ``stream`` (by default a side stream kept for captures). An error inside the
    block abandons the capture and leaves ``g`` empty.
    """
    if not isinstance(cuda_graph, CUDAGraph):
        raise TypeError(f"graph() takes a tg.cuda.CUDAGraph, got {type(cuda_graph).__name__}")
    if stream is not None and not isinstance(stream, Stream):
        raise TypeError(f"stream must be a tg.cuda.Stream or None, got {type(stream).__name__}")
    capture_stream = stream or _side_stream()
    _check_capture(cuda_graph, capture_stream, pool, capture_error_mode)
    synchronize()
    with use_stream(capture_stream):
        cuda_graph.capture_begin(pool, capture_error_mode)
        try:
            yield cuda_graph
        except BaseException:
            cuda_graph._abort()
            raise
        cuda_graph.capture_end()


_side: Stream | None = None


def _side_stream() -> Stream:
    """The side stream ``graph()`` captures on when given none (one per process, as PyTorch)."""
    global _side
    if _side is None:
        _side = Stream()
    return _side

"""What the live device bytes are, over time: parameters, activations, gradients, ...

The allocator knows blocks and sizes; the engine knows what each block is for:

* **parameters**: the ``Parameter`` tensors of the model;
* **gradients**: their ``.grad``;
* **optimizer state**: the tensors in ``optimizer.state`` (Adam's two moments, momentum);
* **activations**: tensors some operation recorded inside the block saved for backward
  (``ctx.save_for_backward``, or the output it reads back), until backward frees them;
* **other**: everything else alive (inputs, the loss, temporaries a kernel is using).

:func:`memory_timeline` records one sample at every allocation and free on the
device, each split into those categories::

    with tg.cuda.memory.memory_timeline(model, optimizer) as timeline:
        timeline.mark("forward");  loss = loss_fn(model(x), y)
        timeline.mark("backward"); loss.backward()
        timeline.mark("step");     optimizer.step(); optimizer.zero_grad()
    timeline.peak_bytes(), timeline.samples[-1]
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

from ..autograd import function
from ..streams import blocking_launches, synchronize
from ..kernels.caching_allocator import Block, allocator_for, block_of, current_device_index
from .counters import allocator_of

#: The categories, in the order a stacked chart draws them (bottom first).
CATEGORIES = ("parameters", "optimizer state", "gradients", "activations", "other")


@dataclass(frozen=True)
class MemorySample:
    """Live bytes after one allocator event, by category."""

    index: int
    event: str  # "alloc", "free" or "start"
    phase: str  # the label of the last ``mark``
    by_category: dict = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.by_category.values())


def _blocks_of(tensors) -> set[int]:
    """Ids of the device blocks the given tensors (or arrays) read."""
    ids = set()
    for t in tensors:
        array = getattr(t, "_array", t)
        block = block_of(getattr(array, "buffer", None))
        if block is not None:
            ids.add(block.id)
    return ids


def _saved_by(node) -> list:
    """What a recorded operation keeps for backward: its saved tensors and output."""
    ctx = node.ctx
    if ctx._saved is None:  # backward has run and freed them
        return []
    kept = [t for t in ctx._saved if t is not None]
    if ctx._out is not None:
        kept.append(ctx._out)
    return kept


def categorize(blocks: list[Block], parameters=(), optimizers=(), nodes=()) -> dict[int, str]:
    """Block id -> category, from the engine's own records (the first matching rule wins)."""
    parameters = list(parameters)
    known = {
        "parameters": _blocks_of(parameters),
        "gradients": _blocks_of([p.grad for p in parameters if p.grad is not None]),
        "optimizer state": _blocks_of([value for opt in optimizers for state in opt.state.values()
                                       for value in state.values()]),
        "activations": _blocks_of([t for node in nodes for t in _saved_by(node)]),
    }
    found = {}
    for block in blocks:
        found[block.id] = next((name for name in CATEGORIES[:-1] if block.id in known[name]),
                               "other")
    return found


class MemoryTimeline:
    """Samples of live device bytes by category, one per allocation or free."""

    def __init__(self, parameters=(), optimizers=(), device_index: int | None = None) -> None:
        self.parameters = list(parameters)
        self.optimizers = list(optimizers)
        self.device_index = current_device_index() if device_index is None else device_index
        self.samples: list[MemorySample] = []
        self.phase = ""
        self._nodes: weakref.WeakSet = weakref.WeakSet()
        self._lock = threading.RLock()

    def mark(self, phase: str) -> None:
        """Label the samples from here on (e.g. "forward", "backward", "step")."""
        if not isinstance(phase, str):
            raise TypeError(f"mark takes a label string, not {type(phase).__name__}")
        with self._lock:
            self.phase = phase
        self._sample("mark")

    def _sample(self, event: str, block: Block | None = None) -> None:
        # The allocator's lock is taken (inside live_blocks) before this timeline's, never
        # while holding it: a free on a stream's thread takes them in that order too.
        live = allocator_for(self.device_index).live_blocks()
        with self._lock:
            kinds = categorize(live, self.parameters, self.optimizers, list(self._nodes))
            totals = dict.fromkeys(CATEGORIES, 0)
            for b in live:
                totals[kinds[b.id]] += b.size
            self.samples.append(MemorySample(len(self.samples), event, self.phase, totals))

    def _on_node(self, node) -> None:
        self._nodes.add(node)

    def peak_bytes(self) -> int:
        """The largest total of live bytes among the samples."""
        return max((s.total for s in self.samples), default=0)

    def series(self) -> dict[str, list[int]]:
        """Category -> bytes at each sample (what a stacked chart draws)."""
        return {name: [s.by_category[name] for s in self.samples] for name in CATEGORIES}


def _gather(model, optimizer):
    parameters = list(model.parameters()) if model is not None else []
    optimizers = [optimizer] if optimizer is not None else []
    for opt in optimizers:
        if not hasattr(opt, "state") or not hasattr(opt, "param_groups"):
            raise TypeError(f"optimizer must be a tg.optim optimizer, not {type(opt).__name__}")
        seen = {id(p) for p in parameters}
        parameters += [p for g in opt.param_groups for p in g["params"] if id(p) not in seen]
    return parameters, optimizers


class memory_timeline:
    """Record live device bytes by category while the block runs (see the module doc).

    ``model`` (an ``nn.Module``) and ``optimizer`` tell which tensors are parameters,
    gradients and optimizer state; activations come from the recorded graph.

    With ``blocking=True`` (the default) every launch waits for its kernel while
    recording, so a tensor's block is freed when the program drops it. Launched
    asynchronously, a block stays in use until the kernels queued on it have run
    (they hold it): the samples then also show how far the host ran ahead.
    """

    def __init__(self, model=None, optimizer=None, device=None, blocking: bool = True) -> None:
        if model is not None and not hasattr(model, "parameters"):
            raise TypeError(f"model must be an nn.Module, not {type(model).__name__}")
        parameters, optimizers = _gather(model, optimizer)
        index = allocator_of(device).device_index
        self.timeline = MemoryTimeline(parameters, optimizers, index)
        self._listener = None
        self._blocking = blocking_launches(bool(blocking))

    def __enter__(self) -> MemoryTimeline:
        if function.node_made is not None:
            raise RuntimeError("a memory timeline is already recording: nest them not")
        timeline = self.timeline
        self._listener = lambda event, block: timeline._sample(event, block)
        self._blocking.__enter__()
        function.node_made = timeline._on_node
        allocator_for(timeline.device_index).listeners.append(self._listener)
        timeline._sample("start")
        return timeline

    def __exit__(self, *exc) -> None:
        synchronize()  # frees waiting on queued kernels are seen before recording stops
        allocator_for(self.timeline.device_index).listeners.remove(self._listener)
        function.node_made = None
        self._blocking.__exit__(*exc)


__all__ = ["CATEGORIES", "MemorySample", "MemoryTimeline", "categorize", "memory_timeline"]

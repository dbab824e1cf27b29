"""``DistributedDataParallel``: every rank trains the same model on its own share of a batch.

Synchronous data-parallel SGD needs every rank to step with the *average* of
the ranks' gradients. DDP arranges that with three pieces:

1. At construction, every rank's parameter list (names, shapes, dtypes, which are
   trainable) and bucket size are compared, and a replica that differs is refused
   on every rank; then rank 0's parameters and buffers are broadcast, so every
   replica starts equal.
2. The parameters are grouped into **buckets** of about ``bucket_cap_mb``, in
   reverse order of ``model.parameters()`` — roughly the order backward
   finishes their gradients.
3. A post-accumulate-grad hook on each parameter counts the gradients that are
   final. When a bucket is full its gradients are flattened into one buffer and
   an asynchronous all-reduce (average) starts at once, while backward goes on
   computing the gradients of earlier layers: communication overlaps compute.
   The last hook waits for every bucket and copies the averages into ``.grad``.

Under ``no_sync()`` the hooks do nothing: gradients just accumulate locally, and
the next backward outside it averages the accumulated sums.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from ... import distributed as dist
from ...distributed import collectives, process_group
from ..module import Module

_MB = 1024 * 1024


class _Bucket:
    """Some parameters whose gradients travel together in one flat buffer."""

    def __init__(self, index: int, params: list, names: list[str]) -> None:
        self.index, self.params, self.names = index, params, names
        self.ready = 0
        self.work: collectives.Work | None = None
        self.flat: Any = None
        self.nbytes = sum(p.numel() * p._array.itemsize for p in params)


class DistributedDataParallel(Module):
    """Wrap ``module`` so that backward averages its gradients across all ranks.

    Args:
        module: the model (the same architecture on every rank).
        bucket_cap_mb: the size of a bucket, in MiB (PyTorch's default is 25).
        broadcast_buffers: re-send rank 0's buffers before every forward.
        find_unused_parameters: not supported (every parameter must get a gradient).
        device_ids, output_device: accepted for PyTorch compatibility; CPU only here.
    """

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 broadcast_buffers: bool = True, bucket_cap_mb: float = 25.0,
                 find_unused_parameters: bool = False) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel wraps an nn.Module, got {type(module).__name__}")
        if not bucket_cap_mb > 0:
            raise ValueError(f"bucket_cap_mb must be positive, got {bucket_cap_mb!r}")
        if find_unused_parameters:
            raise ValueError("find_unused_parameters=True is not supported: make every "
                             "parameter take part in the loss")
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel needs a process group. Fix: call "
                               'dist.init_process_group(backend="mpi") first')
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if any(p.device.type != "cpu" for _, p in named):
            raise ValueError("DistributedDataParallel runs on CPU parameters only here. "
                             "Fix: model.cpu() before wrapping it")
        _check_same_parameters(module, bucket_cap_mb)
        super().__init__()
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.bucket_cap_mb = bucket_cap_mb
        self.require_backward_grad_sync = True
        self._sync_from_rank0(p for _, p in module.named_parameters())
        self._sync_from_rank0(module.buffers())
        self.buckets = _make_buckets(named, bucket_cap_mb * _MB)
        self._bucket_of = {id(p): b for b in self.buckets for p in b.params}
        self._launched = 0
        #: one entry per bucket all-reduce: bucket, launch and finish times (for the chapter)
        self.bucket_log: list[dict] = []
        self._hooks = [p.register_post_accumulate_grad_hook(self._grad_ready) for _, p in named]

    # --- forward --------------------------------------------------------------------------

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        self._check_previous_backward_finished()
        if self.broadcast_buffers:
            self._sync_from_rank0(self.module.buffers())
        return self.module(*args, **kwargs)

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Accumulate gradients locally (no communication) inside this block."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    # --- backward: the gradient hooks ------------------------------------------------------

    def _grad_ready(self, param: Any) -> None:
        if not self.require_backward_grad_sync:
            return
        bucket = self._bucket_of[id(param)]
        bucket.ready += 1
        if bucket.ready == len(bucket.params):
            self._launch(bucket)
        for other in self.buckets:  # MPI moves pending messages only while we call into it
            if other.work is not None:
                other.work.is_completed()
        if self._launched == len(self.buckets):
            self._finish_all()

    def _launch(self, bucket: _Bucket) -> None:
        grads = [p.grad._array.reshape(-1) for p in bucket.params]
        flat = np.concatenate(grads)
        bucket.flat = _wrap(flat)
        bucket.work = collectives.launch_all_reduce(
            bucket.flat, dist.ReduceOp.AVG, process_group.get_allreduce_algorithm(),
            f"all_reduce bucket {bucket.index}")
        self.bucket_log.append({"bucket": bucket.index, "params": list(bucket.names),
                                "bytes": bucket.nbytes, "launched": time.perf_counter()})
        self._launched += 1

    def _finish_all(self) -> None:
        for bucket in self.buckets:
            bucket.work.wait()
            offset = 0
            for p in bucket.params:
                size = p.numel()
                p.grad._array[...] = bucket.flat._array[offset:offset + size].reshape(p.shape)
                p.grad._bump_version()
                offset += size
            bucket.ready, bucket.work, bucket.flat = 0, None, None
        self.bucket_log[-len(self.buckets):] = [
            dict(entry, finished=time.perf_counter()) for entry in self.bucket_log[-len(self.buckets):]]
        self._launched = 0

    def _check_previous_backward_finished(self) -> None:
        waiting = [n for b in self.buckets if 0 < b.ready for n in b.names]
        if waiting:
            missing = [n for b in self.buckets for n, p in zip(b.names, b.params) if p.grad is None]
            for b in self.buckets:
                b.ready = 0
            self._launched = 0
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a "
                "new one: some parameters never received a gradient, so their bucket never "
                f"filled (parameters without a gradient: {missing or 'unknown'}). Fix: make "
                "every parameter take part in the loss on every rank")

    def _sync_from_rank0(self, tensors: Any) -> None:
        for t in tensors:
            dist.broadcast(t.detach(), src=0)


def _wrap(array: np.ndarray) -> Any:
    """A CPU tensor around ``array`` (no copy), for sending a bucket's flat buffer."""
    from ...backends import get_backend
    from ...device import as_device
    from ...tensor import Tensor
    return Tensor._make(array, get_backend("cpu"), as_device("cpu"))


def _make_buckets(named: list, cap_bytes: float) -> list[_Bucket]:
    """Group parameters in reverse order into buckets of about ``cap_bytes``."""
    buckets, params, names, size = [], [], [], 0
    for name, p in reversed(named):
        params.append(p)
        names.append(name)
        size += p.numel() * p._array.itemsize
        if size >= cap_bytes:
            buckets.append(_Bucket(len(buckets), params, names))
            params, names, size = [], [], 0
    if params:
        buckets.append(_Bucket(len(buckets), params, names))
    return buckets


def _check_same_parameters(module: Module, bucket_cap_mb: float) -> None:
    """Refuse, on every rank, replicas whose parameters differ in name, shape, dtype or in
    which ones train (``requires_grad``), or that cut buckets at another size: the ranks
    would all-reduce buffers that do not match, and their parameters would drift apart.
    Every rank gathers every rank's list, so every rank raises the same error."""
    mine = [(n, list(p.shape), str(p.dtype), "trained" if p.requires_grad else "frozen")
            for n, p in module.named_parameters()]
    everyone = process_group.allgather_object((mine, float(bucket_cap_mb)),
                                              "DistributedDataParallel (parameter check)")
    first_params, first_cap = everyone[0]
    for rank, (theirs, cap) in enumerate(everyone):
        if theirs != first_params:
            trained = [sum(e[3] == "trained" for e in x) for x in (first_params, theirs)]
            first = next((a, b) for a, b in zip(first_params + [None] * len(theirs),
                                                theirs + [None] * len(first_params)) if a != b)
            raise ValueError(
                f"DistributedDataParallel: the model on rank {rank} differs from rank 0's: "
                f"rank 0 has {_describe(first[0])}, rank {rank} has {_describe(first[1])} "
                f"({trained[0]} trainable parameters on rank 0, {trained[1]} on rank {rank}). "
                "Fix: build the same model on every rank, and freeze the same parameters")
        if cap != first_cap:
            raise ValueError(
                f"DistributedDataParallel: bucket_cap_mb is {cap:g} on rank {rank} but "
                f"{first_cap:g} on rank 0, so their buckets would hold different parameters. "
                "Fix: pass the same bucket_cap_mb on every rank")


def _describe(entry: Any) -> str:
    if entry is None:
        return "no parameter there"
    name, shape, dtype, trained = entry
    return f"parameter {name!r} of shape {shape} ({dtype}, {trained})"

"""``DataParallel``: one process drives several cuda devices, one batch split across them.

Every forward does four things, as ``torch.nn.DataParallel`` does:

1. **scatter** the batch along ``dim`` into one chunk per device (sizes as
   ``Tensor.chunk`` makes them: ``ceil(n / k)`` rows each, the last one smaller,
   and fewer chunks than devices when the batch is small);
2. **replicate** the module onto each device that got a chunk: a copy of every
   parameter and buffer, made with ``.to(device)``, so that backward carries each
   replica's gradient back to the original parameter, where they add up;
3. **apply** each replica to its chunk: the host queues each device's work on that
   device's stream and does not wait in between;
4. **gather** the outputs onto ``output_device`` and concatenate them along ``dim``.

Its known costs are steps 2 and 4: the module is copied to every device on every
step, and every output (and, in backward, every gradient) travels through one
device. ``DistributedDataParallel`` keeps one replica per process for good and
averages gradients with an all-reduce instead; ``benchmarks/data_parallel.py``
measures the difference.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Sequence

from ... import cuda_devices
from ...device import Device, as_device
from ...tensor import Tensor
from ..module import Module


def _index_of(device: Any, what: str) -> int:
    """A device id (an int, ``"cuda:1"``, a device) as a checked cuda index."""
    if isinstance(device, (str, Device)):
        found = as_device(device)  # ('cuda' is the current device, cuda:N is checked)
        if found.type != "cuda":
            raise ValueError(f"DataParallel: {what} must be cuda devices, got {found}")
        return found.index
    return cuda_devices.check_index(device, f"DataParallel {what}")


def chunk_sizes(n: int, parts: int) -> list[int]:
    """The sizes ``Tensor.chunk(parts)`` gives ``n`` rows: ``ceil(n/parts)`` each, the last
    smaller, and fewer parts when ``n`` is small (7 in 3: [3, 3, 1]; 2 in 3: [1, 1])."""
    if n == 0:
        return [0]
    step = math.ceil(n / parts)
    return [min(step, n - start) for start in range(0, n, step)]


def scatter(inputs: Sequence[Any], device_ids: Sequence[int], dim: int = 0) -> list[tuple]:
    """Split every tensor of ``inputs`` along ``dim`` and copy chunk ``i`` to ``device_ids[i]``.

    Returns one tuple of arguments per device that got a chunk; arguments that are not
    tensors go to every device as they are.
    """
    tensors = [a for a in inputs if isinstance(a, Tensor)]
    if not tensors:
        raise ValueError("DataParallel needs at least one tensor argument to split the batch")
    n = tensors[0].shape[dim]
    for t in tensors[1:]:
        if t.shape[dim] != n:
            raise ValueError(f"DataParallel: every tensor argument is split along dim {dim}, "
                             f"so they must have the same size there; got {n} and {t.shape[dim]}")
    dim = dim % tensors[0].ndim
    per_device, start = [], 0
    for size, index in zip(chunk_sizes(n, len(device_ids)), device_ids):
        rows = (slice(None),) * dim + (slice(start, start + size),)  # this device's chunk
        device = as_device(f"cuda:{index}")
        per_device.append(tuple(a[rows].to(device) if isinstance(a, Tensor) else a
                                for a in inputs))
        start += size
    return per_device


def gather(outputs: Sequence[Any], output_device: int, dim: int = 0) -> Any:
    """The replicas' outputs on ``output_device``, concatenated along ``dim`` (tuples of
    outputs are gathered position by position)."""
    from ... import ops

    first = outputs[0]
    if isinstance(first, Tensor):
        target = as_device(f"cuda:{output_device}")
        return ops.functional.cat([out.to(target) for out in outputs], dim)
    if isinstance(first, (tuple, list)):
        return type(first)(gather([out[i] for out in outputs], output_device, dim)
                           for i in range(len(first)))
    raise TypeError(f"DataParallel can gather tensors and tuples of tensors, not "
                    f"{type(first).__name__}")


def replicate(module: Module, device_ids: Sequence[int]) -> list[Module]:
    """One copy of ``module`` per device, whose parameters are ``.to(device)`` of the
    originals (so their gradients flow back to them) and whose buffers are copied."""
    return [module if i == 0 else _replica(module, as_device(f"cuda:{index}"))
            for i, index in enumerate(device_ids)]


def _replica(module: Module, device: Device) -> Module:
    copies: dict[int, Module] = {}
    for _, original in module.named_modules():
        replica = copy.copy(original)  # a shallow copy: new registries, filled below
        object.__setattr__(replica, "_parameters", {
            name: None if p is None else p.to(device)
            for name, p in original._parameters.items()})
        object.__setattr__(replica, "_buffers", {
            name: None if b is None else b.to(device) for name, b in original._buffers.items()})
        copies[id(original)] = replica
    for _, original in module.named_modules():
        object.__setattr__(copies[id(original)], "_modules", {
            name: None if child is None else copies[id(child)]
            for name, child in original._modules.items()})
    return copies[id(module)]


class DataParallel(Module):
    """Split each batch across cuda devices, as ``torch.nn.DataParallel``.

    Args:
        module: the model; its parameters and buffers must be on ``device_ids[0]``.
        device_ids: the cuda devices to use (ints, ``"cuda:N"`` or devices); all of them
            by default.
        output_device: where the outputs are gathered (``device_ids[0]`` by default).
        dim: the dimension the batch is split along.
    """

    def __init__(self, module: Module, device_ids: Sequence[Any] | None = None,
                 output_device: Any = None, dim: int = 0) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel wraps a teachgrad.nn.Module, got {type(module).__name__}")
        if device_ids is None:
            device_ids = list(range(cuda_devices.device_count()))
        ids = [_index_of(d, "device_ids") for d in device_ids]
        if not ids:
            raise ValueError("DataParallel: device_ids is empty. Fix: name at least one device, "
                             "or leave it None for all of them")
        if len(set(ids)) != len(ids):
            raise ValueError(f"DataParallel: device_ids {ids} name a device twice")
        out = ids[0] if output_device is None else _index_of(output_device, "output_device")
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError(f"DataParallel: dim must be an int, got {dim!r}")
        _check_on(module, ids[0])
        super().__init__()
        self.module = module
        self.device_ids, self.output_device, self.dim = ids, out, dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        _check_on(self.module, self.device_ids[0])  # (it may have moved since)
        chunks = self.scatter(inputs, self.device_ids, self.dim)
        if kwargs:  # keyword tensors are split too, chunk by chunk
            names = list(kwargs)
            split = self.scatter(tuple(kwargs.values()), self.device_ids, self.dim)
            keywords = [dict(zip(names, values)) for values in split]
        else:
            keywords = [{} for _ in chunks]
        replicas = self.replicate(self.module, self.device_ids[:len(chunks)])
        outputs = self.parallel_apply(replicas, chunks, keywords)
        return self.gather(outputs, self.output_device)

    # the four steps, as methods (PyTorch's names), so that each can be replaced
    def scatter(self, inputs: Sequence[Any], device_ids: Sequence[int], dim: int) -> list:
        return scatter(inputs, device_ids, dim)

    def replicate(self, module: Module, device_ids: Sequence[int]) -> list[Module]:
        return replicate(module, device_ids)

    def parallel_apply(self, replicas: Sequence[Module], inputs: Sequence[tuple],
                       kwargs: Sequence[dict]) -> list:
        """Run each replica on its chunk. The host goes from device to device without
        waiting: each replica's kernels queue on its own device's stream."""
        return [replica(*args, **kw) for replica, args, kw in zip(replicas, inputs, kwargs)]

    def gather(self, outputs: Sequence[Any], output_device: int) -> Any:
        return gather(outputs, output_device, self.dim)


def _check_on(module: Module, index: int) -> None:
    """PyTorch's check: the module lives on ``device_ids[0]`` (it is replicated from there)."""
    for name, t in list(module.named_parameters()) + list(module.named_buffers()):
        if t.device.type != "cuda" or t.device.index != index:
            raise RuntimeError(
                f"module must have its parameters and buffers on device cuda:{index} "
                f"(device_ids[0]) but found one of them ({name}) on device: {t.device}. "
                f"Fix: model.to('cuda:{index}') before wrapping it")

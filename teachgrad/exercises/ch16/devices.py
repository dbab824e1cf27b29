"""Chapter 16, *Queue work on two devices*: the learner writes DataParallel's ``scatter``
(split a batch across devices, in the sizes ``Tensor.chunk`` makes) and ``gather``
(concatenate the replicas' outputs on one device), and the checker runs the engine's
``nn.DataParallel`` with them, on batches, dims and device lists drawn afresh each run.

The expected answers come from the engine at check time: the chunk sizes from
``chunk_sizes``, the outputs and gradients from the same model run without
DataParallel on the cpu (the numpy reference backend).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

import teachgrad as tg
from teachgrad.nn.parallel import data_parallel

from ..core import Feedback, Mismatch, Test, check, expect_true, unseen_rng
from ..withheld import withheld


def _withhold_engine():
    return withheld((data_parallel, "scatter", "data_parallel.scatter"),
                    (data_parallel, "gather", "data_parallel.gather"),
                    (data_parallel, "chunk_sizes", "data_parallel.chunk_sizes"),
                    (data_parallel.DataParallel, "scatter", "DataParallel.scatter"),
                    (data_parallel.DataParallel, "gather", "DataParallel.gather"))


class _LearnersDataParallel(tg.nn.DataParallel):
    """The engine's DataParallel, with the learner's scatter and gather in its two steps."""

    def __init__(self, module, scatter: Callable, gather: Callable, sizes: list[int],
                 **kwargs) -> None:
        super().__init__(module, **kwargs)
        object.__setattr__(self, "_learners", (scatter, gather, sizes))

    def scatter(self, inputs, device_ids, dim):
        chunks = self._learners[0](inputs[0], list(device_ids), dim)
        _check_chunks(chunks, inputs[0], list(device_ids), dim, self._learners[2])
        return [(chunk,) for chunk in chunks]

    def gather(self, outputs, output_device):
        return self._learners[1](list(outputs), output_device, self.dim)


def _check_chunks(chunks, x: tg.Tensor, device_ids: list[int], dim: int,
                  sizes: list[int]) -> None:
    """The learner's chunks against Tensor.chunk's ``sizes``, devices and values."""
    expect_true(isinstance(chunks, (list, tuple)) and all(isinstance(c, tg.Tensor) for c in chunks),
                f"scatter returned {type(chunks).__name__}, not a list of tensors",
                hint="return one tensor per device that gets a chunk")
    got_sizes = [c.shape[dim] if c.ndim > dim else None for c in chunks]
    if got_sizes != sizes:
        raise Mismatch(f"wrong chunk sizes for {x.shape[dim]} rows on {len(device_ids)} devices "
                       f"(dim {dim})", sizes, got_sizes, _sizes_hint(got_sizes, sizes))
    host = x.detach().cpu().numpy()
    start = 0
    for i, (chunk, size) in enumerate(zip(chunks, sizes)):
        want_device = tg.device(f"cuda:{device_ids[i]}")
        if chunk.device != want_device:
            raise Mismatch(f"chunk {i} is on the wrong device", str(want_device), str(chunk.device),
                           "chunk i goes to device_ids[i]: .to(f'cuda:{device_ids[i]}')")
        want = np.take(host, range(start, start + size), axis=dim)
        got = chunk.detach().cpu().numpy()
        if got.shape != want.shape or not np.array_equal(got, want):
            raise Mismatch(f"chunk {i} holds the wrong rows", want, got,
                           "chunk i holds rows start .. start + size of the batch, in order, "
                           "along dim")
        start += size


def _sizes_hint(got: list, want: list) -> str:
    if len(got) == len(want) + 1 or (len(want) < len(got)):
        return ("with few rows, Tensor.chunk gives fewer chunks than devices: each chunk has "
                "ceil(n / k) rows, the last one the rest")
    if sorted(got) == sorted(want):
        return "the big chunks come first, the smaller one last"
    return "every chunk has ceil(n / k) rows (k devices) but the last, which gets what is left"


def _model(seed: int) -> tg.nn.Module:
    tg.manual_seed(seed)
    return tg.nn.Sequential(tg.nn.Linear(4, 3), tg.nn.Tanh(), tg.nn.Linear(3, 2))


def _run_case(scatter: Callable, gather: Callable, shape: tuple, dim: int,
              device_ids: list[int], output_device: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x_host = rng.standard_normal(shape).astype(np.float32)
    weights = rng.standard_normal(shape[:-1] + (2,)).astype(np.float32)
    reference = _model(seed)
    x_ref = tg.tensor(x_host, requires_grad=True)
    (reference(x_ref) * tg.tensor(weights)).sum().backward()

    model = _model(seed).to(f"cuda:{device_ids[0]}")
    sizes = data_parallel.chunk_sizes(shape[dim], len(device_ids))
    dp = _LearnersDataParallel(model, scatter, gather, sizes, device_ids=device_ids,
                               output_device=output_device, dim=dim)
    x = tg.tensor(x_host, device=f"cuda:{device_ids[0]}", requires_grad=True)
    with _withhold_engine():
        out = dp(x)
    expect_true(isinstance(out, tg.Tensor), f"gather returned {type(out).__name__}, not a tensor",
                hint="concatenate the outputs into one tensor")
    if out.device != tg.device(f"cuda:{output_device}"):
        raise Mismatch("the gathered output is on the wrong device", f"cuda:{output_device}",
                       str(out.device), "move every output to output_device before joining them")
    want = reference(tg.tensor(x_host)).detach().numpy()
    got = out.detach().cpu().numpy()
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-5):
        raise Mismatch(f"DataParallel's output differs from the plain model's (dim {dim})",
                       want, got, "join the outputs in the order of the devices, along dim")
    (out * tg.tensor(weights, device=out.device)).sum().backward()
    pairs = [("the input", x, x_ref)] + [
        (f"parameter {name}", p, q) for (name, p), q in zip(model.named_parameters(),
                                                              reference.parameters())]
    for what, p, q in pairs:
        if p.grad is None or not np.allclose(p.grad.cpu().numpy(), q.grad.numpy(),
                                             rtol=1e-4, atol=1e-5):
            raise Mismatch(f"the gradient of {what} differs from the plain model's",
                           q.grad.numpy(), None if p.grad is None else p.grad.cpu().numpy(),
                           "use differentiable operations (indexing, .to, tg.cat): backward "
                           "must reach the original batch and parameters")


def check_scatter_gather(scatter: Callable, gather: Callable) -> Feedback:
    """Exercise 16.4: ``scatter(x, device_ids, dim)`` and ``gather(outputs, output_device, dim)``
    inside the engine's ``nn.DataParallel``."""
    count = tg.cuda.device_count()
    every = list(range(count))

    def case(shape: tuple, dim: int, ids: list[int], out: int, seed: int) -> Test:
        return Test(f"a batch of shape {shape} split along dim {dim} over devices {ids}, "
                    f"gathered on cuda:{out}",
                    lambda: _run_case(scatter, gather, shape, dim, ids, out, seed))

    fixed = [case((6, 4), 0, every, 0, 1), case((7, 4), 0, every, 0, 2),
             case((1, 4), 0, every, 0, 3), case((2, 5, 4), 1, every, every[-1], 4),
             case((3, 4), 0, every[::-1], 0, 5)]
    rng = unseen_rng()
    drawn = []
    for _ in range(3):
        ids = [int(i) for i in rng.permutation(count)[:int(rng.integers(1, count + 1))]]
        dim = int(rng.integers(0, 2))
        rows = int(rng.integers(1, 12))
        shape = (rows, 4) if dim == 0 else (int(rng.integers(1, 4)), rows, 4)
        drawn.append(case(shape, dim, ids, int(rng.choice(ids)), int(rng.integers(1 << 30))))
    return check("16.4", fixed + drawn, candidate=None if scatter is None or gather is None else scatter,
                 solved="DataParallel split each batch in Tensor.chunk's sizes over the "
                        "devices, ran a replica on each, and gathered the same outputs and "
                        "gradients as the plain model.")

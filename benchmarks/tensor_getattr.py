"""What answering missing Tensor methods costs: descriptors (what teachgrad does) vs a
class-level ``__getattr__``, against a Tensor with neither.

    python benchmarks/tensor_getattr.py            # writes results/tensor_getattr.json
    python benchmarks/tensor_getattr.py --quick

``x.stft`` on a teachgrad tensor raises an AttributeError that says teachgrad does
not implement it (``teachgrad/unsupported.py``). Two ways to get there:

* ``descriptors``: one small descriptor per missing ``torch.Tensor`` name, which
  raises when read. Lookups of the attributes a tensor has are untouched.
* ``__getattr__``: one method on the class, called when a lookup fails. CPython
  then routes *every* attribute read of a tensor through a slower path (and the
  specialising interpreter stops caching them).

Three pieces of work, timed in turns in one process (one thread), each in the
three set-ups: ``attributes`` (20,000 reads of ``_array``, ``dtype``, ``device``,
``requires_grad``, ``grad_fn``), ``add`` (400 additions of two 4-element
tensors), ``chain`` (``((x * w + b).tanh() * 2).sum().backward()``, 40 times).
Reported: microseconds per batch, min/median/max, and each set-up's ratio to
``neither``, of medians and of minimums. Target: descriptors at most 1.03x of
``neither`` in the ratio of minimums (on a shared machine the medians follow
the other programs' load, which the header records; the minimum is the code).
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

from common import RESULTS, header, save  # noqa: I001  (first: one thread per library)

import teachgrad as tg
from teachgrad.tensor import Tensor
from teachgrad.unsupported import MissingMethod


def _fail(self: Tensor, name: str) -> Any:
    raise AttributeError(name)


def setups() -> dict[str, Callable[[], None]]:
    """Functions that put the Tensor class into each set-up."""
    stubs = {n: v for n, v in vars(Tensor).items() if isinstance(v, MissingMethod)}

    def neither() -> None:
        for name in stubs:
            if name in vars(Tensor):
                delattr(Tensor, name)
        if "__getattr__" in vars(Tensor):
            del Tensor.__getattr__

    def descriptors() -> None:
        neither()
        for name, stub in stubs.items():
            setattr(Tensor, name, stub)

    def getattr_hook() -> None:
        neither()
        Tensor.__getattr__ = _fail

    return {"neither": neither, "descriptors": descriptors, "__getattr__": getattr_hook}


def works() -> dict[str, Callable[[], None]]:
    a, b = tg.ones(4), tg.ones(4)
    x, w, bias = (tg.randn(4, requires_grad=True) for _ in range(3))

    def attributes() -> None:
        for _ in range(4000):
            a._array, a.dtype, a.device, a.requires_grad, a.grad_fn

    def add() -> None:
        for _ in range(400):
            a + b

    def chain() -> None:
        for _ in range(40):
            ((x * w + bias).tanh() * 2).sum().backward()

    return {"attributes": attributes, "add": add, "chain": chain}


def run(repeats: int) -> dict:
    configs, jobs = setups(), works()
    times: dict = {(j, c): [] for j in jobs for c in configs}
    for _ in range(repeats):
        for config, apply in configs.items():
            apply()
            for job, work in jobs.items():
                work()  # once untimed: caches warm for this set-up
                start = time.perf_counter()
                work()
                times[job, config].append(time.perf_counter() - start)
    configs["descriptors"]()  # leave teachgrad as it ships
    rows = []
    for job in jobs:
        base = statistics.median(times[job, "neither"])
        for config in configs:
            t = times[job, config]
            rows.append({"work": job, "setup": config, "us_min": min(t) * 1e6,
                         "us_median": statistics.median(t) * 1e6, "us_max": max(t) * 1e6,
                         "ratio_to_neither": statistics.median(t) / base,
                         "ratio_of_minimums": min(t) / min(times[job, "neither"])})
    return {"rows": rows, "repeats": repeats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    result = {"header": header(None), **run(15 if args.quick else 61)}
    print(f"{'work':<11}{'set-up':<13}{'min us':>10}{'median us':>11}{'max us':>10}{'ratio':>8}"
          f"{'of mins':>9}")
    for row in result["rows"]:
        print(f"{row['work']:<11}{row['setup']:<13}{row['us_min']:>10.1f}{row['us_median']:>11.1f}"
              f"{row['us_max']:>10.1f}{row['ratio_to_neither']:>8.3f}{row['ratio_of_minimums']:>9.3f}")
    descriptors = [r["ratio_of_minimums"] for r in result["rows"] if r["setup"] == "descriptors"]
    result["target_met"] = max(descriptors) <= 1.03
    save(result, RESULTS / "tensor_getattr.json")


if __name__ == "__main__":
    main()

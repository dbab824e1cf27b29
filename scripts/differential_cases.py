"""The case list of the differential test against PyTorch, and how a case is run.

Each case is a small program written against PyTorch's API, taking the library
as an argument: ``C.T`` is ``torch`` when recording and ``teachgrad`` when
testing, ``C.dev`` the device, ``C.tensor(...)`` makes a tensor there. The same
code runs on both, so any difference is a difference of the libraries.

``scripts/record_torch_fixtures.py`` runs every case with torch and stores the
outputs, the gradients (or the class of the error raised) in
``tests/fixtures/torch_differential.npz``; ``tests/engine/test_differential.py`` runs
them with teachgrad on cpu, the numba CPU backend and cuda, and compares. The cases
themselves are tables in the ``differential_ops*.py`` and ``differential_nn*.py`` modules,
built on this one; ``differential_suite.py`` gathers them. This module never imports torch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

ALL = ("cpu", "numba", "cuda")
CPU_ONLY = ("cpu", "numba")  # (the CUDA simulator is slow: long cases skip it)


def normal_arrays(seed: int) -> Callable[..., np.ndarray]:
    """``r(*shape, dtype=float32)``: standard-normal arrays drawn in turn from one generator
    seeded with ``seed``, so a table's inputs are the same on every run."""
    rng = np.random.default_rng(seed)

    def r(*shape: int, dtype: Any = np.float32) -> np.ndarray:
        return rng.standard_normal(shape).astype(dtype)
    return r


@dataclass
class Case:
    """One program: ``fn(C, *inputs)``; gradients are taken for the inputs in ``grad``."""

    name: str
    fn: Callable[..., Any]
    inputs: tuple = ()
    grad: tuple[int, ...] = ()
    devices: tuple[str, ...] = ALL
    tags: tuple[str, ...] = field(default_factory=tuple)


class Ctx:
    """What a case sees: the library, the device, and a tensor factory on that device."""

    def __init__(self, lib: Any, dev: str) -> None:
        self.T, self.dev = lib, dev
        self.F = lib.nn.functional

    def tensor(self, data: Any, **kw: Any) -> Any:
        return self.T.tensor(data, device=self.dev, **kw)


def make_inputs(C: Ctx, case: Case) -> list:
    """numpy arrays become tensors on the device (requiring grad where asked); the rest as is."""
    out = []
    for i, x in enumerate(case.inputs):
        if isinstance(x, np.ndarray):
            out.append(C.T.tensor(x, device=C.dev, requires_grad=i in case.grad))
        else:
            out.append(x)
    return out


def flatten(result: Any) -> list:
    """The outputs of a case as a flat list (tuples and named tuples unpacked)."""
    if isinstance(result, (tuple, list)):
        return [y for x in result for y in flatten(x)]
    return [result]


def cotangent(shape: tuple, dtype: Any) -> np.ndarray:
    """A fixed, uneven output gradient, so a wrong gradient cannot hide in a plain sum."""
    n = int(np.prod(shape, dtype=np.int64))
    return ((np.arange(n) % 5) - 1.5).reshape(shape).astype(dtype)


def run_case(C: Ctx, case: Case, to_numpy: Callable[[Any], np.ndarray]) -> dict[str, Any]:
    """Run ``case``: ``{"error": class name}`` or ``{"outputs": [...], "grads": {i: array}}``."""
    try:
        xs = make_inputs(C, case)
        outs = flatten(case.fn(C, *xs))
        arrays = [to_numpy(o) if hasattr(o, "shape") and hasattr(o, "dtype") and not
                  isinstance(o, np.ndarray) else np.asarray(o) for o in outs]
        grads = {}
        if case.grad:
            loss = None
            for o in outs:
                if getattr(o, "requires_grad", False):
                    w = C.T.tensor(cotangent(tuple(o.shape), to_numpy(o.detach()).dtype), device=C.dev)
                    term = (o * w).sum()
                    loss = term if loss is None else loss + term
            if loss is not None:
                loss.backward()
            for i in case.grad:
                g = xs[i].grad
                grads[i] = None if g is None else to_numpy(g)
    except Exception as e:  # noqa: BLE001 (the class of the error is the result)
        return {"error": type(e).__name__, "message": str(e)[:200]}
    return {"outputs": arrays, "grads": grads}


# -- building case lists ----------------------------------------------------------------------


class CaseList(list):
    """A list of cases with decorators to add to it (names must be unique)."""

    def case(self, name: str, inputs: tuple = (), grad: tuple = (), devices: tuple = ALL):
        def register(fn: Callable) -> Callable:
            self.append(Case(name, fn, inputs, grad, devices))
            return fn
        return register

    def table(self, prefix: str, fns: dict[str, Callable], inputs: tuple = (), grad: tuple = (),
              devices: tuple = ALL) -> None:
        for key, fn in fns.items():
            self.append(Case(f"{prefix}/{key}", fn, inputs, grad, devices))

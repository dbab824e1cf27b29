"""One thing to time (a :class:`Case`), its inputs, and how to check its answer.

Every operation is timed on inputs made once per size and shared by all
backends, and its output is checked against a float64 reference, so a fast
but wrong kernel cannot pass unnoticed. Inputs are random numbers, never
zeros: zeros hide unwritten outputs and can even run faster than real data.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .harness import HostTimer, Timer


@dataclass
class Case:
    """One operation at one size on one backend, ready to be timed."""

    op: str
    backend: str
    kernel: str
    device: str
    dtype: np.dtype
    size: int
    shape: list[list[int]]
    work: Callable[[], object]  #: the call that is timed
    output: Callable[[], np.ndarray]  #: the result of the last call, as a host array
    make_timer: Callable[[], Timer] = HostTimer
    make_first_call_timer: Callable[[], Timer] = HostTimer
    ceiling: str | None = None  #: "op/backend/kernel" of the record this one is compared with
    is_ceiling: bool = False
    simulated: bool = False
    #: Python code whose last line prints the seconds of the first call, run in a fresh
    #: process with an empty numba cache (``cold_compile_s``); None: nothing compiles
    cold_start: str | None = None
    #: threads the code runs on (CPU: 1, numba's count for a parallel loop, the BLAS's for
    #: np.matmul); None on a GPU or when not known
    threads: int | None = None

    @property
    def key(self) -> str:
        return f"{self.op}/{self.backend}/{self.kernel}"


def traffic(op: str, size: int, dtype: np.dtype) -> tuple[int, int]:
    """``(bytes, flops)``: the fewest bytes the operation moves, and its arithmetic.

    ``add`` reads two arrays and writes one; ``sum`` reads one; ``copy`` reads
    and writes one; an ``n x n`` matmul reads A and B and writes C once and
    does ``n^3`` multiply-adds (2 flops each).
    """
    item = np.dtype(dtype).itemsize
    if op == "add":
        return 3 * size * item, size
    if op == "sum":
        return size * item, max(size - 1, 0)
    if op == "copy":
        return 2 * size * item, 0
    if op == "matmul":
        return 3 * size * size * item, 2 * size ** 3
    raise ValueError(f"unknown benchmark op {op!r}")


def shapes(op: str, size: int) -> list[list[int]]:
    if op == "matmul":
        return [[size, size], [size, size]]
    if op == "add":
        return [[size], [size]]
    return [[size]]


def make_inputs(op: str, size: int, dtype: np.dtype, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Random host inputs for ``op`` at ``size``."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if op == "sum":
        # positive numbers: a sum of signed ones cancels, and its relative error says nothing
        return (rng.random(size, dtype=dtype),)
    return tuple(rng.standard_normal(tuple(shape), dtype=dtype) for shape in shapes(op, size))


def reference(op: str, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
    """The right answer, computed in float64."""
    wide = [x.astype(np.float64) for x in inputs]
    if op == "add":
        return wide[0] + wide[1]
    if op == "sum":
        return np.asarray([wide[0].sum()])
    if op == "copy":
        return wide[0]
    return wide[0] @ wide[1]


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """``|out - ref| / |ref|`` (Frobenius norms); NaN anywhere gives NaN."""
    out = np.asarray(out, dtype=np.float64).reshape(ref.shape)
    scale = float(np.linalg.norm(ref))
    return float(np.linalg.norm(out - ref)) / (scale if scale else 1.0)


#: Largest relative error accepted per dtype (float32 sums of 2^28 numbers stay well below).
TOLERANCE = {"float32": 1e-4, "float64": 1e-10}


def cold_compile_s(code: str, timeout_s: float = 900) -> float:
    """Seconds of a first call compiled from nothing: ``code`` runs in a new Python process
    with an empty numba cache folder (so nothing is loaded from an earlier compile) and
    prints the time of the call it makes; imports are outside that time."""
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    package_root = str(Path(__file__).resolve().parents[2])
    with tempfile.TemporaryDirectory(prefix="teachgrad-cold-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache,
               "PYTHONPATH": os.pathsep.join(filter(None, [package_root,
                                                           os.environ.get("PYTHONPATH")]))}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"the cold-start run failed: {done.stderr.strip()[-500:]}")
    return float(done.stdout.split()[-1])

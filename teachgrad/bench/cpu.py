"""CPU cases: numpy (the reference) and the numba backend's hand-written loops.

The bare cases write into preallocated outputs (``np.add(a, b, out=out)`` and
the same for the loops), so their timings compare the loops themselves, not
memory allocation; the numba ones call the loop functions of
:mod:`teachgrad.backends.numba_loops` and :mod:`teachgrad.backends.numba_matmul`
directly. The ``backend.*`` cases go through each backend's own method, as a
tensor operation does: checks, dispatch and a fresh output included.
"""
from __future__ import annotations

import numpy as np

from .cases import Case, shapes
from .system import blas_threads, numba_threads

#: The numba matmul kernels, in the order a chapter walks through them.
NUMBA_MATMUL_KERNELS = ("naive", "loop_order", "blocked")


def numba_loop_threads(op: str, size: int) -> int:
    """Threads the numba backend's loop for ``op`` at ``size`` runs on: numba's count when
    it takes the parallel build (the backend's own rule), else 1."""
    from ..backends import numba_loops, numba_matmul

    parallel = (numba_matmul.runs_parallel(size * size, size) if op == "matmul"
                else numba_loops.parallel_for(size))
    return numba_threads() if parallel else 1


def numpy_threads(op: str) -> int | None:
    """numpy's elementwise calls and reductions run on one thread; matmul on the BLAS's."""
    return blas_threads() if op == "matmul" else 1


def numpy_cases(op: str, size: int, inputs: tuple[np.ndarray, ...]) -> list[Case]:
    """numpy doing ``op``: the reference every CPU record's ``ratio_to_ceiling`` is against."""
    dtype = inputs[0].dtype
    common = dict(backend="numpy", device="cpu", dtype=dtype, size=size, shape=shapes(op, size),
                  threads=numpy_threads(op))
    if op == "add":
        a, b = inputs
        out = np.empty_like(a)
        return [Case(op, kernel="np.add", work=lambda: np.add(a, b, out=out), output=lambda: out,
                     is_ceiling=True, **common)]
    if op == "sum":
        (x,) = inputs
        out = np.empty(1, dtype=dtype)

        def numpy_sum() -> None:
            out[0] = np.sum(x)

        return [Case(op, kernel="np.sum", work=numpy_sum, output=lambda: out, is_ceiling=True, **common)]
    if op == "copy":
        (x,) = inputs
        out = np.empty_like(x)
        # numpy's copy at this size: a reference line (the bandwidth ceiling is the triad)
        return [Case(op, kernel="np.copyto", work=lambda: np.copyto(out, x), output=lambda: out, **common)]
    if op == "matmul":
        a, b = inputs
        out = np.empty_like(a)
        return [Case(op, kernel="np.matmul", work=lambda: np.matmul(a, b, out=out), output=lambda: out,
                     is_ceiling=True, **common)]
    raise ValueError(f"unknown benchmark op {op!r}")


def _cold_start(setup: str, call: str, op: str, size: int, dtype: np.dtype) -> str:
    """Code that makes inputs like the case's and times ``call`` once (see ``cold_compile_s``).

    Compiling does not depend on the size, only on the dtype and on whether the
    parallel build is chosen, so the inputs are small unless the size picks it."""
    from ..backends import numba_loops

    n = size if numba_loops.parallel_for(size) or op == "matmul" else min(size, 64)
    return "\n".join([
        "import time", "import numpy as np",
        "from teachgrad.backends import numba_cpu, numba_loops, numba_matmul",
        "from teachgrad.bench.cases import make_inputs",
        f"inputs = make_inputs({op!r}, {n}, np.dtype({dtype.name!r}))",
        setup, "started = time.perf_counter()", call,
        "print(time.perf_counter() - started)"])


def backend_case(backend_name: str, op: str, size: int, inputs: tuple[np.ndarray, ...],
                 ceiling: str) -> Case | None:
    """``op`` through a backend's own method (``backend.binary("add", a, b)``, ...): what a
    tensor operation pays, its checks and a fresh output array included."""
    from ..backends import numba_cpu, numpy_backend

    backend = (numba_cpu.NumbaCPUBackend() if backend_name == "numba"
               else numpy_backend.NumpyBackend())
    if op == "add":
        a, b = inputs
        method, call = "binary", lambda: backend.binary("add", a, b)
    elif op == "sum":
        (x,) = inputs
        method, call = "reduce", lambda: backend.reduce("sum", x, None, False)
    elif op == "matmul":
        a, b = inputs
        method, call = "matmul", lambda: backend.matmul(a, b)
    else:
        return None
    last: list[np.ndarray] = [np.empty(0, dtype=inputs[0].dtype)]

    def work() -> None:
        last[0] = call()

    arguments = {"add": '"add", *inputs', "sum": '"sum", inputs[0], None, False',
                 "matmul": "*inputs"}[op]
    cold = None if backend_name != "numba" else _cold_start(
        "backend = numba_cpu.NumbaCPUBackend()", f"backend.{method}({arguments})",
        op, size, inputs[0].dtype)
    threads = numba_loop_threads(op, size) if backend_name == "numba" else numpy_threads(op)
    return Case(op, kernel=f"backend.{method}", work=work, output=lambda: last[0],
                ceiling=ceiling, backend=backend_name, device="cpu", dtype=inputs[0].dtype,
                size=size, shape=shapes(op, size), cold_start=cold, threads=threads)


def numba_cases(op: str, size: int, inputs: tuple[np.ndarray, ...],
                matmul_kernels: tuple[str, ...] = NUMBA_MATMUL_KERNELS) -> list[Case]:
    """The numba backend's loops doing ``op``, each compared with numpy."""
    from ..backends import numba_loops, numba_matmul

    dtype = inputs[0].dtype
    common = dict(backend="numba", device="cpu", dtype=dtype, size=size, shape=shapes(op, size),
                  threads=numba_loop_threads(op, size))
    if op == "add":
        a, b = inputs
        out = np.empty_like(a)
        loop = numba_loops.zip_loop(numba_loops.ADD, numba_loops.CONTIGUOUS,
                                    numba_loops.CONTIGUOUS,
                                    numba_loops.parallel_for(size))
        shape = np.array(a.shape, dtype=np.int64)
        no_strides = numba_loops.NO_STRIDES  # both inputs are contiguous: read straight

        def numba_add() -> None:
            loop(out, a, no_strides, b, no_strides, shape)

        cold = _cold_start(
            "a, b = inputs\nout = np.empty_like(a)\n"
            "loop = numba_loops.zip_loop(numba_loops.ADD, numba_loops.CONTIGUOUS,"
            " numba_loops.CONTIGUOUS,"
            " numba_loops.parallel_for(a.size))\nshape = np.array(a.shape, dtype=np.int64)\n"
            "none = numba_loops.NO_STRIDES",
            "loop(out, a, none, b, none, shape)", op, size, dtype)
        return [Case(op, kernel="zip_loop", work=numba_add, output=lambda: out,
                     ceiling="add/numpy/np.add", cold_start=cold, **common)]
    if op == "sum":
        table = inputs[0].reshape(1, -1)
        out = np.empty(1, dtype=dtype)
        parallel = numba_loops.parallel_for(size)
        loop = numba_loops.reduce_loop(numba_loops.SUM, parallel)
        chunk = numba_loops.chunk_size(*table.shape, parallel)
        cold = _cold_start(
            "table = inputs[0].reshape(1, -1)\nout = np.empty(1, dtype=table.dtype)\n"
            "parallel = numba_loops.parallel_for(table.size)\n"
            "loop = numba_loops.reduce_loop(numba_loops.SUM, parallel)\n"
            "chunk = numba_loops.chunk_size(*table.shape, parallel)",
            "loop(table, chunk, out)", op, size, dtype)
        return [Case(op, kernel="reduce_loop", work=lambda: loop(table, chunk, out),
                     output=lambda: out, ceiling="sum/numpy/np.sum", cold_start=cold, **common)]
    if op == "matmul":
        A, B = (x.reshape(1, size, size) for x in inputs)
        cases = []
        for kernel in matmul_kernels:
            C = np.empty_like(A)
            cold = _cold_start(f"A, B = (x.reshape(1, {size}, {size}) for x in inputs)\n"
                               "C = np.empty_like(A)",
                               f"numba_matmul.run_kernel({kernel!r}, A, B, C)", op, size, dtype)
            cases.append(Case(op, kernel=kernel, output=lambda C=C: C[0], cold_start=cold,
                              work=lambda kernel=kernel, C=C: numba_matmul.run_kernel(kernel, A, B, C),
                              ceiling="matmul/numpy/np.matmul", **common))
        return cases
    return []  # nothing hand-written for this op (copy)

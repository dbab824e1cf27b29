"""Compile every kernel for a real GPU, without one: ``python -m teachgrad.kernels.compile_check``.

The CUDA simulator runs kernels as plain Python, so it never type-checks them
the way numba does for a GPU: a kernel can pass every simulator test and still
fail to compile on a real device. This script compiles each kernel factory's
kernels to PTX (for compute capability 9.0 by default) with the argument types
the launchers pass. It needs numba's CUDA toolchain (NVVM and NVRTC libraries)
but no GPU, and it must run without the simulator, so it sets
``TEACHGRAD_CUDA=gpu`` before importing teachgrad.
"""
from __future__ import annotations

import os
import sys
import time

os.environ["TEACHGRAD_CUDA"] = "gpu"
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"

import numpy as np  # noqa: E402
from numba import cuda, from_dtype, types  # noqa: E402

from teachgrad.kernels import elementwise, indexing, matmul, ops, race, reduce  # noqa: E402

_INT = types.int64


def _array(dtype, ndim: int) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


def _layout(ndim: int):
    return (_INT, types.UniTuple(_INT, ndim))  # offset, strides


def _operand(kind: str, dtype, ndim: int):
    value = from_dtype(np.dtype(dtype)) if kind == "scalar" else _array(dtype, 1)
    return (value, *_layout(ndim))


def _cases():
    """(name, kernel, argument types) for every kernel the launchers can build."""
    nd = 2
    shape = types.UniTuple(_INT, nd)
    owners = _array(np.int32, 2)
    for dtype in (np.float32, np.float64):
        for op in ops.UNARY:
            for kind in ("contiguous", "strided"):
                for rec in (False, True):
                    yield (f"map {op} {kind} {np.dtype(dtype)} record={rec}",
                           elementwise.map_kernel(op, kind, rec),
                           (_array(dtype, 1), _INT, *_operand(kind, dtype, nd), shape, owners))
        for op in ops.BINARY:
            out = np.bool_ if op in ("eq", "ne", "lt", "le", "gt", "ge") else dtype
            for a_kind, b_kind in (("strided", "strided"), ("contiguous", "scalar"),
                                   ("scalar", "contiguous")):
                yield (f"zip {op} {a_kind}/{b_kind} {np.dtype(dtype)}",
                       elementwise.zip_kernel(op, a_kind, b_kind, False),
                       (_array(out, 1), _INT, *_operand(a_kind, dtype, nd),
                        *_operand(b_kind, dtype, nd), shape, owners))
        yield (f"where {np.dtype(dtype)}", elementwise.where_kernel("strided", "contiguous", "scalar"),
               (_array(dtype, 1), _INT, *_operand("strided", np.bool_, nd),
                *_operand("contiguous", dtype, nd), *_operand("scalar", dtype, nd), shape))
        for op in ("sum", "max", "min"):
            yield (f"reduce {op} {np.dtype(dtype)}", reduce.reduce_kernel(op, np.dtype(dtype), 256),
                   (_array(dtype, 2), _array(dtype, 2), _INT, _INT))
        for op in ("argmax", "argmin"):
            yield (f"{op} {np.dtype(dtype)}", reduce.arg_reduce_kernel(op, np.dtype(dtype), 256),
                   (_array(dtype, 2), _array(np.int64, 1), _INT, _INT))
        mats = (_array(dtype, 3),) * 3
        counts = _array(np.int64, 1)
        for rec in (False, True):
            yield (f"naive matmul {np.dtype(dtype)} record={rec}",
                   matmul.naive_kernel(np.dtype(dtype), rec), (*mats, counts))
            yield (f"tiled matmul {np.dtype(dtype)} record={rec}",
                   matmul.tiled_kernel(np.dtype(dtype), 16, rec),
                   (*mats, counts, _array(np.int32, 6), _array(np.int32, 6)))
            yield (f"register matmul {np.dtype(dtype)} record={rec}",
                   matmul.register_kernel(np.dtype(dtype), (64, 64, 16), (4, 4), rec),
                   (*mats, counts))
        plan = (shape, shape, _INT, _INT, _array(np.int64, 2),
                types.UniTuple(_INT, 1), types.UniTuple(_INT, 1))
        yield (f"gather {np.dtype(dtype)}", indexing.gather_kernel(),
               (_array(dtype, 1), _INT, _array(dtype, 1), *plan))
        for acc in (False, True):
            yield (f"scatter accumulate={acc} {np.dtype(dtype)}", indexing.scatter_kernel(acc),
                   (_array(dtype, 1), _INT, _array(dtype, 1), *plan))
    for src, dst in ((np.float32, np.bool_), (np.float64, np.int64), (np.bool_, np.float32),
                     (np.int64, np.float64)):
        yield (f"copy {np.dtype(src)} -> {np.dtype(dst)}", elementwise.copy_kernel("strided"),
               (_array(dst, 1), *_layout(nd), _INT, *_operand("strided", src, nd), shape))
    yield ("fill", elementwise.copy_kernel("scalar"),
           (_array(np.float32, 1), *_layout(nd), _INT, *_operand("scalar", np.float32, nd), shape))
    # (recording reuses the elementwise and matmul kernels: nothing extra to compile)
    yield from race.compile_cases()


class _TargetDevice:
    """Stands in for the current device: device functions compile for its capability."""

    def __init__(self, cc: tuple[int, int]) -> None:
        self.compute_capability = cc


def main(cc: tuple[int, int] = (9, 0)) -> int:
    from numba.cuda import dispatcher

    # with no GPU there is no current device to ask which architecture to compile for
    dispatcher.get_current_device = lambda: _TargetDevice(cc)
    failures = 0
    start = time.perf_counter()
    cases = list(_cases())
    for name, kernel, argtypes in cases:
        try:
            cuda.compile_ptx(kernel.py_func, argtypes, cc=cc)
        except Exception as error:  # report every failure, not just the first
            failures += 1
            print(f"FAIL {name}: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
    print(f"{len(cases) - failures}/{len(cases)} kernels compiled for sm_{cc[0]}{cc[1]} "
          f"in {time.perf_counter() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

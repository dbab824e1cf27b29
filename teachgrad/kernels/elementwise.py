"""Elementwise kernels: one loop, any function, any layout, any number of elements.

**The grid-stride loop.** A launch starts ``blocks * threads_per_block``
threads. Thread number ``start = blockIdx.x * blockDim.x + threadIdx.x`` takes
element ``start``, then ``start + stride``, ``start + 2*stride``, ... where
``stride`` is the number of threads in the whole grid. So any grid covers any
number of elements: with fewer threads than elements each thread makes several
*passes*; with more, the extra threads find nothing to do. Neighbouring
threads touch neighbouring elements on every pass, which is what makes their
memory reads coalesce on a GPU. numpy spec of who does what::

    global_thread = np.arange(n) % (blocks * threads_per_block)
    block, thread = global_thread // threads_per_block, global_thread % threads_per_block
    pass_ = np.arange(n) // (blocks * threads_per_block)

**Reading through strides.** Inputs are :class:`~teachgrad.kernels.strided.StridedArray`
views, so a transposed or broadcast input is read in place (see
:func:`~teachgrad.kernels.strided.strided_position`); a Python scalar is
passed as a kernel argument, never uploaded.

**One factory, many kernels.** :func:`map_kernel`, :func:`zip_kernel` and
:func:`where_kernel` build a kernel for a given scalar function (from
:mod:`teachgrad.kernels.ops`) and input layouts; numba compiles each once per
dtype. With ``record=True`` the *same* loop also writes, for every element,
which block, thread and pass handled it (the data the thread map draws).

Kernel-level API (``out`` is a fresh contiguous StridedArray; inputs already
have ``out``'s shape, e.g. through :func:`broadcast_view`)::

    unary(op, out, x, config=None, owners=None)
    binary(op, out, a, b, config=None, owners=None)       # a or b may be a scalar
    where(out, cond, a, b, config=None)
    copy(dst, src, config=None)       # dst may be a strided view; src a view or a scalar
    launch_config(n) -> (blocks, threads_per_block)

``owners``, when given, is an int32 device array of shape ``(n, 3)`` that
receives ``[block, thread, pass]`` for every element.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from .. import _cuda_setup
from . import ops
from .launch import device_limits, launch
from .strided import StridedArray, new_array, strided_position

#: Threads per block and most blocks for elementwise launches. Small in the
#: simulator, where every thread is an OS thread.
THREADS_PER_BLOCK = 32 if _cuda_setup.is_simulated() else 256
MAX_BLOCKS = 2 if _cuda_setup.is_simulated() else None  # None: 32 per multiprocessor


def launch_config(n: int) -> tuple[int, int]:
    """``(blocks, threads_per_block)`` for ``n`` elements: enough blocks, but capped."""
    threads = THREADS_PER_BLOCK
    cap = MAX_BLOCKS or 32 * device_limits().multiprocessors
    blocks = max(1, min(cap, (n + threads - 1) // threads))
    return blocks, threads


# -- how a thread reads element i of an input ----------------------------------------

@cuda.jit(device=True)
def read_contiguous(values, i, offset, strides, shape):
    return values[offset + i]


@cuda.jit(device=True)
def read_strided(values, i, offset, strides, shape):
    return values[strided_position(i, shape, strides, offset)]


@cuda.jit(device=True)
def read_scalar(value, i, offset, strides, shape):
    return value  # the scalar came as a kernel argument


_READERS = {"contiguous": read_contiguous, "strided": read_strided, "scalar": read_scalar}


@cuda.jit(device=True)
def record_owner(owners, i, pass_number):
    owners[i, 0] = cuda.blockIdx.x
    owners[i, 1] = cuda.threadIdx.x
    owners[i, 2] = pass_number


# -- the kernels -------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def map_kernel(op: str, x_kind: str = "strided", record: bool = False):
    """``out[i] = op(x[i])`` with a grid-stride loop."""
    fn, read_x = ops.UNARY[op], _READERS[x_kind]

    def grid_stride_map(out, n, x, x_offset, x_strides, shape, owners):
        start = cuda.grid(1)       # this thread's first element
        stride = cuda.gridsize(1)  # threads in the whole grid
        pass_number = 0
        for i in range(start, n, stride):
            out[i] = fn(read_x(x, i, x_offset, x_strides, shape))
            if record:
                record_owner(owners, i, pass_number)
            pass_number += 1

    return cuda.jit(grid_stride_map)


@functools.lru_cache(maxsize=None)
def zip_kernel(op: str, a_kind: str = "strided", b_kind: str = "strided", record: bool = False):
    """``out[i] = op(a[i], b[i])`` with a grid-stride loop."""
    fn, read_a, read_b = ops.BINARY[op], _READERS[a_kind], _READERS[b_kind]

    def grid_stride_zip(out, n, a, a_offset, a_strides, b, b_offset, b_strides, shape, owners):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        pass_number = 0
        for i in range(start, n, stride):
            out[i] = fn(read_a(a, i, a_offset, a_strides, shape),
                        read_b(b, i, b_offset, b_strides, shape))
            if record:
                record_owner(owners, i, pass_number)
            pass_number += 1

    return cuda.jit(grid_stride_zip)


@functools.lru_cache(maxsize=None)
def where_kernel(cond_kind: str, a_kind: str, b_kind: str):
    """``out[i] = a[i] if cond[i] else b[i]``."""
    read_c, read_a, read_b = _READERS[cond_kind], _READERS[a_kind], _READERS[b_kind]

    def grid_stride_where(out, n, c, c_offset, c_strides, a, a_offset, a_strides,
                          b, b_offset, b_strides, shape):
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            if read_c(c, i, c_offset, c_strides, shape):
                out[i] = read_a(a, i, a_offset, a_strides, shape)
            else:
                out[i] = read_b(b, i, b_offset, b_strides, shape)

    return cuda.jit(grid_stride_where)


@functools.lru_cache(maxsize=None)
def copy_kernel(src_kind: str):
    """``dst[i] = src[i]`` where ``dst`` may itself be a strided view (e.g. ``x[::2] = y``).

    The store converts to ``dst``'s dtype, so this is also ``astype``; a scalar
    source makes it ``fill``.
    """
    read_src = _READERS[src_kind]

    def grid_stride_copy(dst, dst_offset, dst_strides, n, src, src_offset, src_strides, shape):
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            position = strided_position(i, shape, dst_strides, dst_offset)
            dst[position] = read_src(src, i, src_offset, src_strides, shape)

    return cuda.jit(grid_stride_copy)


# -- launchers ------------------------------------------------------------------

_no_owners = None


def _dummy_owners():
    """A 1-row stand-in for ``owners`` when not recording (the kernel never touches it)."""
    global _no_owners
    if _no_owners is None:
        _no_owners = cuda.device_array((1, 3), dtype=np.int32)
    return _no_owners


def _operand(x, dtype, out: StridedArray):
    """``(kind, values, offset, strides)`` for one kernel input of ``out``'s shape."""
    if isinstance(x, StridedArray):
        if x.shape != out.shape:
            raise ValueError(f"operand of shape {x.shape} given for an output of shape {out.shape}: "
                             "broadcast it first (broadcast_view)")
        offset, strides, _ = x.kernel_layout()
        kind = "contiguous" if x.is_contiguous() else "strided"
        return kind, x.buffer, offset, strides
    # a Python scalar: pass it as a typed kernel argument, never as an uploaded array
    return "scalar", _typed_scalar(x, dtype), 0, out.kernel_layout()[1]


def _typed_scalar(x, dtype):
    """The scalar in the array's dtype when that loses nothing (float32 math stays float32)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" or isinstance(x, (bool, np.bool_)) or (dtype.kind in "iu" and float(x).is_integer()):
        return dtype.type(x)
    return np.float64(x)  # e.g. int_array < 0.5 must compare with 0.5, not 0


def _check_out(out: StridedArray) -> None:
    if not (out.is_contiguous() and out.offset == 0):
        raise ValueError("elementwise kernels write a fresh contiguous output")


def unary(op: str, out: StridedArray, x: StridedArray, config=None, owners=None) -> None:
    """``out = op(x)`` elementwise."""
    _check_out(out)
    n = out.size
    if n == 0:
        return
    kind, values, offset, strides = _operand(x, x.dtype, out)
    kernel = map_kernel(op, kind, owners is not None)
    blocks, threads = config or launch_config(n)
    launch(kernel, blocks, threads, out.buffer, n, values, offset, strides,
           out.kernel_layout()[2], owners if owners is not None else _dummy_owners())


def binary(op: str, out: StridedArray, a, b, config=None, owners=None) -> None:
    """``out = op(a, b)`` elementwise; ``a`` or ``b`` may be a Python scalar."""
    _check_out(out)
    n = out.size
    if n == 0:
        return
    dtype = a.dtype if isinstance(a, StridedArray) else b.dtype
    a_kind, a_values, a_offset, a_strides = _operand(a, dtype, out)
    b_kind, b_values, b_offset, b_strides = _operand(b, dtype, out)
    kernel = zip_kernel(op, a_kind, b_kind, owners is not None)
    blocks, threads = config or launch_config(n)
    launch(kernel, blocks, threads, out.buffer, n, a_values, a_offset, a_strides,
           b_values, b_offset, b_strides, out.kernel_layout()[2],
           owners if owners is not None else _dummy_owners())


def where(out: StridedArray, cond: StridedArray, a, b, config=None) -> None:
    """``out = a if cond else b`` elementwise; ``a`` or ``b`` may be a Python scalar."""
    _check_out(out)
    n = out.size
    if n == 0:
        return
    c_parts = _operand(cond, cond.dtype, out)
    a_parts = _operand(a, out.dtype, out)
    b_parts = _operand(b, out.dtype, out)
    kernel = where_kernel(c_parts[0], a_parts[0], b_parts[0])
    blocks, threads = config or launch_config(n)
    launch(kernel, blocks, threads, out.buffer, n, *c_parts[1:], *a_parts[1:], *b_parts[1:],
           out.kernel_layout()[2])


def copy(dst: StridedArray, src, config=None) -> None:
    """``dst[...] = src`` elementwise, converting to ``dst``'s dtype; ``src`` may be a scalar."""
    n = dst.size
    if n == 0:
        return
    kind, values, offset, strides = _operand(src, dst.dtype, dst)
    dst_offset, dst_strides, shape = dst.kernel_layout()
    blocks, threads = config or launch_config(n)
    launch(copy_kernel(kind), blocks, threads, dst.buffer, dst_offset, dst_strides, n,
           values, offset, strides, shape)


def contiguous(x: StridedArray) -> StridedArray:
    """``x`` itself when its elements already sit row-major, back to back; else a dense copy
    gathered on the device by :func:`copy`."""
    if x.is_contiguous():
        return x
    dense = new_array(x.shape, x.dtype)
    copy(dense, x)
    return dense

"""The numba CPU backend's loops: what happens to one element, and the loops around it.

:class:`~teachgrad.backends.numba_cpu.NumbaCPUBackend` calls these; its fast lane
(:mod:`teachgrad.backends.numba_flat`) and its matmuls
(:mod:`teachgrad.backends.numba_matmul`) are built from the same element functions
and the same :func:`parallel_for` rule, so they import this module, never the backend.

Each operation is a small integer code; ``apply_unary``/``apply_binary`` say what one
element becomes, ``read`` how an element of a broadcast or transposed input is found,
and ``map_loop``, ``zip_loop``, ``where_loop`` and ``reduce_loop`` build one compiled
loop per operation, input kinds and core count (``prange`` for many cores, ``range``
for one: see :data:`GRAIN`).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import get_num_threads, njit, prange
from numpy.lib.stride_tricks import as_strided

from .base import Array, Scalar

#: Dtypes the hand-written loops handle; anything else takes numpy's path.
LOOP_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64))

# Each operation is a small integer code. A loop is compiled for one code, and
# numba treats the code as a constant: the compiler deletes every other branch
# of ``apply_unary``/``apply_binary``, so the loop runs just the one operation.
NEG, EXP, LOG, SQRT, ABS, SIN, COS, TANH, SIGMOID, RELU, SIGN, STEP, ERF, LOG1P, EXPM1 = range(15)
UNARY_CODES = {
    "neg": NEG, "exp": EXP, "log": LOG, "sqrt": SQRT, "abs": ABS, "sin": SIN, "cos": COS,
    "tanh": TANH, "sigmoid": SIGMOID, "relu": RELU, "sign": SIGN, "step": STEP,
    "erf": ERF, "log1p": LOG1P, "expm1": EXPM1,
}
ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM, EQ, NE, LT, LE, GT, GE = range(13)
BINARY_CODES = {
    "add": ADD, "sub": SUB, "mul": MUL, "div": DIV, "pow": POW, "maximum": MAXIMUM,
    "minimum": MINIMUM, "eq": EQ, "ne": NE, "lt": LT, "le": LE, "gt": GT, "ge": GE,
}
SUM, MAX, MIN = range(3)
REDUCE_CODES = {"sum": SUM, "max": MAX, "min": MIN}

# error_model="numpy": 1/0 gives inf and 0/0 nan, as in numpy, instead of raising.
_SCALAR = dict(cache=True, error_model="numpy")

#: Below this many elements a loop runs on one core: waking the others costs a
#: few microseconds (milliseconds on a busy machine), more than they would save.
#: PyTorch's CPU loops use the same "grain size".
GRAIN = 32768


# -- what happens to one element ---------------------------------------------------

@njit(**_SCALAR)
def apply_unary(op, x):
    """``op`` applied to one number (numpy's answers at the edges: log(0) = -inf, ...)."""
    if op == NEG:
        return -x
    if op == EXP:
        return math.exp(x)
    if op == LOG:
        return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)
    if op == SQRT:
        return math.sqrt(x) if x >= 0 else math.nan
    if op == ABS:
        return abs(x)
    if op == SIN:
        return math.sin(x)
    if op == COS:
        return math.cos(x)
    if op == TANH:
        return math.tanh(x)
    if op == SIGMOID:
        e = math.exp(-abs(x))  # never overflows: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below
        return 1.0 / (1.0 + e) if x >= 0 else e / (1.0 + e)
    if op == RELU:
        return x if (x > 0 or x != x) else 0  # x != x only for NaN, which passes through
    if op == SIGN:
        return 1 if x > 0 else (-1 if x < 0 else x)  # 0 and NaN are their own sign
    if op == ERF:
        return math.erf(x)
    if op == LOG1P:
        return math.log1p(x) if x > -1 else (-math.inf if x == -1 else math.nan)
    if op == EXPM1:
        return math.expm1(x)
    return 1 if x > 0 else 0  # STEP


@njit(**_SCALAR)
def apply_binary(op, a, b):
    """``op`` applied to two numbers; comparisons give True/False."""
    if op == ADD:
        return a + b
    if op == SUB:
        return a - b
    if op == MUL:
        return a * b
    if op == DIV:
        return a / b
    if op == POW:
        return a ** b
    if op == MAXIMUM:
        return a if (a > b or a != a) else b  # NaN wins, as in numpy
    if op == MINIMUM:
        return a if (a < b or a != a) else b
    if op == EQ:
        return a == b
    if op == NE:
        return a != b
    if op == LT:
        return a < b
    if op == LE:
        return a <= b
    if op == GT:
        return a > b
    return a >= b  # GE


# `reassoc` lets the compiler add in any order, so a long sum keeps several
# running totals in one vector register (the last bits can differ from a
# left-to-right sum, as numpy's own pairwise sum does).
@njit(cache=True, fastmath={"reassoc"})
def combine(op, acc, x):
    """Fold one more value into a running sum, max or min."""
    if op == SUM:
        return acc + x
    if op == MAX:
        return acc if (acc > x or acc != acc) else x  # a NaN, once seen, stays
    return acc if (acc < x or acc != acc) else x


# -- reading an input as if it had the output's shape ------------------------------

CONTIGUOUS, STRIDED, SCALAR = range(3)


@njit(cache=True)
def strided_position(i, shape, strides):
    """Where the ``i``-th element (row-major order) of ``shape`` sits in a flat buffer."""
    position = 0
    rest = np.int64(i)  # (prange counts in unsigned ints; mixing them with signed gives floats)
    for axis in range(len(shape) - 1, -1, -1):  # the last axis varies fastest
        coord = rest % shape[axis]
        rest = rest // shape[axis]
        position += coord * strides[axis]  # a stride of 0 re-reads a broadcast element
    return position


@njit(cache=True)
def read(kind, values, i, strides, shape):
    """Element ``i`` of an input: straight, through strides, or the one scalar."""
    if kind == CONTIGUOUS:
        return values[i]
    if kind == SCALAR:
        return values[0]
    return values[strided_position(i, shape, strides)]


# -- the loops (one compiled version per operation, input kinds and parallel or not) ---
#
# ``loop_range`` is ``prange`` (numba splits the iterations over the cores) or
# plain ``range`` (one core, for small work: see GRAIN). Same loop, two builds.

def _compile(loop, parallel: bool, **options):
    return njit(parallel=parallel, cache=True, **options)(loop)


@functools.lru_cache(maxsize=None)
def map_loop(op: int, x_kind: int, parallel: bool = True):
    loop_range = prange if parallel else range

    def map_elements(out, x, x_strides, shape):
        for i in loop_range(out.size):  # with prange, each core takes a share of the i's
            out[i] = apply_unary(op, read(x_kind, x, i, x_strides, shape))

    return _compile(map_elements, parallel, error_model="numpy")


@functools.lru_cache(maxsize=None)
def zip_loop(op: int, a_kind: int, b_kind: int, parallel: bool = True):
    loop_range = prange if parallel else range

    def zip_elements(out, a, a_strides, b, b_strides, shape):
        for i in loop_range(out.size):
            out[i] = apply_binary(op, read(a_kind, a, i, a_strides, shape),
                                  read(b_kind, b, i, b_strides, shape))

    return _compile(zip_elements, parallel, error_model="numpy")


@functools.lru_cache(maxsize=None)
def where_loop(cond_kind: int, a_kind: int, b_kind: int, parallel: bool = True):
    loop_range = prange if parallel else range

    def where_elements(out, cond, c_strides, a, a_strides, b, b_strides, shape):
        for i in loop_range(out.size):
            if read(cond_kind, cond, i, c_strides, shape):
                out[i] = read(a_kind, a, i, a_strides, shape)
            else:
                out[i] = read(b_kind, b, i, b_strides, shape)

    return _compile(where_elements, parallel)


@njit(cache=True, fastmath={"reassoc"})
def fold(op, values):
    """Fold a run of values into one: the loop the compiler turns into vector instructions."""
    acc = values[0]  # start from the first value: no identity needed
    for j in range(1, values.size):
        acc = combine(op, acc, values[j])
    return acc


@functools.lru_cache(maxsize=None)
def reduce_loop(op: int, parallel: bool = True):
    loop_range = prange if parallel else range

    def reduce_rows(table, chunk, out):
        rows, n = table.shape
        pieces = (n + chunk - 1) // chunk  # a long row is cut into pieces of `chunk` values
        partial = np.empty((rows, pieces), dtype=table.dtype)
        # 1. every (row, piece) pair is an independent task: fold it into one value
        for task in loop_range(rows * pieces):
            row, piece = task // pieces, task % pieces
            start, stop = piece * chunk, min(n, (piece + 1) * chunk)
            # (a separate function: numba vectorizes it, not a loop written inline here)
            partial[row, piece] = fold(op, table[row, start:stop])
        # 2. fold each row's few partial results (the GPU reduction's second pass)
        for row in loop_range(rows):
            out[row] = fold(op, partial[row])

    return _compile(reduce_rows, parallel)


def parallel_for(work: int) -> bool:
    """Whether ``work`` elements are enough to share out over the cores (see GRAIN).

    Never with one thread: a parallel loop on one thread still pays for the
    thread pool's scheduling, several microseconds a call.
    """
    return work >= GRAIN and get_num_threads() > 1


# -- turning arrays into loop inputs --------------------------------------------------

NO_STRIDES = np.zeros(0, dtype=np.int64)


def _scalar_dtype(value: Scalar, dtype: np.dtype) -> np.dtype:
    """The array's dtype when the scalar fits it exactly (so float32 math stays float32)."""
    if dtype.kind == "f" or isinstance(value, (bool, np.bool_)) or float(value).is_integer():
        return dtype
    return np.dtype(np.float64)  # e.g. int_array < 0.5 compares with 0.5, not with 0


def loop_operand(x: Array | Scalar, shape: tuple[int, ...], dtype: np.dtype):
    """``(kind, values, strides)``: how a loop reads ``x`` as an array of ``shape``.

    ``values`` is a flat 1-D buffer. For a strided input, ``strides`` (in
    elements) walk it; a broadcast axis gets stride 0, a view is read in place.
    """
    if not isinstance(x, np.ndarray):
        return SCALAR, np.array([x], dtype=_scalar_dtype(x, dtype)), NO_STRIDES
    if x.shape == shape and x.flags.c_contiguous:
        return CONTIGUOUS, x.reshape(-1), NO_STRIDES
    if any(s < 0 or s % x.itemsize for s in x.strides):
        x = np.ascontiguousarray(x)  # a reversed or odd view: copy it once (layout work)
    steps = [s // x.itemsize for s in x.strides]
    extent = 1 + sum((n - 1) * s for n, s in zip(x.shape, steps))
    flat = as_strided(x, shape=(extent,), strides=(x.itemsize,))  # the memory x spans
    lead = len(shape) - x.ndim  # broadcasting adds axes at the front ...
    strides = [0] * lead + [0 if n == 1 else s for n, s in zip(x.shape, steps)]  # ... and repeats size-1 axes
    return STRIDED, flat, np.array(strides, dtype=np.int64)


def _shape_array(shape: tuple[int, ...]) -> np.ndarray:
    # an array, not a tuple: numba compiles one loop for every number of axes
    return np.array(shape, dtype=np.int64)


def chunk_size(rows: int, n: int, parallel: bool = True) -> int:
    """Values per task: whole rows when there are enough rows to keep every core busy."""
    tasks_wanted = 4 * get_num_threads() if parallel else 1
    if rows >= tasks_wanted:
        return n
    pieces = -(-tasks_wanted // rows)
    return max(4096, -(-n // pieces))  # pieces too small cost more to schedule than to add

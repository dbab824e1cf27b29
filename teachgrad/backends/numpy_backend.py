"""The reference backend: every primitive is one numpy call.

Other backends are checked against this one, so it favours obviousness. One
exception, for speed where it counts: ``lerp_``, ``addcmul_`` and ``addcdiv_``
(an optimizer's updates) have no numpy call, so on large contiguous arrays
they run the compiled one-pass loops of
:mod:`~teachgrad.backends.pointwise_loops`; everywhere else they are the
sequence of numpy calls that :class:`~teachgrad.backends.base.Backend`
defines, which gives the same bits.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .base import COMPARISONS, Array, Backend, Scalar
from .compiled_loops import LOOP_DTYPES, numba_loaded

_UNARY = {
    "neg": np.negative,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "abs": np.abs,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "sign": np.sign,
    "log1p": np.log1p,
    "expm1": np.expm1,
}
_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def _array(x: Array) -> np.ndarray:
    """numpy turns 0-d results into scalars (``np.exp(np.array(1.0))`` is a float64);
    the backend contract is arrays, so wrap them back."""
    return x if type(x) is np.ndarray else np.asarray(x)


#: 1 and 0 as 0-d arrays of each float dtype (an array operand is quicker than a Python number)
_ONE = {np.dtype(t): np.ones((), t) for t in (np.float16, np.float32, np.float64)}
_ZERO = {np.dtype(t): np.zeros((), t) for t in (np.float16, np.float32, np.float64)}
_ONE_SCALAR = {np.dtype(t): t(1) for t in (np.float16, np.float32, np.float64)}
#: From this many bytes the sigmoid takes the compiled passes (loading numba if need be), or,
#: where they do not take the array, works in one buffer: fresh temporaries that large cost
#: page faults each time. Below it numpy's ``out=`` costs more than the arithmetic it saves.
_SIGMOID_IN_PLACE = 1 << 16


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # 1/(1+e^-x) straight would overflow e^-x for x below about -88 in float32. With
    # e = e^-|x|, which never exceeds 1: sigmoid(x) = 1/(1+e) for x >= 0 and e/(1+e) for
    # x < 0, that is max(e, s) / (1+e) with s = sign(x) or [x >= 0] (for x > 0 the max is
    # 1, as e <= 1; for x < 0 it is e; at x = ±0, e is 1). So every element takes the same
    # few whole-array passes: a masked ufunc (out=..., where=...) or np.where that picks a
    # branch per element is many times slower.
    if x.size == 1 and x.dtype in _ONE_SCALAR:  # (an integer array takes the formula below)
        return _sigmoid_of_one(x)
    if x.nbytes >= _SIGMOID_IN_PLACE or numba_loaded():
        # three calls instead of seven, with these bits (backends/sigmoid_loops.py); numba
        # is loaded for this only where the array is large (loading it takes half a second)
        out = sigmoid_passes().sigmoid(x)
        if out is not None:
            return out
    return _sigmoid_formula(x)


#: The compiled passes' modules once imported ("sigmoid": backends/sigmoid_loops, "relu":
#: backends/relu_loop). They import numba, so nothing imports them before it is needed, and
#: an import statement costs 0.3 µs at every call of a hot function: each is kept here.
_PASSES: dict[str, Any] = {}


def sigmoid_passes():
    """``backends/sigmoid_loops`` (the sigmoid's passes), imported on first use and kept.
    Its callers ask :func:`numba_loaded` (or have an array large enough to load numba) first."""
    passes = _PASSES.get("sigmoid")
    if passes is None:
        from . import sigmoid_loops
        passes = _PASSES["sigmoid"] = sigmoid_loops
    return passes


def relu_passes():
    """``backends/relu_loop`` (ReLU's passes, imported on first use and kept) once numba is
    loaded, else None. Loading numba takes about half a second: a network of Linear layers
    and ReLUs never loads it for this, one with convolutions or batch norm has loaded it."""
    if not numba_loaded():
        return None
    passes = _PASSES.get("relu")
    if passes is None:
        from . import relu_loop
        passes = _PASSES["relu"] = relu_loop
    return passes


def _sigmoid_formula(x: np.ndarray) -> np.ndarray:
    """The sigmoid by whole-array numpy calls (see _sigmoid)."""
    one = _ONE.get(x.dtype, 1)
    if x.nbytes <= _SIGMOID_IN_PLACE:
        e = np.exp(np.minimum(x, np.negative(x)))
        return _array(np.divide(np.maximum(e, np.sign(x)), np.add(e, one)))
    t = np.negative(x)
    np.minimum(x, t, out=t)
    np.exp(t, out=t)                                                      # e
    d = np.add(t, one)                                                    # 1 + e
    np.maximum(t, np.greater_equal(x, _ZERO.get(x.dtype, 0)), out=t)      # the numerator
    return np.divide(t, d, out=t)


def _sigmoid_of_one(x: np.ndarray) -> np.ndarray:
    """The sigmoid of a one-element float array (a micrograd-style scalar graph, a loss).

    Its sign picks the branch, and the arithmetic runs on the element as a numpy scalar of
    its own dtype: the same ufunc loops and IEEE operations as on the array, so the same
    bits, without a fresh array per step (about 0.5 µs against 1.3 for four array calls).
    """
    out = x.copy()  # (the result's shape and dtype; its one element is written below)
    index = (0,) * x.ndim
    v = x[index]
    one = _ONE_SCALAR[x.dtype]  # (making a numpy scalar costs 0.25 µs)
    if v >= 0:  # (-0.0 too: e^-0 = 1, as above; nan takes the other branch)
        out[index] = one / (np.exp(-v) + one)
    else:
        e = np.exp(v)
        out[index] = e / (e + one)
    return out


#: Python floats met as operands, as read-only 0-d arrays of each float dtype (value -> array).
#: numpy converts a Python number to the array's dtype anyway (NEP 50), rounding it the way
#: ``np.array(value, dtype)`` does, so the result has the same bits; but the conversion takes
#: longer than the operation on a few elements (0.56 µs against 0.30 for ``x + 0.1`` on one).
_NUMBER_OPERANDS: dict[np.dtype, dict[float, np.ndarray]] = {
    np.dtype(t): {} for t in (np.float16, np.float32, np.float64)}
_NUMBER_OPERANDS_KEPT = 256  # numbers per dtype; past that the table starts again


def _number_operand(value: float, table: dict, dtype: np.dtype) -> float | np.ndarray:
    """``value`` as a 0-d array of ``dtype``, kept in ``table`` for the next time; or the
    number itself where the array could differ: ±0.0 (equal keys, different signs), nan
    (never equal to itself) and values that do not fit the dtype (numpy's own overflow)."""
    if not value or value != value or value in (float("inf"), float("-inf")):
        return value
    array = np.array(value, dtype)
    if not np.isfinite(array):
        return value
    if len(table) >= _NUMBER_OPERANDS_KEPT:
        table.clear()
    array.flags.writeable = False
    table[value] = array
    return array


def kept_number(value: float, dtype: np.dtype) -> float | np.ndarray:
    """``value`` as an operand beside a numpy array of ``dtype``: the kept read-only 0-d
    array of that dtype (numpy converts a Python number at every call, 0.7 µs), or the
    number itself where the array could differ (see _number_operand), or for a dtype
    that keeps none. Either way ``array * kept_number(v, array.dtype)`` is
    ``array * v`` to the bit."""
    table = _NUMBER_OPERANDS.get(dtype)
    if table is None:
        return value
    return table.get(value) or _number_operand(value, table, dtype)


#: A read-only array of zeros per dtype, grown to the largest relu input up to 1 MiB:
#: filling a fresh one for every call cost as much as the maximum itself.
_ZEROS: dict[np.dtype, np.ndarray] = {}
_ZEROS_KEPT = 1 << 20


def _zeros(x: np.ndarray) -> np.ndarray:
    """Zeros of ``x``'s shape and dtype, to read only (a view of the kept array when it fits)."""
    kept = _ZEROS.get(x.dtype)
    if kept is None or kept.size < x.size:
        if x.nbytes > _ZEROS_KEPT:
            return np.zeros_like(x)
        kept = np.zeros(x.size, x.dtype)
        kept.flags.writeable = False
        _ZEROS[x.dtype] = kept
    return kept[:x.size].reshape(x.shape)


_UNARY["sigmoid"] = _sigmoid  # (a formula of several ufuncs, looked up as the ufuncs are)
#: Up to this many elements relu compares with the number 0; beyond, with an array of zeros
#: (the one allocation costs less than the slow loop from about 2000 elements up).
_RELU_SCALAR = 2048
#: Dtypes of the one-pass loops for lerp_/addcmul_/addcdiv_
_LOOP_DTYPES = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


def _picks_whole_rows(shape: tuple, index: tuple, values: Array) -> bool:
    """Whether ``index`` is one integer array choosing whole rows of ``shape``
    (``values`` then holds one row per index)."""
    if len(index) != 1 or type(index[0]) is not np.ndarray or index[0].dtype.kind not in "iu":
        return False
    return len(shape) >= 1 and values.shape == index[0].shape + tuple(shape[1:])


def _add_rows(out: np.ndarray, rows: np.ndarray, values: np.ndarray) -> None:
    """``out[rows[k]] += values[k]`` for every k, a row used twice collecting both.

    What ``np.add.at`` does, several times faster for rows: for a float matrix, one
    compiled loop (:mod:`teachgrad.backends.row_loops`); otherwise by sorting (below).
    """
    rows = rows.reshape(-1)
    if rows.size == 0:
        return
    if out.dtype in LOOP_DTYPES and values.dtype == out.dtype and out.ndim == 2 \
            and out.flags.c_contiguous:
        from .row_loops import add_rows
        add_rows(out, rows, np.ascontiguousarray(values).reshape(rows.size, out.shape[1]))
    else:
        add_rows_sorted(out, rows, values)


def add_rows_sorted(out: np.ndarray, rows: np.ndarray, values: np.ndarray) -> None:
    """``_add_rows`` by whole-array passes: sort the row numbers, sum each run of equal
    ones with one ``reduceat``, write each sum once."""
    rows = np.where(rows < 0, rows + out.shape[0], rows)  # (-1 is the last row, as in numpy)
    values = values.reshape((rows.size,) + out.shape[1:])
    order = np.argsort(rows, kind="stable")  # (stable: the same order of additions each time)
    sorted_rows = rows[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_rows[1:] != sorted_rows[:-1])))
    out[sorted_rows[starts]] += np.add.reduceat(values[order], starts, axis=0)


class NumpyBackend(Backend):
    name = "numpy"
    device_type = "cpu"
    array_arithmetic = True  # every primitive is the numpy operator itself

    #: From this many bytes on, lerp_/addcmul_/addcdiv_ take one compiled pass. Below it
    #: numpy's two or three passes are cheap, and a program that never updates a large
    #: array never imports numba (about 0.3 s) or compiles a loop (about 0.3 s each, once
    #: per machine: numba keeps the machine code on disk).
    one_pass_bytes = 1 << 16

    def from_numpy(self, a: np.ndarray) -> np.ndarray:
        return np.array(a, copy=True)

    def to_numpy(self, x: np.ndarray) -> np.ndarray:
        return np.array(x, copy=True)

    def full(self, shape, value, dtype):
        out = np.empty(shape, dtype=dtype)  # (what np.full does, minus its Python wrapper)
        out.fill(value)
        return out

    def unary(self, op: str, x: Array) -> Array:
        fn = _UNARY.get(op)
        if fn is not None:
            out = fn(x)
            return out if type(out) is np.ndarray else np.asarray(out)
        if op == "relu":
            if x.size <= _RELU_SCALAR:
                return _array(np.maximum(x, 0).astype(x.dtype, copy=False))
            # numpy's vectorised maximum loop takes two arrays; against the number 0 it
            # runs an element-at-a-time loop about three times slower than the zeros
            return np.maximum(x, _zeros(x))
        if op == "step":
            return _array((x > 0).astype(x.dtype))
        if op == "erf":  # no numpy call: a compiled loop over the C library's erf
            from .erf_loop import erf
            return erf(x)
        raise KeyError(op)

    def binary(self, op: str, a: Array | Scalar, b: Array | Scalar) -> Array:
        # ``x * 0.5``, ``1 - x``: a Python float beside a floating-point array as a kept 0-d
        # array of the array's dtype (see _number_operand), the same bits in half the time
        if type(b) is float and type(a) is np.ndarray:
            table = _NUMBER_OPERANDS.get(a.dtype)
            if table is not None:
                b = table.get(b) or _number_operand(b, table, a.dtype)
        elif type(a) is float and type(b) is np.ndarray:
            table = _NUMBER_OPERANDS.get(b.dtype)
            if table is not None:
                a = table.get(a) or _number_operand(a, table, b.dtype)
        out = _BINARY[op](a, b)
        if type(out) is np.ndarray:
            if type(a) is np.ndarray and out.dtype is a.dtype:
                return out  # the usual case: the operands' own dtype, nothing to fix
        else:  # (_array written out: this runs for every operation)
            out = np.asarray(out)
        # numpy may widen `int_array ** negative` etc.; keep the operand dtype
        if op not in COMPARISONS:
            ref = a if isinstance(a, np.ndarray) else b
            if out.dtype is not ref.dtype and out.dtype != ref.dtype:
                out = out.astype(ref.dtype)
        return out

    def binary_inplace(self, op, x, other):
        if op == "add" and type(other) is np.ndarray and other.ndim == 1 and x.ndim > 1 \
                and self._rows_plus_row(x, other):
            from . import pointwise_loops
            pointwise_loops.add_rows(x.reshape(-1, other.shape[0]), other)
            return
        _BINARY[op](x, other, out=x)  # the ufunc writes into x: no temporary array

    def _rows_plus_row(self, x: np.ndarray, row: np.ndarray) -> bool:
        """Whether ``x += row`` (a bias added to a layer's output) takes the compiled pass:
        ``x`` large and C-contiguous, ``row`` one contiguous row of ``x``'s length and
        dtype, apart from ``x``. The same additions in the same dtype: numpy's bits."""
        return (self._one_pass(x) and x.flags.writeable and row.dtype == x.dtype
                and x.shape[-1] == row.shape[0] and row.flags.c_contiguous
                and not np.may_share_memory(x, row))

    def addcmul_inplace(self, x, a, b, value):
        if self._one_pass(x, a, b):
            from . import pointwise_loops
            pointwise_loops.addcmul(x.reshape(-1), a.reshape(-1), b.reshape(-1), x.dtype.type(value))
        else:
            super().addcmul_inplace(x, a, b, value)

    def addcdiv_inplace(self, x, a, b, value):
        if self._one_pass(x, a, b):
            from . import pointwise_loops
            pointwise_loops.addcdiv(x.reshape(-1), a.reshape(-1), b.reshape(-1), x.dtype.type(value))
        else:
            super().addcdiv_inplace(x, a, b, value)

    def lerp_inplace(self, x, end, weight):
        if self._one_pass(x, end):
            from . import pointwise_loops
            scalar = x.dtype.type
            pointwise_loops.lerp(x.reshape(-1), end.reshape(-1), scalar(weight), scalar(weight - 1))
        else:
            super().lerp_inplace(x, end, weight)

    def adam_update(self, param, grad, exp_avg, exp_avg_sq, numbers):
        """Adam's update in one compiled pass (``backends/adam_loop.py``: the same bits as
        the optimizer's tensor operations; ``numbers`` holds the Python numbers those
        operations take, by name, and ``decay_mode``, one of ``adam_loop.DECAY_MODES``) when all four arrays are of one float dtype and
        shape, contiguous and apart, and either large or numba is loaded already (a program
        that only trains small models on numpy need not load it: about 0.3 s)."""
        if param.nbytes < self.one_pass_bytes and not numba_loaded():
            return False
        if not self._one_pass_apart(param, grad, exp_avg, exp_avg_sq):
            return False
        from . import adam_loop
        # (each number rounded to the arrays' dtype, as the tensor operations take it)
        in_dtype = np.array([numbers[name] for name in adam_loop.NUMBERS], dtype=param.dtype)
        adam_loop.adam_update(
            param.reshape(-1), grad.reshape(-1), exp_avg.reshape(-1), exp_avg_sq.reshape(-1),
            in_dtype, adam_loop.DECAY_MODES.index(numbers["decay_mode"]), bool(numbers["maximize"]))
        return True

    def _one_pass_apart(self, *arrays: np.ndarray) -> bool:
        """Whether these arrays are of one float dtype and shape, C-contiguous, and no two
        of them share memory (a loop that writes one while it reads another needs that),
        all writable."""
        first = arrays[0]
        if first.dtype not in _LOOP_DTYPES:
            return False
        for k, y in enumerate(arrays):
            if (type(y) is not np.ndarray or y.dtype != first.dtype or y.shape != first.shape
                    or not y.flags.c_contiguous or not y.flags.writeable):
                return False
            for z in arrays[:k]:
                if np.may_share_memory(y, z):
                    return False
        return True

    def fused_activation(self, name, x, grad=None):
        if x.size == 0 or not self._one_pass(x) or (grad is not None and grad.shape != x.shape):
            return None  # small or strided: numpy's passes (and no compiling for a few floats)
        if grad is not None:  # (the loops only read it: a broadcast one, from a sum, is copied)
            grad = np.ascontiguousarray(grad, dtype=x.dtype)
        from . import activation_loops
        return activation_loops.run(name, x, grad)

    def _one_pass(self, x: np.ndarray, *others: np.ndarray) -> bool:
        """Whether the compiled loops take these: large enough, float32 or float64, all of
        one dtype and shape, C-contiguous, and no operand overlapping ``x`` other than
        ``x`` itself (numpy's passes handle any overlap: they finish reading before they write)."""
        if x.nbytes < self.one_pass_bytes or x.dtype not in _LOOP_DTYPES or not x.flags.c_contiguous:
            return False
        for y in others:
            if (type(y) is not np.ndarray or y.dtype != x.dtype or y.shape != x.shape
                    or not y.flags.c_contiguous or (y is not x and np.may_share_memory(x, y))):
                return False
        return True

    def where(self, cond, a, b):
        out = np.where(cond, a, b)
        ref = a if isinstance(a, np.ndarray) else b
        if isinstance(ref, np.ndarray) and out.dtype != ref.dtype:
            out = out.astype(ref.dtype)
        return out

    def astype(self, x, dtype):
        return x.astype(dtype)

    def reduce(self, op, x, axes, keepdims):
        if op == "sum" and x.dtype == np.bool_:
            x = x.astype(np.int64)  # count the Trues (np.add on bools would be a logical or)
        elif op == "sum" and (axes == (0,) or axes == 0) and x.ndim > 1 and x.size \
                and self._one_pass(x):
            return self._sum_over_first_axis(x, keepdims)
        elif axes is None and not keepdims and x.dtype in _ONE:
            # the whole of a float array (a loss) into a 0-d array of its dtype: numpy would
            # return a scalar, and wrapping that costs more than the sum of 1000 floats
            return _REDUCE[op].reduce(x, None, None, np.empty((), x.dtype))
        # the ufuncs' own reduce: what np.sum/np.max call, minus their Python wrappers
        return _array(_REDUCE[op].reduce(x, axis=axes, keepdims=keepdims))

    def _sum_over_first_axis(self, x: np.ndarray, keepdims: bool) -> np.ndarray:
        """``x.sum(0)`` of a large C-contiguous float array (a bias's gradient, a batch's
        sum) in one compiled pass with numpy's order of additions: the same bits."""
        from . import pointwise_loops
        out = np.empty(x.shape[1:], x.dtype)
        pointwise_loops.sum_rows(x.reshape(x.shape[0], -1), out.reshape(-1))
        return out.reshape((1, *x.shape[1:])) if keepdims else out

    def arg_reduce(self, op, x, axis, keepdims):
        fn = np.argmax if op == "argmax" else np.argmin
        out = fn(x, axis=axis, keepdims=keepdims) if axis is not None else fn(x)
        if axis is None and keepdims:
            out = np.reshape(out, (1,) * x.ndim)
        return np.asarray(out, dtype=np.int64)

    def matmul(self, a, b):
        return _array(np.matmul(a, b))

    def reshape(self, x, shape):
        return x.reshape(shape)

    def permute(self, x, axes):
        return x.transpose(axes)

    def broadcast_to(self, x, shape):
        if (type(x) is np.ndarray and x.ndim == 0) or isinstance(x, np.generic):
            # (a loss's gradient, spread by sum's backward; mean's divides it into a scalar)
            # the same read-only view np.broadcast_to makes (every stride 0), without its
            # general checks: 0.7 µs instead of 4.5, paid by every backward from a scalar
            view = np.ndarray(shape, x.dtype, x, 0, (0,) * len(shape))
            view.flags.writeable = False
            return view
        return np.broadcast_to(x, shape)

    def is_contiguous(self, x):
        return x.flags.c_contiguous

    def shares_memory(self, a, b):
        return np.may_share_memory(a, b)  # compares address ranges: quick, may say yes wrongly

    def contiguous(self, x):
        # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
        return x if x.flags.c_contiguous else np.array(x, order="C")

    def concatenate(self, xs: Sequence[Array], axis: int) -> Array:
        return np.concatenate(xs, axis=axis)

    def getitem(self, x, index):
        if len(index) == 1 and type(index[0]) is np.ndarray and index[0].dtype.kind in "iu":
            # rows by an integer array (an embedding's lookup): numpy's take copies the same
            # rows as x[index] does, with less work per call (indexing first works out what
            # kind of index it was given)
            return np.take(x, index[0], axis=0)
        return np.asarray(x[index])

    def index_add(self, shape, dtype, index, values):
        out = np.zeros(shape, dtype=dtype)
        if all(item is None or item is Ellipsis or isinstance(item, (int, slice)) for item in index):
            out[index] = values  # ints and slices name each position once: nothing to add up
        elif _picks_whole_rows(shape, index, values):  # (an embedding's backward)
            _add_rows(out, index[0], values)
        else:  # (np.add.at adds repeats, but element by element: fifteen times slower)
            np.add.at(out, index, values)
        return out

    def setitem(self, x, index, value):
        x[index] = value

    # -- sliding windows: strided views instead of the gather table -------------
    def windows(self, padded, kernel, stride, dilation, out):
        # sliding_window_view reads every window of the image without copying:
        # (N, C, Hp - span_h + 1, Wp - span_w + 1, span_h, span_w). Every stride-th
        # position and every dilation-th element of a window are again views. The one
        # copy puts the window's axes first, (N, C, kh, kw, out_h, out_w): the rows of
        # the matrix the convolution's matmul reads, each row a run of positions in
        # memory (a gather with a table would be slower, and give an order the matmul
        # then copies once more).
        spans = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
        view = np.lib.stride_tricks.sliding_window_view(padded, spans, axis=(2, 3))
        view = view[:, :, ::stride[0], ::stride[1], ::dilation[0], ::dilation[1]]
        return np.ascontiguousarray(view.transpose(0, 1, 4, 5, 2, 3))

    def add_windows(self, pieces, padded_shape, kernel, stride, dilation):
        from .windows import element_slice

        out = pieces[0].shape[2:]
        summed = np.zeros(padded_shape, dtype=pieces[0].dtype)
        for k, piece in enumerate(pieces):
            # a strided view of ``summed``: += adds in place, with no temporary array
            summed[element_slice(k // kernel[1], k % kernel[1], stride, dilation, out)] += piece
        return summed

"""The backend seam: the primitives every device must provide.

A *backend* owns the arrays of one device and knows how to run a small set of
primitive operations on them. Everything above this line (tensors, autograd,
``nn``) is written in terms of these primitives only, so a new device is a new
subclass of :class:`Backend` and nothing else.

Arrays are whatever the backend likes: ``numpy.ndarray`` for the CPU backends,
numba ``DeviceNDArray`` for ``cuda``. The tensor layer never looks inside them;
it asks the backend for ``shape`` and ``dtype`` and hands them back.

Conventions every backend follows (the numpy backend is the reference):

* ``dtype`` arguments are numpy dtypes (``np.float32``, ``np.float64``,
  ``np.int64``, ``np.bool_``); the tensor layer has already decided the result
  dtype and cast inputs where needed, so primitives never promote.
* ``binary`` broadcasts like numpy; either operand may be a Python scalar.
* ``axes`` for reductions is a tuple of non-negative ints, or ``None`` for all.
* Indices for ``getitem``/``index_add``/``setitem`` are already normalised by
  the tensor layer to a tuple of ``int``, ``slice``, ``None`` and int64 arrays
  of this backend.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Sequence

import numpy as np

Array = Any  # a backend's array type
Scalar = int | float | bool

#: Elementwise functions of one argument, by name.
UNARY_OPS = (
    "neg", "exp", "log", "sqrt", "abs", "sin", "cos", "tanh", "sigmoid",
    "relu", "sign", "step",  # step(x) = 1 where x > 0 else 0 (relu's derivative)
    "erf", "log1p", "expm1",  # GELU's error function; log(1+x), e^x-1 exact near x = 0
)
#: Elementwise functions of two arguments, by name (broadcasting).
BINARY_OPS = (
    "add", "sub", "mul", "div", "pow", "maximum", "minimum",
    "eq", "ne", "lt", "le", "gt", "ge",  # comparisons give bool arrays
)
COMPARISONS = frozenset(("eq", "ne", "lt", "le", "gt", "ge"))
#: Reductions that take ``axes`` and ``keepdims``.
REDUCE_OPS = ("sum", "max", "min")
#: Reductions that return an int64 position along one axis.
ARG_REDUCE_OPS = ("argmax", "argmin")


class Backend(ABC):
    """Where arrays live and how primitives run on them."""

    #: Short name shown to users, e.g. ``"numpy"``, ``"numba"``, ``"cuda"``.
    name: str = "abstract"
    #: The device type this backend serves: ``"cpu"`` or ``"cuda"``.
    device_type: str = "cpu"
    #: True when this backend's arrays are numpy arrays whose own operators (``a * b``,
    #: ``1 - t``, ``g @ w``) compute exactly what its primitives compute: then the engine
    #: may run a backward formula written with operators straight on the arrays (see
    #: ``Function.formula_on_arrays``). The numba backend's arrays are numpy arrays too,
    #: but its primitives are its own loops, so it keeps this False.
    array_arithmetic: bool = False

    # -- moving data ---------------------------------------------------------
    @abstractmethod
    def from_numpy(self, a: np.ndarray) -> Array:
        """Copy a host array onto this backend's device."""

    @abstractmethod
    def to_numpy(self, x: Array) -> np.ndarray:
        """Copy an array back to a host ``numpy.ndarray``."""

    # -- creating -------------------------------------------------------------
    @abstractmethod
    def full(self, shape: tuple[int, ...], value: Scalar, dtype: np.dtype) -> Array:
        """A new array of ``shape`` filled with ``value``."""

    def arange(self, n: int, dtype: np.dtype) -> Array:
        """``0, 1, ..., n-1`` (used by backwards that build one-hot masks)."""
        return self.from_numpy(np.arange(n, dtype=dtype))

    # -- describing -----------------------------------------------------------
    def shape(self, x: Array) -> tuple[int, ...]:
        return tuple(x.shape)

    def dtype(self, x: Array) -> np.dtype:
        return np.dtype(x.dtype)

    # -- elementwise ----------------------------------------------------------
    @abstractmethod
    def unary(self, op: str, x: Array) -> Array:
        """Apply the elementwise function ``op`` (one of :data:`UNARY_OPS`)."""

    @abstractmethod
    def binary(self, op: str, a: Array | Scalar, b: Array | Scalar) -> Array:
        """Apply ``op`` (one of :data:`BINARY_OPS`) with numpy broadcasting.

        At least one of ``a``/``b`` is an array. Comparisons return bool arrays,
        everything else the dtype of the array operand(s).
        """

    @abstractmethod
    def where(self, cond: Array, a: Array | Scalar, b: Array | Scalar) -> Array:
        """``a`` where ``cond`` is true, else ``b`` (broadcasting)."""

    @abstractmethod
    def astype(self, x: Array, dtype: np.dtype) -> Array:
        """A copy converted to ``dtype``."""

    # -- reductions -----------------------------------------------------------
    @abstractmethod
    def reduce(self, op: str, x: Array, axes: tuple[int, ...] | None, keepdims: bool) -> Array:
        """``sum``/``max``/``min`` over ``axes`` (``None`` = every axis)."""

    @abstractmethod
    def arg_reduce(self, op: str, x: Array, axis: int | None, keepdims: bool) -> Array:
        """``argmax``/``argmin`` along one axis (``None`` = of the flattened array), int64."""

    # -- linear algebra -------------------------------------------------------
    @abstractmethod
    def matmul(self, a: Array, b: Array) -> Array:
        """``numpy.matmul`` semantics: 1-D promotion and batch broadcasting."""

    # -- layout ---------------------------------------------------------------
    @abstractmethod
    def reshape(self, x: Array, shape: tuple[int, ...]) -> Array:
        """Same elements in a new shape (a view when the layout allows)."""

    @abstractmethod
    def permute(self, x: Array, axes: tuple[int, ...]) -> Array:
        """Axes reordered (a view where possible)."""

    @abstractmethod
    def broadcast_to(self, x: Array, shape: tuple[int, ...]) -> Array:
        """A read-only view of ``x`` broadcast to ``shape``."""

    @abstractmethod
    def contiguous(self, x: Array) -> Array:
        """A C-contiguous copy (or ``x`` itself when it already is)."""

    def shares_memory(self, a: Array, b: Array) -> bool:
        """Whether ``a`` and ``b`` may be views of the same memory (then an in-place change
        of one is a change of the other). This default says no; backends that make
        views override it."""
        return False

    def is_contiguous(self, x: Array) -> bool:
        """Whether ``x``'s elements sit in row-major order, back to back (a view may not).

        This default asks :meth:`contiguous`, which copies when the answer is no;
        a backend that can read the layout directly overrides it.
        """
        return self.contiguous(x) is x

    @abstractmethod
    def concatenate(self, xs: Sequence[Array], axis: int) -> Array:
        """Join arrays of equal dtype along an existing axis."""

    # -- indexing -------------------------------------------------------------
    @abstractmethod
    def getitem(self, x: Array, index: tuple) -> Array:
        """``x[index]`` with numpy semantics (basic slicing gives a view)."""

    @abstractmethod
    def index_add(self, shape: tuple[int, ...], dtype: np.dtype, index: tuple, values: Array) -> Array:
        """A zero array of ``shape`` with ``values`` added at ``index``.

        Repeated positions add up (``numpy.add.at``): this is the backward of
        ``getitem``.
        """

    @abstractmethod
    def setitem(self, x: Array, index: tuple, value: Array | Scalar) -> None:
        """In place: ``x[index] = value`` (broadcasting ``value``)."""

    # -- sorting --------------------------------------------------------------
    def sort(self, x: Array, axis: int, descending: bool) -> tuple[Array, Array]:
        """``(values, int64 positions)`` of ``x`` sorted along ``axis``, stably (equal elements
        keep their order), NaN after every number ascending and before it descending.

        This default sorts a host copy with numpy (``x`` itself for the CPU backends);
        the ``cuda`` backend sorts on the device (:mod:`teachgrad.kernels.sort`).
        """
        host = self.to_numpy(x)
        if descending:  # stable descending: sort the reversed row, read it backwards
            n = host.shape[axis]
            backwards = np.flip(np.argsort(np.flip(host, axis), axis=axis, kind="stable"), axis)
            order = (n - 1) - backwards
        else:
            order = np.argsort(host, axis=axis, kind="stable")
        values = np.take_along_axis(host, order, axis)
        return self.from_numpy(values), self.from_numpy(order.astype(np.int64))
    # -- sliding windows (convolution and pooling) -----------------------------
    def windows(self, padded: Array, kernel: tuple[int, int], stride: tuple[int, int],
                dilation: tuple[int, int], out: tuple[int, int]) -> Array:
        """Every window of the ``(N, C, Hp, Wp)`` image ``padded``, as a new contiguous
        ``(N, C, kh, kw, out_h, out_w)`` array (im2col): element ``[n, c, i, j, p, q]`` is
        ``padded[n, c, p * sh + i * dh, q * sw + j * dw]``.

        This default is one gather with a table of flat positions, which every backend
        can run; a backend with strided views reads the windows without the table.
        """
        from .windows import window_positions

        n, c, hp, wp = self.shape(padded)
        table = window_positions((hp, wp), kernel, stride, dilation, out)
        flat = self.reshape(padded, (n, c, hp * wp))
        columns = self.getitem(flat, (slice(None), slice(None), self.from_numpy(table)))
        return self.reshape(columns, (n, c) + tuple(kernel) + tuple(out))

    def add_windows(self, pieces: Sequence[Array], padded_shape: tuple[int, ...],
                    kernel: tuple[int, int], stride: tuple[int, int],
                    dilation: tuple[int, int]) -> Array:
        """The way back from :meth:`windows` (col2im): a zero array of ``padded_shape`` with
        ``pieces[i * kw + j]`` (``(N, C, out_h, out_w)`` each) added at window element
        ``(i, j)`` of every window. A pixel inside several windows collects them all.

        One whole-array addition per window element, never one per pixel.
        """
        from .windows import element_slice

        out = tuple(self.shape(pieces[0])[2:])
        summed = self.zeros(tuple(padded_shape), self.dtype(pieces[0]))
        for k, piece in enumerate(pieces):
            where = element_slice(k // kernel[1], k % kernel[1], stride, dilation, out)
            self.setitem(summed, where, self.binary("add", self.getitem(summed, where), piece))
        return summed

    # -- helpers shared by every backend --------------------------------------
    def binary_inplace(self, op: str, x: Array, other: Array | Scalar) -> None:
        """In place: ``x = x op other``. ``other`` (an array of ``x``'s dtype, or a Python
        scalar) broadcasts to ``x``'s shape; the tensor layer has checked both already.

        This default computes the result and copies it in; a backend can override it
        to write straight into ``x`` (no temporary array: optimizer steps use this).
        """
        self.setitem(x, (Ellipsis,), self.binary(op, x, other))

    # Two operations in one call, for optimizer updates (``Tensor.addcmul_`` and friends).
    # ``a``, ``b`` and ``end`` are arrays of ``x``'s float dtype and shape; ``value`` and
    # ``weight`` are floats already rounded to that dtype. These defaults are the plain
    # sequence of primitives (one temporary array, two or three passes over memory); a
    # backend may do the same arithmetic in one pass, in the same order.
    def fused_activation(self, name: str, x: Array, grad: Array | None = None) -> Array | None:
        """The activation ``name`` ("gelu", "gelu_tanh"; "softmax", "log_softmax" over the last
        axis) of ``x`` or, given ``grad``, its input gradient (for the two softmaxes ``x`` is
        then their output), in one compiled pass; None where this backend has no such pass
        (the Function then composes primitives: see ``ops/pointwise_activation.py``,
        ``ops/activation.py``)."""
        return None

    def adam_update(self, param: Array, grad: Array, exp_avg: Array, exp_avg_sq: Array,
                    numbers: dict) -> bool:
        """Adam's whole update of one parameter in one call, in place (``numbers``: see
        ``NumpyBackend.adam_update``); False where this backend has no such call, and the
        optimizer then runs its tensor operations (``optim/adam.py``)."""
        return False

    def addcmul_inplace(self, x: Array, a: Array, b: Array, value: float) -> None:
        """In place: ``x = x + (a * b) * value``."""
        self._add_scaled(x, self.binary("mul", a, b), value)

    def addcdiv_inplace(self, x: Array, a: Array, b: Array, value: float) -> None:
        """In place: ``x = x + (a / b) * value``."""
        self._add_scaled(x, self.binary("div", a, b), value)

    def lerp_inplace(self, x: Array, end: Array, weight: float) -> None:
        """In place: ``x = x + (end - x) * weight``; for ``|weight| >= 0.5`` from the other
        end, ``end + (end - x) * (weight - 1)``, so a weight of 1 gives ``end`` exactly."""
        diff = self.binary("sub", end, x)
        if abs(weight) < 0.5:
            self.binary_inplace("mul", diff, weight)
            self.binary_inplace("add", x, diff)
        else:
            self.binary_inplace("mul", diff, weight - 1)
            self.binary_inplace("add", diff, end)
            self.setitem(x, (Ellipsis,), diff)

    def _add_scaled(self, x: Array, new: Array, value: float) -> None:
        if value != 1:
            self.binary_inplace("mul", new, value)
        self.binary_inplace("add", x, new)

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> Array:
        return self.full(shape, 0, dtype)

    def synchronize(self) -> None:
        """Wait until queued work is done (a no-op for synchronous backends)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} for {self.device_type}>"

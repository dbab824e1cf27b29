"""Running totals: cumsum and cumprod, as a *parallel scan*.

One after another, ``out[i] = out[i-1] + x[i]`` takes ``n`` dependent steps.
The scan here takes ``log2(n)``, each of them one whole-array operation any
backend (and so any device) already runs in parallel (Hillis and Steele, 1986)::

    shift = 1, 2, 4, ...:   out[i] = out[i] + out[i - shift]   (nothing to add for i < shift)

After the step with shift ``s`` every ``out[i]`` holds the sum of the ``2s``
elements ending at ``i``. It does ``n log n`` additions instead of ``n``: the
price of not waiting. Added in another order, float results may differ from a
sequential loop in the last bits.

The gradients are scans too. ``cumsum``'s is the same scan run from the other
end. ``cumprod``'s must survive zeros in the input, so it never divides by
``x``: ``∂L/∂x[k] = (x[0]···x[k-1]) · r[k]`` where ``r[k] = g[k] + x[k+1]·r[k+1]``,
a recurrence the same doubling trick solves (each element carries an
``r ↦ b + a·r`` pair, and two pairs compose into one).
"""
from __future__ import annotations

from typing import Any

from .. import dtypes
from ..autograd.function import Context, Function
from ..tensor import Tensor
from .dispatch import normalize_dim
from .gather_scatter import in_place


def _part(backend: Any, x: Any, axis: int, start: int, stop: int) -> Any:
    return backend.getitem(x, (slice(None),) * axis + (slice(start, stop),))


def shifted(backend: Any, x: Any, axis: int, shift: int, fill: Any, toward_end: bool = True) -> Any:
    """``x`` moved ``shift`` places along ``axis`` (toward its end, or its start), ``fill`` in the gap."""
    shape = list(backend.shape(x))
    n = shape[axis]
    shift = min(shift, n)
    shape[axis] = shift
    gap = backend.full(tuple(shape), fill, backend.dtype(x))
    if toward_end:
        return backend.concatenate([gap, _part(backend, x, axis, 0, n - shift)], axis)
    return backend.concatenate([_part(backend, x, axis, shift, n), gap], axis)


def scan(backend: Any, x: Any, axis: int, op: str, identity: Any, reverse: bool = False) -> Any:
    """Inclusive scan of ``x`` along ``axis`` with ``op`` ("add" or "mul"); from the end if ``reverse``."""
    n, shift = backend.shape(x)[axis], 1
    while shift < n:
        x = backend.binary(op, x, shifted(backend, x, axis, shift, identity, not reverse))
        shift *= 2
    return x


def reverse_linear_recurrence(backend: Any, a: Any, b: Any, axis: int) -> Any:
    """``r[k] = b[k] + a[k] * r[k+1]`` (``r[n-1] = b[n-1]``) for every ``k`` at once."""
    n, shift = backend.shape(b)[axis], 1
    while shift < n:
        # the pair at k, composed with the pair `shift` places later: r -> b + a*(b' + a'*r)
        b = backend.binary("add", b, backend.binary("mul", a, shifted(backend, b, axis, shift, 0, False)))
        a = backend.binary("mul", a, shifted(backend, a, axis, shift, 1, False))
        shift *= 2
    return b


class CumSum(Function):
    rule = "∂cumsum(a)ᵢ/∂aₖ = 1 for i ≥ k: each aₖ gets the sum of the gradients from k to the end"

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int):
        ctx.dim = dim
        return scan(ctx.backend, a._array, dim, "add", 0)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        total = scan(ctx.backend, grad._array, ctx.dim, "add", 0, reverse=True)
        return Tensor._make(total, ctx.backend, grad.device), None


class CumProd(Function):
    rule = "∂cumprod(a)ᵢ/∂aₖ = Πⱼ≤ᵢ,ⱼ≠ₖ aⱼ for i ≥ k (computed without dividing, so zeros are fine)"

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int):
        ctx.dim = dim
        ctx.save_for_backward(a)
        out = scan(ctx.backend, a._array, dim, "mul", 1)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        (a,) = ctx.saved_tensors
        backend, dim = ctx.backend, ctx.dim
        before = shifted(backend, ctx.out, dim, 1, 1)  # x[0]···x[k-1] (1 for k = 0)
        next_x = shifted(backend, a._array, dim, 1, 0, toward_end=False)  # x[k+1] (0 at the end)
        r = reverse_linear_recurrence(backend, next_x, grad._array, dim)
        return Tensor._make(backend.binary("mul", before, r), backend, grad.device), None


def _scanned(fn: type, name: str, input: Tensor, dim: int, dtype: Any) -> Tensor:  # noqa: A002
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be a tensor, not {type(input).__name__}")
    dim = normalize_dim(dim, input.ndim)
    if dtype is not None:
        input = input.to(dtypes.get_dtype(dtype))
    elif not input.dtype.is_floating_point:
        input = input.to(dtypes.int64)  # integers and bools add up in int64, as in PyTorch
    if input.ndim == 0:
        return fn.apply(input.reshape(1), 0).reshape(())
    return fn.apply(input, dim)


def cumsum(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """Running sums along ``dim``: ``out[i] = input[0] + ... + input[i]``."""
    return _scanned(CumSum, "cumsum", input, dim, dtype)


def cumprod(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """Running products along ``dim``: ``out[i] = input[0] * ... * input[i]``."""
    return _scanned(CumProd, "cumprod", input, dim, dtype)


def cumsum_(self: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return in_place(self, lambda old: cumsum(old, dim, dtype=dtype))


def cumprod_(self: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return in_place(self, lambda old: cumprod(old, dim, dtype=dtype))


TENSOR_METHODS = {"cumsum": cumsum, "cumprod": cumprod, "cumsum_": cumsum_, "cumprod_": cumprod_}

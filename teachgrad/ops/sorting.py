"""Sorting: sort, argsort and topk, along one dimension.

The backend sorts (``Backend.sort``: numpy on the CPU, a rank-sort kernel on
``cuda``); the sort is always stable, so equal elements keep their order, which
is what PyTorch's ``stable=True`` promises and what its CPU sort does anyway.
NaN sorts after every number (before them with ``descending=True``).

The gradient of a sort is a permutation back: each sorted value's gradient goes
to the position the value came from, read off the returned indices.
"""
from __future__ import annotations

from collections import namedtuple
from typing import Any

from ..autograd.function import Context, Function
from ..tensor import Tensor
from .dispatch import normalize_dim
from .gather_scatter import along_dim

#: What ``sort`` and ``topk`` return: ``values, indices = x.sort()`` or ``x.sort().values``.
SortResult = namedtuple("sort", ["values", "indices"])
TopKResult = namedtuple("topk", ["values", "indices"])


class Sort(Function):
    rule = "∂sort(a)/∂a: each sorted value's gradient goes back to where it came from"

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int, descending: bool, k: int | None = None):
        backend = ctx.backend
        values, order = backend.sort(a._array, dim, descending)
        if k is not None:  # topk: the first k of the sorted order
            first_k = (slice(None),) * dim + (slice(0, k),)
            values, order = backend.getitem(values, first_k), backend.getitem(order, first_k)
        ctx.shape, ctx.dtype = tuple(a.shape), a.dtype.numpy
        ctx.positions = along_dim(backend, order, dim, backend.shape(order))
        indices = Tensor._make(order, backend, a.device)
        ctx.mark_non_differentiable(indices)
        return values, indices

    @staticmethod
    def backward(ctx: Context, grad: Tensor, _grad_indices: Any):
        back = ctx.backend.index_add(ctx.shape, ctx.dtype, ctx.positions, grad._array)
        return Tensor._make(back, ctx.backend, grad.device), None, None, None


class TopK(Sort):
    rule = "∂topk(a)/∂a: each of the k values' gradient goes back to where it came from, 0 elsewhere"


def _check_bool(name: str, **flags: Any) -> None:
    for what, flag in flags.items():
        if not isinstance(flag, bool):
            raise TypeError(f"{name}(): argument '{what}' must be bool, not {type(flag).__name__}")


def _sorted(fn: type, a: Tensor, dim: int, descending: bool, k: int | None = None) -> tuple:
    """Run ``fn`` along ``dim`` (a 0-d tensor sorts as one element)."""
    if not isinstance(a, Tensor):
        raise TypeError(f"{fn.__name__.lower()}(): argument 'input' must be a tensor, "
                        f"not {type(a).__name__}")
    dim = normalize_dim(dim, a.ndim)
    if a.ndim == 0:
        values, indices = fn.apply(a.reshape(1), 0, descending, k)
        return values.reshape(()), indices.reshape(())
    return fn.apply(a, dim, descending, k)


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> SortResult:  # noqa: A002
    """``(values, indices)`` of ``input`` sorted along ``dim`` (stable whatever ``stable`` says)."""
    _check_bool("sort", descending=descending, stable=stable)
    return SortResult(*_sorted(Sort, input, dim, descending))


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:  # noqa: A002
    """The indices that sort ``input`` along ``dim`` (``sort(...).indices``)."""
    return sort(input, dim, descending, stable).indices


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> TopKResult:  # noqa: A002
    """The ``k`` largest (or smallest) elements along ``dim`` and their indices, largest first.

    Always sorted (PyTorch leaves the order open when ``sorted=False``). Among equal
    values the lower index comes first; PyTorch does not promise which of them it picks.
    """
    _check_bool("topk", largest=largest, sorted=sorted)
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"topk(): argument 'k' must be int, not {type(k).__name__}")
    if isinstance(input, Tensor):
        size = input.shape[normalize_dim(dim, input.ndim)] if input.ndim else 1
        if not 0 <= k <= size:
            raise RuntimeError(f"selected index k out of range (k = {k}, but the dimension has "
                               f"{size} elements). Fix: choose 0 <= k <= {size}")
    return TopKResult(*_sorted(TopK, input, dim, largest, k))


TENSOR_METHODS = {"sort": sort, "argsort": argsort, "topk": topk}

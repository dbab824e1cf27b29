"""Reading and writing along one dimension by index: gather, scatter, index_select and
index_add (the masked ones, which select by a mask, are in :mod:`.masked`).

They are all indexing in disguise. ``x.gather(1, idx)`` reads
``out[i][j] = x[i][idx[i][j]]``: an advanced index whose other dimensions are
"stay where you are" (:func:`along_dim` builds it), so its forward is the same
gather ``x[...]`` runs and its backward the same scatter-add. Writing
(``scatter``, ``index_add``) is the mirror image: its backward *reads* the
gradient back at the written places.

Every index is checked on the host before any work (it is read to check its
bounds, as PyTorch's CPU kernels check them), and the error is PyTorch's.
"""
from __future__ import annotations

from typing import Any

from .. import dtypes
from ..autograd import grad_mode
from ..autograd.function import Context, Function
from ..device import common_device
from ..tensor import Tensor
from . import indexing
from .dispatch import normalize_dim


def along_dim(backend: Any, positions: Any, dim: int, shape: tuple) -> tuple:
    """The index tuple that reads ``positions`` along ``dim`` and stays put along the others:
    ``x[along_dim(...)][i][j][k] == x[i][positions[i][j][k]][k]`` for ``dim = 1``."""
    index = []
    for d, n in enumerate(shape):
        if d == dim:
            index.append(positions)
        else:  # 0, 1, ..., n-1 laid along dimension d (broadcast over the others)
            along = [1] * len(shape)
            along[d] = n
            index.append(backend.reshape(backend.arange(n, "int64"), tuple(along)))
    return tuple(index)


# -- the Functions -------------------------------------------------------------------------
# They take the index as a tensor (never as the positions worked out from it), so a traced
# or saved graph keeps it as an input and works the positions out again for new values.


def vector_positions(index: Any, dim: int) -> tuple:
    """The index tuple that picks the slices ``index`` (1-D) along ``dim``: ``x[:, index]``."""
    return (slice(None),) * dim + (index,)


def read_at(ctx: Context, a: Tensor, positions: tuple) -> Any:
    """``a[positions]`` (a gather), remembering what backward needs to send gradients back."""
    ctx.shape, ctx.dtype, ctx.positions = tuple(a.shape), a.dtype.numpy, positions
    return ctx.backend.getitem(a._array, positions)


def read_back(ctx: Context, grad: Tensor) -> Tensor:
    """The backward of :func:`read_at`: zeros, with each gradient added where it was read."""
    full = ctx.backend.index_add(ctx.shape, ctx.dtype, ctx.positions, grad._array)
    return Tensor._make(full, ctx.backend, grad.device)


class Gather(Function):
    rule = "∂gather(a, idx)/∂a: each gradient goes back to the element it was read from (repeats add up)"

    @staticmethod
    def forward(ctx: Context, a: Tensor, index: Tensor, dim: int):
        return read_at(ctx, a, along_dim(ctx.backend, index._array, dim, tuple(index.shape)))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return read_back(ctx, grad), None, None


class IndexSelect(Gather):
    rule = "∂index_select(a, idx)/∂a: each gradient slice goes back to the slice it came from (repeats add up)"

    @staticmethod
    def forward(ctx: Context, a: Tensor, index: Tensor, dim: int):
        return read_at(ctx, a, vector_positions(index._array, dim))


def add_at(ctx: Context, a: Tensor, src: Tensor, positions: tuple) -> Any:
    """``a`` plus ``src`` added at ``positions`` (repeats add up)."""
    ctx.positions = positions
    added = ctx.backend.index_add(tuple(a.shape), a.dtype.numpy, positions, src._array)
    return ctx.backend.binary("add", a._array, added)


class ScatterAdd(Function):
    rule = "∂(a + scatter_add(src))/∂a = 1;  ∂/∂src: the gradient read at the places src was added to"

    @staticmethod
    def forward(ctx: Context, a: Tensor, src: Tensor, index: Tensor, dim: int):
        return add_at(ctx, a, src, along_dim(ctx.backend, index._array, dim, tuple(index.shape)))

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        dsrc = None
        if ctx.needs_input_grad[1]:
            dsrc = Tensor._make(ctx.backend.getitem(grad._array, ctx.positions), ctx.backend, grad.device)
        return grad, dsrc, None, None


class IndexAdd(ScatterAdd):
    rule = "∂index_add(a, idx, src)/∂a = 1;  ∂/∂src: the gradient slices read at idx"

    @staticmethod
    def forward(ctx: Context, a: Tensor, src: Tensor, index: Tensor, dim: int):
        return add_at(ctx, a, src, vector_positions(index._array, dim))


class Scatter(Function):
    rule = ("∂scatter(a, idx, src)/∂a: the gradient, 0 where a was overwritten;  "
            "∂/∂src: the gradient read at the written places")

    @staticmethod
    def forward(ctx: Context, a: Tensor, src: Any, index: Tensor, dim: int):
        positions = along_dim(ctx.backend, index._array, dim, tuple(index.shape))
        copy = ctx.backend.astype(a._array, a.dtype.numpy)  # astype copies: a stays as it was
        # the write itself, and its gradient, are those of a[positions] = src
        return indexing.IndexPut.forward(ctx, Tensor._make(copy, ctx.backend, a.device), src, positions)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return indexing.IndexPut.backward(ctx, grad) + (None,)


# -- checks ---------------------------------------------------------------------------------


def _check_index_tensor(name: str, t: Tensor, index: Any) -> None:
    if not isinstance(index, Tensor):
        raise TypeError(f"{name}(): argument 'index' must be a tensor, not {type(index).__name__}. "
                        "Fix: wrap it, e.g. tg.tensor([[0, 1]])")
    if index.dtype is not dtypes.int64:
        raise RuntimeError(f"{name}(): Expected dtype int64 for index, got {index.dtype}. "
                           "Fix: convert it with .long()")
    common_device([t, index], name)


def _check_bounds(index: Tensor, size: int, dim: int, kind: type = RuntimeError,
                  message: str | None = None) -> None:
    """Every position in ``[0, size)`` (negative positions are refused, as in PyTorch)."""
    host = index._host()
    bad = host[(host < 0) | (host >= size)]
    if bad.size:
        raise kind(message or f"index {int(bad.flat[0])} is out of bounds for dimension {dim} "
                              f"with size {size}")


def _shape(t: Tensor) -> tuple:
    return tuple(t.shape) or (1,)  # a 0-d tensor indexes like one of shape (1,)


def _check_gather(t: Tensor, dim: int, index: Tensor) -> int:
    _check_index_tensor("gather", t, index)
    if max(index.ndim, 1) != max(t.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    dim = normalize_dim(dim, t.ndim)
    for d, (i, n) in enumerate(zip(_shape(index), _shape(t))):
        if d != dim and i > n:
            raise RuntimeError(f"Size does not match at dimension {d} expected index "
                               f"{list(index.shape)} to be no larger than self {list(t.shape)} "
                               f"apart from dimension {dim}")
    _check_bounds(index, _shape(t)[dim], dim)
    return dim


def _check_scatter(name: str, t: Tensor, dim: int, index: Tensor, src: Any) -> int:
    _check_index_tensor(name, t, index)
    dim = normalize_dim(dim, t.ndim)
    if isinstance(src, Tensor):
        common_device([t, src], name)
        if src.dtype is not t.dtype:
            raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype "
                               f"({t.dtype} and {src.dtype}). Fix: convert src with .to({t.dtype})")
    elif not isinstance(src, (bool, int, float)):
        raise TypeError(f"{name}(): 'src' must be a tensor or a number, not {type(src).__name__}")
    src_shape = _shape(src) if isinstance(src, Tensor) else None
    if max(index.ndim, 1) != max(t.ndim, 1) or (src_shape and len(src_shape) != len(_shape(t))):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor "
                           "(and as src)")
    for d, i in enumerate(_shape(index)):
        if (d != dim and i > _shape(t)[d]) or (src_shape and i > src_shape[d]):
            raise RuntimeError(
                f"Expected index {list(index.shape)} to be no larger than self {list(t.shape)} "
                f"apart from dimension {dim}" + (f" and to be no larger size than src "
                                                 f"{list(src.shape)}" if src_shape else ""))
    _check_bounds(index, _shape(t)[dim], dim)
    return dim


def _check_index_vector(name: str, t: Tensor, dim: int, index: Tensor) -> int:
    _check_index_tensor(name, t, index)
    if index.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector (got {index.ndim} dimensions)")
    dim = normalize_dim(dim, t.ndim)
    size = _shape(t)[dim]
    if name == "index_add":
        _check_bounds(index, size, dim)
    elif dim == 0:  # (PyTorch's CPU kernels word it, and class it, by the dimension)
        _check_bounds(index, size, dim, IndexError, "index out of range in self")
    else:
        _check_bounds(index, size, dim, RuntimeError, f"INDICES element is out of DATA bounds "
                      f"(an index outside [0, {size}) for dimension {dim})")
    return dim


def _src_part(src: Any, index: Tensor) -> Any:
    """The part of ``src`` that ``index`` covers (PyTorch reads no more of it)."""
    if not isinstance(src, Tensor):
        return src
    src = in_shape(src, _shape(src))
    if tuple(src.shape) == _shape(index):
        return src
    return src[tuple(slice(0, n) for n in _shape(index))]


def in_shape(out: Tensor, shape: tuple) -> Tensor:
    """``out`` given back the 0-d shape it was computed without (other shapes pass as they are)."""
    return out if tuple(out.shape) == shape else out.reshape(shape)


# -- the public functions ---------------------------------------------------------------------


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:  # noqa: A002
    """``out[i][j] = input[i][index[i][j]]`` (for ``dim=1``); the result has index's shape."""
    if sparse_grad:
        raise NotImplementedError("gather(sparse_grad=True): teachgrad has no sparse tensors. "
                                  "Fix: leave sparse_grad=False (the gradient is then dense)")
    dim = _check_gather(input, dim, index)
    out = Gather.apply(in_shape(input, _shape(input)), in_shape(index, _shape(index)), dim)
    return in_shape(out, tuple(index.shape))


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``out[i][index[i][j]] += src[i][j]`` (for ``dim=1``)."""
    dim = _check_scatter("scatter_add", input, dim, index, src)
    if not isinstance(src, Tensor):
        raise TypeError("scatter_add(): argument 'src' must be a tensor")
    flat = ScatterAdd.apply(in_shape(input, _shape(input)), _src_part(src, index),
                            in_shape(index, _shape(index)), dim)
    return in_shape(flat, tuple(input.shape))


def scatter(input: Tensor, dim: int, index: Tensor, src: Any = None, *,  # noqa: A002
            value: Any = None, reduce: str | None = None) -> Tensor:
    """A copy of ``input`` with ``out[i][index[i][j]] = src[i][j]`` (or ``= value``)."""
    if reduce is not None:
        raise NotImplementedError(f"scatter(reduce={reduce!r}) is not implemented by teachgrad "
                                  "(PyTorch deprecates it too). Fix: use scatter_add for 'add'")
    if (src is None) == (value is None):
        raise TypeError("scatter() needs exactly one of `src` (a tensor) or `value` (a number)")
    src = value if src is None else src
    dim = _check_scatter("scatter", input, dim, index, src)
    if not isinstance(src, Tensor):
        src = input.dtype.numpy.type(src).item()  # the number in input's dtype
    flat = Scatter.apply(in_shape(input, _shape(input)), _src_part(src, index),
                         in_shape(index, _shape(index)), dim)
    return in_shape(flat, tuple(input.shape))


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:  # noqa: A002
    """The slices of ``input`` at ``index`` along ``dim`` (repeats allowed)."""
    dim = _check_index_vector("index_select", input, dim, index)
    out = IndexSelect.apply(in_shape(input, _shape(input)), in_shape(index, (index.numel(),)), dim)
    return in_shape(out, ()) if input.ndim == 0 else out


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *,  # noqa: A002
              alpha: Any = 1) -> Tensor:
    """A copy of ``input`` with ``alpha * source[k]`` added to slice ``index[k]`` along ``dim``."""
    dim = _check_index_vector("index_add", input, dim, index)
    if not isinstance(source, Tensor):
        raise TypeError(f"index_add(): argument 'source' must be a tensor, not {type(source).__name__}")
    common_device([input, source], "index_add")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_add_(): self ({input.dtype}) and source ({source.dtype}) must "
                           "have the same scalar type. Fix: convert source with .to(self.dtype)")
    shape, given = list(_shape(input)), list(_shape(source))
    if len(given) != len(shape) or given[dim] != index.numel():
        raise RuntimeError(f"index_add_(): Number of indices ({index.numel()}) should be equal to "
                           f"source.size(dim): ({given[dim] if dim < len(given) else 0}), for dim: {dim}")
    if given[:dim] + given[dim + 1:] != shape[:dim] + shape[dim + 1:]:
        raise RuntimeError(f"index_add_(): Source/destination tensor must have same slice shapes "
                           f"(self {list(input.shape)}, source {list(source.shape)})")
    if alpha != 1:
        source = source * alpha
    flat = IndexAdd.apply(in_shape(input, _shape(input)), in_shape(source, tuple(given)),
                          in_shape(index, (index.numel(),)), dim)
    return in_shape(flat, tuple(input.shape))


# -- in place -------------------------------------------------------------------------------


def in_place(t: Tensor, compute: Any, *others: Any) -> Tensor:
    """Write ``compute(t)`` (an out-of-place result of t's shape) into t's own storage;
    recorded by autograd as ``add_`` is (see ``tensor_inplace.py``)."""
    wanting = next((o for o in others if isinstance(o, Tensor) and o.requires_grad), None)
    if t._records(wanting):
        return t._record_inplace(compute)
    with grad_mode.no_grad():
        result = compute(t.detach())
    return t._inplace(result)


def scatter_(self: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None,
             reduce: str | None = None) -> Tensor:
    if reduce is not None:
        scatter(self, dim, index, src, value=value, reduce=reduce)  # (its error)
    _check_scatter("scatter_", self, dim, index, value if src is None else src)
    return in_place(self, lambda old: scatter(old, dim, index, src, value=value), src)


def scatter_add_(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    _check_scatter("scatter_add_", self, dim, index, src)
    return in_place(self, lambda old: scatter_add(old, dim, index, src), src)


def index_add_(self: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:
    return in_place(self, lambda old: index_add(old, dim, index, source, alpha=alpha), source)


TENSOR_METHODS = {
    "gather": gather, "scatter": scatter, "scatter_add": scatter_add, "index_select": index_select,
    "index_add": index_add, "scatter_": scatter_, "scatter_add_": scatter_add_,
    "index_add_": index_add_,
}

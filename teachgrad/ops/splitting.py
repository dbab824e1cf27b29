"""Cutting a tensor into pieces: split, chunk and unbind.

Each piece is a slice, ``x[:, 2:4]`` or ``x[i]``: a view of the same memory, made by
the indexing Function, so the pieces' gradients land in the right places of one
gradient for ``x`` (the engine adds them up).
"""
from __future__ import annotations

from typing import Any, Sequence

from ..tensor import Tensor
from .dispatch import normalize_dim
from .indexing import Index


def _check_tensor(name: str, t: Any) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}(): argument 'tensor' must be a tensor, not {type(t).__name__}")
    if t.ndim == 0:
        raise RuntimeError(f"{name} expects at least a 1-dimensional tensor")


def _slices(t: Tensor, dim: int, sizes: Sequence[int]) -> tuple:
    """``t[:, ..., start:start + size]`` along ``dim`` for each size. The index is slices
    only, within ``t``'s dimensions, so it goes to the indexing Function as it is (what
    ``t[index]`` would make of it after checking it)."""
    pieces, start = [], 0
    lead = (slice(None),) * dim
    for size in sizes:
        pieces.append(Index.apply(t, lead + (slice(start, start + size),)))
        start += size
    return tuple(pieces)


def _sizes_of(split_size: int, n: int) -> list[int]:
    """Pieces of ``split_size`` along a dimension of ``n``, the last one smaller if need be."""
    if isinstance(split_size, bool) or not isinstance(split_size, int):
        raise TypeError(f"split(): split_size must be an int or a list of ints, "
                        f"not {type(split_size).__name__}")
    if split_size < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={split_size}")
    if split_size == 0:
        if n:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}")
        return [0]
    return [min(split_size, n - start) for start in range(0, n, split_size)] or [0]


def split(tensor: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple:
    """Pieces of ``split_size_or_sections`` each along ``dim``, or of the listed sizes."""
    _check_tensor("split", tensor)
    dim = normalize_dim(dim, tensor.ndim)
    n = tensor.shape[dim]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = list(split_size_or_sections)
        if any(isinstance(s, bool) or not isinstance(s, int) for s in sizes):
            raise TypeError(f"split(): the sizes must be ints, got {sizes}")
        if any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes have only non-negative "
                               f"entries, but got split_sizes={sizes}")
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                               f"tensor's size at dimension {dim}), but got split_sizes={sizes}")
    else:
        sizes = _sizes_of(split_size_or_sections, n)
    return _slices(tensor, dim, sizes)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:  # noqa: A002
    """At most ``chunks`` pieces of equal size along ``dim`` (the last may be smaller, and
    there may be fewer: ``split`` with ``ceil(n / chunks)``, as in PyTorch)."""
    _check_tensor("chunk", input)
    if isinstance(chunks, bool) or not isinstance(chunks, int):
        raise TypeError(f"chunk(): argument 'chunks' must be int, not {type(chunks).__name__}")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    dim = normalize_dim(dim, input.ndim)
    n = input.shape[dim]
    if n == 0:  # nothing to share out: `chunks` empty pieces
        return _slices(input, dim, [0] * chunks)
    return _slices(input, dim, _sizes_of(-(-n // chunks), n))


def unbind(input: Tensor, dim: int = 0) -> tuple:  # noqa: A002
    """Every slice ``input[..., i, ...]`` along ``dim``, that dimension removed."""
    if isinstance(input, Tensor) and input.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    _check_tensor("unbind", input)
    dim = normalize_dim(dim, input.ndim)
    lead = (slice(None),) * dim
    return tuple(input[lead + (i,)] for i in range(input.shape[dim]))


def _split_method(self: Tensor, split_size: Any, dim: int = 0) -> tuple:
    return split(self, split_size, dim)


TENSOR_METHODS = {"split": _split_method, "chunk": chunk, "unbind": unbind}

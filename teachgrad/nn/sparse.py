"""``Embedding``: a learned vector for every token id (a lookup table of rows)."""
from __future__ import annotations

from typing import Any

import teachgrad as tg
from teachgrad.ops.embedding import EmbeddingLookup
from teachgrad.tensor import Tensor

from . import init
from .module import Module
from .parameter import Parameter

_UNSUPPORTED = {"max_norm": None, "scale_grad_by_freq": False, "sparse": False}


def _reject_unsupported(name: str, options: dict[str, Any]) -> None:
    for option, default in _UNSUPPORTED.items():
        if options.get(option, default) != default:
            raise NotImplementedError(
                f"{name}: teachgrad does not support {option}={options[option]!r} "
                f"(only the default, {default!r})."
            )


def _check_padding_idx(padding_idx: int | None, num_embeddings: int) -> int | None:
    """``padding_idx`` as a non-negative row number (negative counts from the end), checked."""
    if padding_idx is None:
        return None
    if not isinstance(padding_idx, int) or isinstance(padding_idx, bool) or \
            not -num_embeddings <= padding_idx < num_embeddings:
        raise AssertionError(f"Padding_idx must be within num_embeddings (an int in "
                             f"[{-num_embeddings}, {num_embeddings - 1}]), got {padding_idx!r}")
    return padding_idx % num_embeddings


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Row ``input[...]`` of ``weight`` for every index: output shape ``input.shape + (dim,)``.

    As ``torch.nn.functional.embedding``; the row ``padding_idx`` gets no gradient.
    """
    _reject_unsupported("embedding", {"max_norm": max_norm, "scale_grad_by_freq": scale_grad_by_freq,
                                      "sparse": sparse})
    if not isinstance(weight, Tensor) or weight.ndim != 2:
        raise RuntimeError("embedding: weight must be a 2-D tensor (num_embeddings, embedding_dim)")
    if not isinstance(input, Tensor) or input.dtype != tg.int64:
        got = input.dtype if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError(
            f"Expected tensor for argument #1 'indices' to have scalar type Long; but got {got} "
            "instead. Fix: pass integer token ids, e.g. indices.long()."
        )
    if input.device != weight.device:
        raise RuntimeError(f"embedding: indices are on {input.device} but the table is on "
                           f"{weight.device}. Fix: move the indices with .to('{weight.device}').")
    # (the ids' range is checked by EmbeddingLookup itself, so a compiled graph keeps it)
    return EmbeddingLookup.apply(weight, input, _check_padding_idx(padding_idx, weight.shape[0]))


class Embedding(Module):
    """A table of ``num_embeddings`` learned vectors of size ``embedding_dim``.

    Initialised from N(0, 1) as in PyTorch, with the ``padding_idx`` row (if
    any) set to zeros and left out of training.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Tensor | None = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _reject_unsupported("Embedding", {"max_norm": max_norm, "sparse": sparse,
                                          "scale_grad_by_freq": scale_grad_by_freq})
        for name, value in (("num_embeddings", num_embeddings), ("embedding_dim", embedding_dim)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = _check_padding_idx(padding_idx, num_embeddings)
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = Parameter(tg.empty((num_embeddings, embedding_dim), device=device,
                                             dtype=dtype), requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with tg.no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input: Tensor) -> Tensor:
        return embedding(input, self.weight, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, **options: Any) -> "Embedding":
        """An ``Embedding`` holding ``embeddings`` (2-D), frozen unless ``freeze=False``."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        rows, dim = embeddings.shape
        return cls(rows, dim, padding_idx, _weight=embeddings, _freeze=freeze, **options)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        return text + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")

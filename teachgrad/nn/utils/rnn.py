"""``teachgrad.nn.utils.rnn``: batching sequences of different lengths, as ``torch.nn.utils.rnn``.

:func:`pad_sequence` stacks sequences of different lengths into one tensor,
filling the short ones with ``padding_value``. PyTorch's packed sequences
(``pack_padded_sequence`` and friends) are not implemented: calling them says
what to do instead.
"""
from __future__ import annotations

from typing import Any, Sequence

import teachgrad as tg
from teachgrad.tensor import Tensor

from ..recurrent_checks import PACKED_MESSAGE


def pad_sequence(sequences: Tensor | Sequence[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Pad ``L_i x *`` tensors to the longest length ``L`` and stack them.

    Returns ``(L, B, *)``, or ``(B, L, *)`` with ``batch_first``; the padding goes
    after each sequence (``padding_side="right"``) or before it (``"left"``).
    Gradients flow back to every sequence (the padding gets none).
    """
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = [sequences[i] for i in range(sequences.shape[0])]  # its rows, as PyTorch
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    _check_alike(sequences)
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        fill = tg.full((longest - s.shape[0],) + tuple(s.shape[1:]), padding_value,
                       dtype=s.dtype, device=s.device)
        padded.append(tg.cat([s, fill] if padding_side == "right" else [fill, s], dim=0))
    return tg.stack(padded, dim=0 if batch_first else 1)


def _check_alike(sequences: list[Any]) -> None:
    """Every sequence a tensor of at least one dimension, with the first one's trailing
    shape, dtype and device (the padded batch is one tensor)."""
    first = sequences[0]
    for k, s in enumerate(sequences):
        if not isinstance(s, Tensor):
            raise TypeError(f"pad_sequence: sequence {k} is a {type(s).__name__}, not a Tensor")
        if s.ndim == 0:
            raise RuntimeError(f"pad_sequence: sequence {k} is 0-d; each sequence needs a "
                               "length dimension first (e.g. s.reshape(1))")
        if tuple(s.shape[1:]) != tuple(first.shape[1:]):
            raise RuntimeError(
                f"pad_sequence: sequence {k} has shape {tuple(s.shape)} and sequence 0 "
                f"{tuple(first.shape)}; all must agree after the first (length) dimension")
        if s.dtype is not first.dtype or s.device != first.device:
            raise RuntimeError(
                f"pad_sequence: sequence {k} is {s.dtype} on {s.device} and sequence 0 "
                f"{first.dtype} on {first.device}; convert them to one dtype and device first")


def _not_implemented(name: str) -> NotImplementedError:
    return NotImplementedError(PACKED_MESSAGE.format(name=name))


def pack_padded_sequence(input: Any, lengths: Any, batch_first: bool = False,
                         enforce_sorted: bool = True) -> Any:
    """Not implemented: raises, saying how to use a padded batch instead."""
    raise _not_implemented("pack_padded_sequence")


def pack_sequence(sequences: Any, enforce_sorted: bool = True) -> Any:
    """Not implemented: raises, saying how to use a padded batch instead."""
    raise _not_implemented("pack_sequence")


def pad_packed_sequence(sequence: Any, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> Any:
    """Not implemented: raises, saying how to use a padded batch instead."""
    raise _not_implemented("pad_packed_sequence")


class PackedSequence:
    """Not implemented: making one raises, saying how to use a padded batch instead."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise _not_implemented("PackedSequence")

"""``teachgrad.nn.utils``: gradient clipping, as ``torch.nn.utils``, and
:mod:`~teachgrad.nn.utils.rnn` (``pad_sequence``).

Call either between ``loss.backward()`` and ``optimizer.step()``::

    loss.backward()
    tg.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
"""
from __future__ import annotations

import math
from typing import Iterable

import teachgrad as tg
from teachgrad.tensor import Tensor

from . import rnn  # noqa: F401  (tg.nn.utils.rnn.pad_sequence, as in PyTorch)


def _grads(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    """The gradients that exist, of one tensor or of an iterable of them."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"expected Tensors (e.g. model.parameters()), got {type(p).__name__}")
    return [p.grad for p in params if p.grad is not None]


def _norm_type(norm_type: float | str) -> float:
    """A positive order, inf (``"inf"`` too) or 0, which counts nonzero elements as PyTorch's
    ``vector_norm`` does. Negative orders, which PyTorch also takes, are refused: the
    smallest magnitudes would decide the clipping, and any zero gradient makes it 0."""
    value = norm_type
    if isinstance(norm_type, str) and norm_type.lower() in ("inf", "+inf"):
        value = math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"norm_type must be a positive number or inf, got {norm_type!r} (or 0, "
                         "which counts the nonzero gradients, as in PyTorch; teachgrad refuses "
                         "the negative orders PyTorch takes: any zero gradient makes their norm 0)")
    return float(value)


def _vector_norm(t: Tensor, p: float) -> Tensor:
    """``||t||_p`` over every element, as ``torch.linalg.vector_norm``, as a 0-d tensor.

    ``p`` = inf: the largest magnitude; 0: how many elements are not zero (the
    "0-norm", not a norm at all, but what PyTorch computes); otherwise ``(Σ|t|^p)^(1/p)``.
    """
    magnitude = t.abs()
    if t.numel() == 0:
        return tg.zeros((), dtype=t.dtype, device=t.device)
    if p == math.inf:
        return magnitude.max()
    if p == 0:
        return (magnitude != 0).to(t.dtype).sum()
    return (magnitude ** p).sum() ** (1.0 / p)


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                    norm_type: float | str = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale every gradient by the same factor so that their joint norm is at most ``max_norm``.

    The norm is taken over all gradients together, as if concatenated into one
    vector; the factor is ``max_norm / (total_norm + 1e-6)``, capped at 1 (small
    gradients are left alone). Returns the total norm *before* clipping.
    ``norm_type`` is the order: 2 (Euclidean), any positive number, ``inf`` (the
    largest magnitude) or 0 (as PyTorch: each gradient's count of nonzero elements,
    then the count of gradients where that is not zero).
    """
    p = _norm_type(norm_type)
    if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float)):
        raise TypeError(f"max_norm must be a number, got {max_norm!r}")
    grads = _grads(parameters)
    if not grads:
        return tg.tensor(0.0)
    with tg.no_grad():
        device = grads[0].device
        norms = [_vector_norm(g, p).to(device=device, dtype=tg.float64) for g in grads]
        total = _vector_norm(tg.stack(norms), p)
        value = total.item()
        if error_if_nonfinite and not math.isfinite(value):
            raise RuntimeError(
                f"The total norm of order {p} for gradients from `parameters` is non-finite, so "
                "it cannot be clipped. To disable this error and scale the gradients by the "
                "non-finite norm anyway, set `error_if_nonfinite=False`"
            )
        factor = min(max_norm / (value + 1e-6), 1.0) if not math.isnan(value) else math.nan
        for g in grads:
            g.mul_(factor)
    return total.to(grads[0].dtype)


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient element into ``[-clip_value, clip_value]``, in place."""
    if isinstance(clip_value, bool) or not isinstance(clip_value, (int, float)):
        raise TypeError(f"clip_value must be a number, got {clip_value!r}")
    clip_value = float(clip_value)
    grads = _grads(parameters)
    with tg.no_grad():
        for g in grads:
            g.clamp_(-clip_value, clip_value)

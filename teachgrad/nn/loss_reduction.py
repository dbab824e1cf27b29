"""What every loss shares: ``reduction`` (``'mean'``, ``'sum'`` or ``'none'``) and the
refusal of PyTorch's long-deprecated ``size_average=`` / ``reduce=``. (A module of its own
so that the losses in their own files and ``functional`` can both use it.)"""
from __future__ import annotations

from teachgrad.tensor import Tensor

REDUCTIONS = ("mean", "sum", "none")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    """Apply ``reduction`` to a tensor of per-element losses."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_reduction(reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _check_loss_options(name: str, reduction: str, options: dict) -> None:
    """``reduction`` is known, and PyTorch's long-deprecated options are refused by name."""
    for key in options:
        if key in ("size_average", "reduce"):
            raise TypeError(f"teachgrad does not support {name}({key}=...), deprecated in "
                            "PyTorch. Fix: use reduction='mean', 'sum' or 'none'")
        raise TypeError(f"{name}() got an unexpected keyword argument '{key}'")
    _check_reduction(reduction)

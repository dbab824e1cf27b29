"""Stochastic gradient descent, with momentum, dampening, weight decay and Nesterov.

The rule, for a parameter θ with gradient g (PyTorch's documented algorithm)::

    if weight_decay ≠ 0:  g ← g + weight_decay · θ
    if momentum ≠ 0:
        b ← g                                   on the first step
        b ← momentum · b + (1 − dampening) · g   afterwards
        g ← g + momentum · b   if nesterov   else   g ← b
    θ ← θ − lr · g
"""
from __future__ import annotations

from typing import Any


from teachgrad.tensor import Tensor

from .optimizer import (Group, Optimizer, ParamsT, State, check_non_negative, check_options,
                        declare_step, run_plugged_step)


class SGD(Optimizer):
    """``θ ← θ − lr · g``, optionally with momentum (a running sum of past gradients)."""

    def __init__(
        self, params: ParamsT, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
        weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
        **options: Any,
    ) -> None:
        check_options(type(self).__name__, options)
        check_non_negative("learning rate", lr)
        check_non_negative("momentum value", momentum)
        check_non_negative("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def update_parameter(self, param: Tensor, grad: Tensor, state: State, group: Group) -> None:
        if SGD_STEP.fn is None:
            sgd_step(param, grad, state, group)
        else:
            run_plugged_step(SGD_STEP, param, grad, state, group)


def sgd_step(param: Tensor, grad: Tensor, state: State, group: Group) -> Tensor:
    """One SGD update of ``param`` (in place), keeping its momentum buffer in ``state``;
    returns ``param`` (the ``optim.sgd_step`` part's own implementation)."""
    momentum = group["momentum"]
    if group["maximize"]:
        grad = -grad  # climb instead of descend
    if group["weight_decay"] != 0:
        grad = grad + group["weight_decay"] * param  # gradient of (wd/2)·|θ|²
    if momentum != 0:
        buffer = state.get("momentum_buffer")
        if buffer is None:
            buffer = grad.detach().clone()
            state["momentum_buffer"] = buffer
        else:
            buffer.mul_(momentum).add_(grad, alpha=1 - group["dampening"])
        # Nesterov looks one momentum step ahead.
        grad = grad + momentum * buffer if group["nesterov"] else buffer
    return param.add_(grad, alpha=-group["lr"])


SGD_STEP = declare_step("optim.sgd_step", sgd_step, "momentum_buffer")

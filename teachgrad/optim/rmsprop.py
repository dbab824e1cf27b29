"""RMSprop: divide each gradient by a running root-mean-square of recent gradients.

The rule, for a parameter θ with gradient g (PyTorch's documented algorithm)::

    if weight_decay ≠ 0:  g ← g + weight_decay · θ
    v ← α · v + (1 − α) · g²                        running mean of g²
    ṽ ← v
    if centered:
        g_avg ← α · g_avg + (1 − α) · g             running mean of g
        ṽ ← ṽ − g_avg²                              a running variance instead
    if momentum > 0:
        b ← momentum · b + g / (√ṽ + eps)
        θ ← θ − lr · b
    else:
        θ ← θ − lr · g / (√ṽ + eps)
"""
from __future__ import annotations

from typing import Any


import teachgrad as tg
from teachgrad.tensor import Tensor

from .optimizer import Group, Optimizer, ParamsT, State, check_non_negative, check_options


class RMSprop(Optimizer):
    """RMSprop (Hinton's lecture notes), optionally centered and with momentum."""

    def __init__(
        self, params: ParamsT, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
        weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
        *, maximize: bool = False,
        **options: Any,
    ) -> None:
        check_options(type(self).__name__, options)
        check_non_negative("learning rate", lr)
        check_non_negative("epsilon value", eps)
        check_non_negative("momentum value", momentum)
        check_non_negative("weight_decay value", weight_decay)
        check_non_negative("alpha value", alpha)
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                        momentum=momentum, centered=centered, maximize=maximize)
        super().__init__(params, defaults)

    def update_parameter(self, param: Tensor, grad: Tensor, state: State, group: Group) -> None:
        alpha, momentum = group["alpha"], group["momentum"]
        if not state:
            state["step"] = 0
            state["square_avg"] = tg.zeros_like(param)
            if momentum > 0:
                state["momentum_buffer"] = tg.zeros_like(param)
            if group["centered"]:
                state["grad_avg"] = tg.zeros_like(param)
        state["step"] += 1

        if group["maximize"]:
            grad = -grad
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * param

        square_avg = state["square_avg"]
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)  # v ← α·v + (1 − α)·g²
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.lerp_(grad, 1 - alpha)  # ḡ ← α·ḡ + (1 − α)·g
            root_mean_square = (square_avg - grad_avg * grad_avg).sqrt()
        else:
            root_mean_square = square_avg.sqrt()
        denominator = root_mean_square.add_(group["eps"])  # (a new tensor: adding in place is safe)

        if momentum > 0:
            buffer = state["momentum_buffer"]
            buffer.mul_(momentum).addcdiv_(grad, denominator)
            param.add_(buffer, alpha=-group["lr"])
        else:
            param.addcdiv_(grad, denominator, value=-group["lr"])

"""Adam and AdamW: gradient steps scaled by running estimates of the gradient's moments.

Adam, for a parameter θ with gradient g at step t (PyTorch's documented algorithm)::

    if weight_decay ≠ 0:  g ← g + weight_decay · θ          (Adam: L2 penalty in the gradient)
    m ← β1 · m + (1 − β1) · g                                 first moment: mean of g
    v ← β2 · v + (1 − β2) · g²                                second moment: mean of g²
    m̂ ← m / (1 − β1^t)                                         both start at 0, so early
    v̂ ← v / (1 − β2^t)     (amsgrad: v_max ← max(v_max, v);  v̂ ← v_max / (1 − β2^t))
    θ ← θ − lr · m̂ / (√v̂ + eps)

AdamW decouples the weight decay: ``θ ← θ · (1 − lr · weight_decay)`` before the
same update, with nothing added to g.
"""
from __future__ import annotations

from typing import Any

import math

import teachgrad as tg
from teachgrad.autograd import function as _function
from teachgrad.ops.dispatch import number_in_dtype
from teachgrad.streams.stream import capturing as _capturing_streams
from teachgrad.tensor import Tensor

from .optimizer import (Group, Optimizer, ParamsT, State, check_non_negative, check_options,
                        declare_step, run_plugged_step)


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015), optionally with the AMSGrad variant."""

    #: AdamW sets this: weight decay shrinks θ directly instead of entering the gradient.
    decoupled_weight_decay = False

    def __init__(
        self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *, maximize: bool = False,
        **options: Any,
    ) -> None:
        check_options(type(self).__name__, options)
        check_non_negative("learning rate", lr)
        check_non_negative("epsilon value", eps)
        check_non_negative("weight_decay value", weight_decay)
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta} (it must be in [0, 1))")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize)
        super().__init__(params, defaults)

    def update_parameter(self, param: Tensor, grad: Tensor, state: State, group: Group) -> None:
        if _capturing_streams:  # a CUDA graph would freeze the host-side step count
            from teachgrad.streams.graphs import refuse_host_step

            refuse_host_step(type(self).__name__)
        if self.decoupled_weight_decay or ADAM_STEP.fn is None:  # (AdamW: always its own)
            if not adam_step_in_one_call(param, grad, state, group, self.decoupled_weight_decay):
                adam_step(param, grad, state, group, self.decoupled_weight_decay)
        else:
            run_plugged_step(ADAM_STEP, param, grad, state, group)


def adam_step(param: Tensor, grad: Tensor, state: State, group: Group,
              decoupled_weight_decay: bool = False) -> Tensor:
    """One Adam update of ``param`` (in place), keeping step, moments in ``state``;
    returns ``param`` (the ``optim.adam_step`` part's own implementation)."""
    beta1, beta2 = group["betas"]
    lr, weight_decay = group["lr"], group["weight_decay"]
    if not state:  # first step: both moments start at zero
        state["step"] = 0
        state["exp_avg"] = tg.zeros_like(param)
        state["exp_avg_sq"] = tg.zeros_like(param)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = tg.zeros_like(param)
    state["step"] += 1
    step = state["step"]

    if group["maximize"]:
        grad = -grad
    if weight_decay != 0:
        if decoupled_weight_decay:
            param.mul_(1 - lr * weight_decay)
        else:
            grad = grad + weight_decay * param

    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    # m ← β1·m + (1 − β1)·g is a step from m toward g: m.lerp_(g, 1 − β1). lerp_, addcmul_
    # and addcdiv_ each do two operations in one call, in place, as in PyTorch's Adam
    # (one pass over memory each, for large arrays: backends/pointwise_loops.py).
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

    # Bias correction: m and v are averages that started at 0, so early on they
    # underestimate; dividing by (1 - beta^t) undoes that.
    bias_correction1 = 1 - beta1**step
    bias_correction2_sqrt = math.sqrt(1 - beta2**step)
    if group["amsgrad"]:
        max_exp_avg_sq = state["max_exp_avg_sq"]
        max_exp_avg_sq.copy_(tg.maximum(max_exp_avg_sq, exp_avg_sq))
        second_moment = max_exp_avg_sq
    else:
        second_moment = exp_avg_sq
    denominator = second_moment.sqrt().div_(bias_correction2_sqrt).add_(group["eps"])
    return param.addcdiv_(exp_avg, denominator, value=-lr / bias_correction1)  # θ ← θ − lr·m̂/(√v̂ + eps)


def adam_step_in_one_call(param: Tensor, grad: Tensor, state: State, group: Group,
                          decoupled_weight_decay: bool) -> bool:
    """:func:`adam_step`'s update as one call of the backend (on the CPU one compiled pass
    over memory, ``backends/adam_loop.py``, with the same bits), where the backend has it
    and the four tensors are alike (dtype, shape, device). True when it ran.

    Not taken at the first step (:func:`adam_step` makes the state), for AMSGrad, nor while
    a tool watches every operation (the profiler): it sees :func:`adam_step`'s operations,
    as the chapters show them.
    """
    if not state or group["amsgrad"] or _function.observer is not None:
        return False
    backend = param._backend
    if grad._backend is not backend or grad.device != param.device:
        return False
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    if not (isinstance(exp_avg, Tensor) and isinstance(exp_avg_sq, Tensor)
            and exp_avg._backend is backend and exp_avg_sq._backend is backend):
        return False
    beta1, beta2 = group["betas"]
    lr, weight_decay = group["lr"], group["weight_decay"]
    for number in (beta1, beta2, lr, weight_decay, group["eps"], state["step"]):
        if type(number) is not float and type(number) is not int:
            return False  # (a tensor lr or step, as a loaded state may have: adam_step's way)
    param._check_writable()
    step = state["step"] + 1
    dtype = param.dtype
    lerp_weight = number_in_dtype(1 - beta1, dtype)  # (as Tensor.lerp_ rounds it)
    if weight_decay == 0:
        decay_mode, decay = "none", 0.0
    elif decoupled_weight_decay:
        decay_mode, decay = "decoupled", 1 - lr * weight_decay  # θ ← θ · (1 − lr · λ)
    else:
        decay_mode, decay = "gradient", weight_decay  # g ← g + λ · θ
    numbers = dict(
        lerp_weight=lerp_weight, lerp_weight_minus_one=lerp_weight - 1, beta2=beta2,
        one_minus_beta2=number_in_dtype(1 - beta2, dtype),
        bias_correction2_sqrt=math.sqrt(1 - beta2**step), eps=group["eps"],
        step_size=number_in_dtype(-lr / (1 - beta1**step), dtype),
        decay_mode=decay_mode, decay=decay, maximize=bool(group["maximize"]))
    if not backend.adam_update(param._array, grad._array, exp_avg._array, exp_avg_sq._array,
                               numbers):
        return False
    state["step"] = step
    for t in (param, exp_avg, exp_avg_sq):
        t._bump_version()
    return True


ADAM_STEP = declare_step("optim.adam_step", adam_step, "step, exp_avg, exp_avg_sq")


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019); default decay 0.01."""

    decoupled_weight_decay = True

    def __init__(
        self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, **options)

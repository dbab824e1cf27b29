"""Adam's and AdamW's whole update of one parameter in one pass over memory.

``optim/adam.py`` writes the update as PyTorch's documentation does, one tensor operation
per line::

    θ ← θ · (1 − lr · λ)                      (AdamW; Adam with λ ≠ 0: g ← g + λ · θ)
    m.lerp_(g, 1 − β1)
    v.mul_(β2).addcmul_(g, g, value=1 − β2)
    d = v.sqrt().div_(√(1 − β2^t)).add_(eps)
    θ.addcdiv_(m, d, value=−lr / (1 − β1^t))

That is seven or eight walks over the parameter's memory, each a Python call with its
checks: for a model of many small parameters the calls cost more than the arithmetic,
and for a large one the walks do. PyTorch has the same choice (its ``fused=True`` Adam).

The loop below does, for each element, the same operations in the same order and the
same dtype (the numbers arrive in the arrays' dtype; no fused multiply-add, since numba
asks LLVM for none unless told ``fastmath``), so it gives the same bits as the tensor
operations, which ``tests/engine/test_adam_loop.py`` checks. ``Adam`` takes it on the CPU
when nothing watches the operations; the readable update stays the teaching path and
the one every other case runs.
"""
from __future__ import annotations

import math

from numba import njit

#: how the weight decay enters: none, in the gradient (Adam), or on θ itself (AdamW); the
#: loop takes the position in this tuple
DECAY_MODES = ("none", "gradient", "decoupled")
NO_DECAY, DECAY_IN_GRADIENT, DECOUPLED_DECAY = 0, 1, 2


#: the order of the numbers in the loop's ``numbers`` array
NUMBERS = ("lerp_weight", "lerp_weight_minus_one", "beta2", "one_minus_beta2",
           "bias_correction2_sqrt", "eps", "step_size", "decay")


# error_model="numpy": x / 0 gives ±inf or nan, as numpy's division does, instead of raising
@njit(cache=True, error_model="numpy")
def adam_update(param, grad, exp_avg, exp_avg_sq, numbers, decay_mode, maximize):
    """One Adam step, in place, on 1-D arrays of one length and dtype; ``numbers`` holds
    the step's numbers in that dtype, in the order of ``NUMBERS`` (one array: numba checks
    each argument's type at every call, and that costs more than the loop on small arrays).

    ``decay`` is ``λ`` for ``DECAY_IN_GRADIENT`` and ``1 − lr · λ`` for ``DECOUPLED_DECAY``;
    ``step_size`` is ``−lr / (1 − β1^t)``. The lerp is two-ended as ``Tensor.lerp_`` is
    (from ``g`` when the weight is at least a half)."""
    lerp_weight, lerp_weight_minus_one = numbers[0], numbers[1]
    beta2, one_minus_beta2, bias_correction2_sqrt = numbers[2], numbers[3], numbers[4]
    eps, step_size, decay = numbers[5], numbers[6], numbers[7]
    near_start = abs(lerp_weight) < 0.5
    for i in range(param.size):
        g = grad[i]
        if maximize:
            g = -g
        p = param[i]
        if decay_mode == DECAY_IN_GRADIENT:
            g = g + decay * p
        elif decay_mode == DECOUPLED_DECAY:
            p = p * decay
        m = exp_avg[i]
        if near_start:
            m = m + (g - m) * lerp_weight
        else:
            m = (g - m) * lerp_weight_minus_one + g
        v = exp_avg_sq[i] * beta2
        v = v + (g * g) * one_minus_beta2
        denominator = math.sqrt(v) / bias_correction2_sqrt + eps
        exp_avg[i] = m
        exp_avg_sq[i] = v
        param[i] = p + (m / denominator) * step_size

"""Autograd: recording operations and running them backwards.

``teachgrad.autograd.Function`` is how every differentiable operation is
written (yours too); :mod:`.engine` holds the one backward engine, which can
run to the end or one step at a time.
"""
from .engine import BackwardStep, backward_steps, run_backward
from .function import AccumulateGrad, Context, Function, FunctionCtx, Node
from .grad_mode import (
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)
from .grad import grad
from .gradcheck import GradcheckError, gradcheck


def backward(tensors, grad_tensors=None, retain_graph: bool = False) -> None:
    """``tg.autograd.backward(loss)``: the same as ``loss.backward()``."""
    run_backward(tensors, grad_tensors, retain_graph)


__all__ = [
    "Function", "Context", "FunctionCtx", "Node", "AccumulateGrad", "BackwardStep",
    "backward", "grad", "backward_steps", "run_backward", "gradcheck", "GradcheckError",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
    "is_inference_mode_enabled",
]

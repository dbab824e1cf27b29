"""What ``inplace=True`` means for a layer or function (``ReLU(inplace=True)``,
``F.elu_``...), in one place."""
from __future__ import annotations

import teachgrad as tg
from teachgrad.tensor import Tensor


def inplace_result(input: Tensor, result: Tensor, inplace: bool) -> Tensor:
    """``result``, or with ``inplace=True`` written over ``input`` (which is returned).

    teachgrad cannot record an in-place change inside the graph. So when ``input``
    was made by a recorded operation (``nn.ReLU(inplace=True)`` in training), the
    result comes back as a new tensor instead: the value and the gradients are
    PyTorch's, only ``input`` itself keeps its old values. Use the returned tensor.
    """
    if not inplace:
        return result
    if tg.is_grad_enabled() and input.requires_grad and not input.is_leaf:
        return result
    if tg.is_grad_enabled() and input.requires_grad:
        raise RuntimeError(
            "inplace=True would overwrite a leaf tensor that requires grad (a parameter or an "
            "input made with requires_grad=True), which autograd forbids. Fix: pass "
            "inplace=False (the default), or call it under tg.no_grad()."
        )
    return input.copy_(result)

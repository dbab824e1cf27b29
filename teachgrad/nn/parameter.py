"""``Parameter``: a tensor that a Module should train.

A Parameter is an ordinary tensor with two differences: it requires grad by
default, and assigning it to an attribute of a :class:`~teachgrad.nn.Module`
registers it, so that ``model.parameters()`` finds it. That is all.
"""
from __future__ import annotations

from typing import Any, Iterable

from teachgrad.tensor import Tensor


class Parameter(Tensor):
    """Wrap ``data`` as a trainable tensor (``requires_grad=True`` unless told otherwise).

    Like PyTorch, the Parameter shares memory with ``data``; results of
    operations on a Parameter are plain tensors.
    """

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        if data is None:
            from teachgrad.tensor import tensor
            data = tensor([])
        if not isinstance(data, Tensor):
            raise TypeError(
                f"Parameter needs a Tensor, got {type(data).__name__}. "
                "Fix: nn.Parameter(tg.tensor(values))"
            )
        # Share data's storage; start as a fresh leaf outside any graph.
        self._init(data._array, data._backend, data.device)
        # ...and its version counter: an in-place change of data after use is noticed
        self._version_counter = data._version_counter
        self.requires_grad_(requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict[int, Any]) -> "Parameter":
        # copy.deepcopy(model) should give independent parameters, not shared storage.
        if id(self) in memo:
            return memo[id(self)]
        copied = Parameter(self.detach().clone(), self.requires_grad)
        memo[id(self)] = copied
        return copied


def forget_grads(params: Iterable[Tensor], set_to_none: bool = True) -> None:
    """What ``zero_grad`` does for a module and an optimizer alike: each gradient
    becomes ``None`` (the default, as in PyTorch) or is zeroed in place."""
    for param in params:
        if param.grad is None:
            continue
        if set_to_none:
            param.grad = None
        else:
            param.grad.detach().zero_()

"""The in-place methods of :class:`~teachgrad.tensor.Tensor` (``add_``, ``+=``, ``copy_``, ...).

An in-place operation writes into the tensor's own storage instead of making a
new tensor. That is what an optimizer step wants (no new arrays for every
weight), and it is also why autograd restricts it: a leaf that requires grad
may only be changed under ``tg.no_grad()``, and every change bumps the tensor's
version counter, so a backward that saved the old values notices and refuses.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import dtypes
from .autograd import function, grad_mode
from .device import common_device
from .dtypes import DType

if TYPE_CHECKING:  # pragma: no cover
    from .tensor import Tensor


class InPlaceMethods:
    """Mixed into ``Tensor``; every method checks the autograd rules before it writes."""

    __slots__ = ()

    def _check_writable(self) -> None:
        """An expand()ed view repeats one element: writing through it is ambiguous."""
        if any(stride == 0 and size > 1 for size, stride in zip(self.shape, self.stride())):
            raise RuntimeError(
                "unsupported operation: more than one element of the written-to tensor refers "
                "to a single memory location (it is an expand()ed view). Fix: clone() the "
                "tensor before performing the operation."
            )

    def _check_inplace(self) -> None:
        self._check_writable()
        if grad_mode._enabled and self.requires_grad and self.is_leaf:
            raise RuntimeError(
                "a leaf Variable that requires grad is being used in an in-place operation. "
                "Fix: update parameters inside `with tg.no_grad():`, or use an out-of-place "
                "operation (w = w - lr * g) if you want the update recorded."
            )
        if grad_mode._enabled and self.requires_grad:
            raise RuntimeError(
                f"in-place operations on a tensor inside the graph (made by {self.grad_fn.name()}) "
                "are not supported by teachgrad (PyTorch sometimes allows them). "
                "Fix: use the out-of-place form, e.g. y = y + 1."
            )

    def _set_array(self, array: Any) -> None:
        """Replace the data in place (keeps dtype; bumps the version counter)."""
        self._array = array
        self.dtype = dtypes.from_numpy_dtype(array.dtype)
        self._bump_version()

    def _inplace(self, result: "Tensor") -> "Tensor":
        """Copy an already computed ``result`` into this tensor's storage."""
        self._check_inplace()
        self._check_inplace_result(tuple(result.shape), result.dtype)
        self._backend.setitem(self._array, (Ellipsis,), result.to(self.dtype)._array)
        self._bump_version()
        return self

    def copy_(self, src: "Tensor") -> "Tensor":
        """Copy ``src``'s values into this tensor (broadcasting, converting dtype and device)."""
        from .ops.dispatch import as_tensor_like
        self._check_inplace()
        if grad_mode._enabled and isinstance(src, function.Tensor) and src.requires_grad:
            raise RuntimeError(
                "copy_ from a tensor that requires grad would have to record the copy in the "
                "graph, which teachgrad does not support (PyTorch records it). Fix: make a new "
                "tensor instead (t = src.clone(), or src.expand(shape)), or copy the values "
                "only with t.copy_(src.detach())."
            )
        src = as_tensor_like(src, self).detach().to(self.device, self.dtype)
        src_shape = tuple(src.shape)
        from .ops.dispatch import broadcast_shapes
        if broadcast_shapes(tuple(self.shape), src_shape, "copy_") != tuple(self.shape):
            raise RuntimeError(f"copy_: cannot broadcast {list(src_shape)} into {list(self.shape)}")
        self._backend.setitem(self._array, (Ellipsis,), src._array)
        self._bump_version()
        return self

    def fill_(self, value: float) -> "Tensor":
        self._check_inplace()
        self._backend.setitem(self._array, (Ellipsis,), value)
        self._bump_version()
        return self

    def zero_(self) -> "Tensor":
        return self.fill_(0)

    def _inplace_binary(self, op: str, other: Any) -> "Tensor":
        """``self = self op other``, written straight into this tensor's storage."""
        from .ops.dispatch import broadcast_shapes, prepare_binary

        self._check_inplace()
        if grad_mode._enabled and isinstance(other, function.Tensor) and other.requires_grad:
            raise RuntimeError(
                "an in-place operation with a tensor that requires grad would have to join the "
                "graph, which teachgrad does not support. Fix: use the out-of-place form "
                "(y = y + w), or do it under tg.no_grad() if no gradient should flow."
            )
        a, b = prepare_binary(self, other, op, float_result=op == "div")  # checks operands
        if isinstance(b, function.Tensor):
            common_device((self, b), op)
            shape = broadcast_shapes(tuple(self.shape), tuple(b.shape), op)
            self._check_inplace_result(shape, b.dtype)
            operand = b.to(self.dtype)._array  # backends compute in one dtype: this one's
        else:
            self._check_inplace_result(tuple(self.shape), a.dtype)
            operand = b
        self._backend.binary_inplace(op, self._array, operand)
        self._bump_version()
        return self

    def _check_inplace_result(self, shape: tuple, dtype: DType) -> None:
        """An in-place result must keep this tensor's shape and fit in its dtype."""
        if tuple(shape) != tuple(self.shape):
            raise RuntimeError(
                f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                f"{list(shape)} of an in-place operation"
            )
        if not dtypes.can_cast(dtype, self.dtype):
            raise RuntimeError(
                f"result type {dtype} can't be cast to the desired output type "
                f"{self.dtype} of an in-place operation. Fix: convert first "
                f"(t = t.float()) or use the out-of-place form."
            )

    def __iadd__(self, other: Any) -> "Tensor":
        return self._inplace_binary("add", other)

    def __isub__(self, other: Any) -> "Tensor":
        return self._inplace_binary("sub", other)

    def __imul__(self, other: Any) -> "Tensor":
        return self._inplace_binary("mul", other)

    def __itruediv__(self, other: Any) -> "Tensor":
        return self._inplace_binary("div", other)

    def add_(self, other: Any, alpha: float = 1) -> "Tensor":
        from .ops.dispatch import scaled
        return self._inplace_binary("add", scaled(self, other, alpha))

    def sub_(self, other: Any, alpha: float = 1) -> "Tensor":
        from .ops.dispatch import scaled
        return self._inplace_binary("sub", scaled(self, other, alpha))

    def mul_(self, other: Any) -> "Tensor":
        return self._inplace_binary("mul", other)

    def div_(self, other: Any) -> "Tensor":
        return self._inplace_binary("div", other)

    def clamp_(self, min: Any = None, max: Any = None) -> "Tensor":
        return self._inplace(self.clamp(min, max))

    def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator: Any = None) -> "Tensor":
        from .creation import no_generator
        from .random import uniform_array
        no_generator("uniform_", generator)
        self._check_inplace()
        return self._fill_from_host(uniform_array(tuple(self.shape), a, b, self.dtype))

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> "Tensor":
        from .creation import no_generator
        from .random import normal_array
        no_generator("normal_", generator)
        self._check_inplace()
        return self._fill_from_host(normal_array(tuple(self.shape), mean, std, self.dtype))

    def _fill_from_host(self, values: np.ndarray) -> "Tensor":
        """Write host values into the existing storage, so views see them too."""
        self._backend.setitem(self._array, (Ellipsis,), self._backend.from_numpy(values))
        self._bump_version()
        return self

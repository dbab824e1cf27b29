"""The in-place methods of :class:`~teachgrad.tensor.Tensor` (``add_``, ``+=``, ``copy_``, ...).

An in-place operation writes into the tensor's own storage instead of making a
new tensor. That is what an optimizer step wants (no new arrays for every
weight), and it is also why autograd restricts it: a leaf that requires grad
may only be changed under ``tg.no_grad()``, and every change bumps the tensor's
version counter, so a backward that saved the old values notices and refuses.

The methods are written as a class body for reading, and attached to ``Tensor``
at the end (this module sits above :mod:`teachgrad.ops`, which it uses; the
``Tensor`` class itself imports neither).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes
from .autograd import function, grad_mode
from .creation import zeros
from .cuda_devices import on_tensors_device
from .device import common_device
from .dtypes import DType
from .ops import functional as F
from .ops.dispatch import (
    as_tensor_like, broadcast_shapes, check_lerp, check_pointwise, check_true_division,
    number_in_dtype, prepare_binary, scaled,
)
from .ops.sampling import bernoulli_array, check_random_fill
from .random import normal_array, uniform_array
from .streams.stream import capturing as _capturing_streams
from .tensor import Tensor


class InPlaceMethods:
    """Attached to ``Tensor``; every method checks the autograd rules before it writes."""

    def _check_writable(self) -> None:
        """An expand()ed view repeats one element: writing through it is ambiguous."""
        arr = self._array
        if isinstance(arr, np.ndarray) and arr.flags.writeable:
            return  # (the quick answer: numpy marks its broadcast views read-only)
        if self.numel() and any(stride == 0 and size > 1
                                for size, stride in zip(self.shape, self.stride())):
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

    def _records(self, other: Any = None) -> bool:
        """Check an in-place change; True when autograd must record it (``self`` or ``other``
        is part of the graph), as PyTorch does."""
        self._check_writable()
        other_grad = isinstance(other, function.Tensor) and other.requires_grad
        if not (grad_mode._enabled and (self.requires_grad or other_grad)):
            return False
        if self.requires_grad and self.is_leaf:
            self._check_inplace()  # the leaf rule's error
        made_by_view = self.grad_fn is not None and self.grad_fn.function.is_view
        if made_by_view or (self.grad_fn is None and self._shares_storage()):
            raise RuntimeError(
                "an in-place operation that autograd must record, on a view of another tensor, "
                "is not supported by teachgrad: the tensor it views would not see the change in "
                "its gradient. Fix: .clone() the view first, or use the out-of-place form."
            )
        return True

    def _shares_storage(self) -> bool:
        """Whether this tensor's array may be a view into a larger one (conservative)."""
        arr = self._array
        if self.numel() == 0:
            return False  # nothing to share
        if isinstance(arr, np.ndarray):
            return arr.base is not None
        return arr.offset != 0 or arr.buffer.size != arr.size  # the cuda backend's StridedArray

    @on_tensors_device
    def _record_inplace(self, compute: Any) -> "Tensor":
        """An in-place change autograd records: ``compute(old)`` runs out of place on a copy of
        the old values (which backward may need), the result is written into this storage,
        and this tensor takes the result's place in the graph."""
        old = self.clone() if self.requires_grad else self.detach().clone()
        result = compute(old)
        self._check_inplace_result(tuple(result.shape), result.dtype)
        if result.dtype is not self.dtype:
            result = result.to(self.dtype)
        self._backend.setitem(self._array, (Ellipsis,), result.detach()._array)
        self.grad_fn, self._output_nr, self.requires_grad = result.grad_fn, result._output_nr, True
        self._bump_version()
        return self

    def _set_array(self, array: Any) -> None:
        """Replace the data in place (keeps dtype; bumps the version counter)."""
        if _capturing_streams and not isinstance(array, np.ndarray):  # a CUDA graph's replays
            from .streams.graphs import refuse_storage_swap  # would miss the new buffer

            refuse_storage_swap(tuple(array.shape))
        self._array = array
        self.dtype = dtypes.from_numpy_dtype(array.dtype)
        self._bump_version()

    @on_tensors_device
    def _inplace(self, result: "Tensor") -> "Tensor":
        """Copy an already computed ``result`` (that needs no gradient) into this storage."""
        self._check_inplace()
        self._check_inplace_result(tuple(result.shape), result.dtype)
        self._backend.setitem(self._array, (Ellipsis,), result.to(self.dtype)._array)
        self._bump_version()
        return self

    @on_tensors_device
    def copy_(self, src: "Tensor") -> "Tensor":
        """Copy ``src``'s values into this tensor (broadcasting, converting dtype and device)."""
        if self._records(src):  # the copy joins the graph: gradients flow back to src
            shape = tuple(self.shape)
            return self._record_inplace(lambda old: _overwrite(
                old, as_tensor_like(src, self).to(self.device, self.dtype).expand(shape)))
        src = as_tensor_like(src, self).detach().to(self.device, self.dtype)
        src_shape = tuple(src.shape)
        if broadcast_shapes(tuple(self.shape), src_shape, "copy_") != tuple(self.shape):
            raise RuntimeError(f"copy_: cannot broadcast {list(src_shape)} into {list(self.shape)}")
        self._backend.setitem(self._array, (Ellipsis,), src._array)
        self._bump_version()
        return self

    @on_tensors_device
    def fill_(self, value: float) -> "Tensor":
        if self._records(value):
            return self._record_inplace(lambda old: _overwrite(old, value))
        self._backend.setitem(self._array, (Ellipsis,), value)
        self._bump_version()
        return self

    def zero_(self) -> "Tensor":
        return self.fill_(0)

    def _inplace_binary(self, op: str, other: Any) -> "Tensor":
        """``self = self op other``, written straight into this tensor's storage."""
        # The commonest case (an optimizer's ``mul_(β)``, ``add_(eps)``, ``add_(update)``):
        # a float tensor on the cpu, a Python number or a tensor of its own dtype, shape and
        # device, nothing recorded. The checks below could then change nothing: one call.
        if self.device.index is None and self.dtype.is_floating_point \
                and not (grad_mode._enabled and self.requires_grad):
            kind = type(other)
            if kind is float or kind is int:
                operand = float(other)
            elif (isinstance(other, function.Tensor) and self._alike(other)
                  and not (grad_mode._enabled and other.requires_grad)):
                operand = other._array
            else:
                return self._inplace_binary_checked(op, other)
            self._check_writable()
            self._backend.binary_inplace(op, self._array, operand)
            self._bump_version()
            return self
        return self._inplace_binary_checked(op, other)

    @on_tensors_device
    def _inplace_binary_checked(self, op: str, other: Any) -> "Tensor":
        """``_inplace_binary`` for any operands: every check, promotion and the device guard."""
        if self._records(other):
            return self._record_inplace(lambda old: getattr(F, op)(old, other))
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
        return self._inplace_binary("add", scaled(self, other, alpha))

    def sub_(self, other: Any, alpha: float = 1) -> "Tensor":
        return self._inplace_binary("sub", scaled(self, other, alpha))

    def mul_(self, other: Any) -> "Tensor":
        return self._inplace_binary("mul", other)

    def div_(self, other: Any) -> "Tensor":
        return self._inplace_binary("div", other)

    # Two operations in one call, as PyTorch has them (its optimizers update with these).
    # When nothing is recorded and every tensor has this one's float dtype and shape, the
    # backend does the whole update in one call (``Backend.addcmul_inplace`` and friends:
    # on large CPU arrays one compiled pass over memory, as PyTorch's kernels do). Otherwise
    # (broadcasting, mixed dtypes, autograd) it is the same arithmetic made of tensor
    # operations: one new array (the product, quotient or difference), then writes into
    # storage that exists already.
    def addcmul_(self, tensor1: Any, tensor2: Any, *, value: float = 1) -> "Tensor":
        """``self += value * tensor1 * tensor2`` (Adam's ``v.mul_(β2).addcmul_(g, g, value=1-β2)``)."""
        check_pointwise("addcmul_", {"tensor1": tensor1, "tensor2": tensor2}, {"value": value})
        if self._update_in_one_call(self._backend.addcmul_inplace, (tensor1, tensor2), value):
            return self
        return self._add_scaled(F.mul(tensor1, tensor2), value)

    def addcdiv_(self, tensor1: Any, tensor2: Any, *, value: float = 1) -> "Tensor":
        """``self += value * tensor1 / tensor2`` (Adam's ``θ.addcdiv_(m, denominator, value=-lr)``)."""
        check_pointwise("addcdiv_", {"tensor1": tensor1, "tensor2": tensor2}, {"value": value})
        check_true_division("addcdiv_", tensor1, tensor2)
        if self._update_in_one_call(self._backend.addcdiv_inplace, (tensor1, tensor2), value):
            return self
        return self._add_scaled(F.div(tensor1, tensor2), value)

    @on_tensors_device
    def _update_in_one_call(self, update: Any, others: tuple, number: float) -> bool:
        """Run ``update`` (a ``Backend.*_inplace`` method of this tensor's backend) on this
        tensor's array, those of ``others`` and ``number`` in this dtype, when the update
        can be that one call: nothing for autograd to record (the general path records it,
        or raises the leaf rule's error), and every tensor of this one's floating-point
        dtype, shape and device. True when it ran."""
        if grad_mode._enabled and (self.requires_grad or any(t.requires_grad for t in others)):
            return False
        if not self.dtype.is_floating_point:
            return False
        for t in others:
            if not self._alike(t):
                return False
        self._check_writable()
        update(self._array, *[t._array for t in others], number_in_dtype(number, self.dtype))
        self._bump_version()
        return True

    def _alike(self, t: "Tensor") -> bool:
        """Whether ``t`` has this tensor's dtype, device and shape, so that one backend call
        can take both arrays as they are (a device equal but not the same object: no, the
        general path compares it)."""
        return (t.dtype is self.dtype and t.device is self.device
                and t._array.shape == self._array.shape)

    def _add_scaled(self, new: "Tensor", value: float) -> "Tensor":
        """``self += value * new``, where ``new`` is a fresh tensor nobody else holds (so
        scaling it in place, when it is float and needs no gradient, changes nothing else)."""
        if value != 1:
            if new.dtype.is_floating_point and not new.requires_grad:
                new.mul_(value)
            else:
                new = new * value
        return self.add_(new)

    def lerp_(self, end: Any, weight: Any) -> "Tensor":
        """``self += weight * (end - self)``: move toward ``end`` (Adam's first moment is
        ``m.lerp_(g, 1 - β1)``, that is ``β1·m + (1 - β1)·g``). See :func:`teachgrad.lerp`."""
        check_lerp("lerp_", self, end, weight)
        per_element = isinstance(weight, function.Tensor)
        if self._records(end) or (per_element and self._records(weight)):
            return self._record_inplace(lambda old: F.lerp(old, end, weight))
        if per_element:  # (a weight per element: lerp's formula, then one copy)
            return self._inplace(F.lerp(self, end, weight))
        weight = number_in_dtype(weight, self.dtype)
        if self._update_in_one_call(self._backend.lerp_inplace, (end,), weight):
            return self
        diff = end - self  # the one new array
        self._check_inplace_result(tuple(diff.shape), self.dtype)  # (end may not widen self)
        if abs(weight) < 0.5:
            return self.add_(diff.mul_(weight))
        return self.copy_(diff.mul_(weight - 1).add_(end))  # end - (1 - weight) * diff

    def clamp_(self, min: Any = None, max: Any = None) -> "Tensor":
        if self._records(min) or self._records(max):
            return self._record_inplace(lambda old: old.clamp(min, max))
        return self._inplace(self.clamp(min, max))

    def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator: Any = None) -> "Tensor":
        """Refill with values uniform on ``[a, b)`` (from ``generator`` if given)."""
        check_random_fill("uniform_", self, {"from": a, "to": b})
        if a > b:
            raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                               f"from={a} > to={b}")
        self._check_inplace()
        return self._fill_from_host(uniform_array(tuple(self.shape), a, b, self.dtype, generator))

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> "Tensor":
        """Refill with values from a normal distribution (from ``generator`` if given)."""
        check_random_fill("normal_", self, {"mean": mean, "std": std})
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        self._check_inplace()
        return self._fill_from_host(normal_array(tuple(self.shape), mean, std, self.dtype,
                                                 generator))

    def bernoulli_(self, p: Any = 0.5, *, generator: Any = None) -> "Tensor":
        """Refill with 1 (probability ``p``, a number or a tensor) or 0."""
        self._check_inplace()
        return self._fill_from_host(bernoulli_array(self, p, generator))

    @on_tensors_device
    def _fill_from_host(self, values: np.ndarray) -> "Tensor":
        """Write host values into the existing storage, so views see them too."""
        self._backend.setitem(self._array, (Ellipsis,), self._backend.from_numpy(values))
        self._bump_version()
        return self


def _overwrite(old: "Tensor", new: Any) -> "Tensor":
    """``new`` in ``old``'s shape, still linked to ``old`` in the graph with a zero gradient
    (as PyTorch's copy_ and fill_ are: the old values were read by nothing)."""
    keep_old = zeros(tuple(old.shape), dtype=dtypes.bool_, device=old.device)  # all False
    return F.where(keep_old, old, new)


for _name, _member in vars(InPlaceMethods).items():
    if not _name.startswith("__") or _name in ("__iadd__", "__isub__", "__imul__", "__itruediv__"):
        setattr(Tensor, _name, _member)

"""Moving a tensor between devices and dtypes (both differentiable)."""
from __future__ import annotations

from ..autograd.function import Context, Function
from ..backends import get_backend
from ..cuda_devices import using
from ..device import Device, as_device
from ..dtypes import DType
from ..tensor import Tensor


class ToDevice(Function):
    rule = "∂to(a, device)/∂a = 1 (the gradient travels back to a's device)"

    @staticmethod
    def forward(ctx: Context, a: Tensor, device: Device):
        ctx.source = a.device
        target = get_backend(device.type)
        if a.device.type == "cuda" and device.type == "cuda":  # cuda:i -> cuda:j, no host
            from ..kernels.transfer import copy_to_peer

            return Tensor._make(copy_to_peer(a._array, a.device.index, device.index),
                                target, device)
        # through the host otherwise: the one place a host<->device copy is spelled out
        with using(device.index):  # (None for cpu: no change)
            return Tensor._make(target.from_numpy(a._backend.to_numpy(a._array)), target, device)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return grad.to(ctx.source), None


class Cast(Function):
    rule = "∂cast(a)/∂a = 1 (the gradient is cast back to a's dtype)"
    rounds_low_precision = False  # its float32 result from a 16-bit input is the point

    @staticmethod
    def forward(ctx: Context, a: Tensor, dtype: DType):
        ctx.source = a.dtype
        return ctx.backend.astype(a._array, dtype.numpy)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        return grad.to(ctx.source), None


def to(t: Tensor, device: Device | None = None, dtype: DType | None = None, copy: bool = False) -> Tensor:
    out = t
    device = None if device is None else as_device(device)  # 'cuda': the current device
    if dtype is not None and dtype is not out.dtype:
        if out.requires_grad and not dtype.is_floating_point:
            out = out.detach()  # an integer result cannot carry gradients
        out = Cast.apply(out, dtype)
    if device is not None and device != out.device:
        out = ToDevice.apply(out, device)
    if copy and out is t:
        out = t.clone()
    return out

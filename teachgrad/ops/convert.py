"""Moving a tensor between devices and dtypes (both differentiable)."""
from __future__ import annotations

from ..autograd.function import Context, Function
from ..backends import get_backend
from ..device import Device
from ..dtypes import DType
from ..tensor import Tensor


class ToDevice(Function):
    rule = "∂to(a, device)/∂a = 1 (the gradient travels back to a's device)"

    @staticmethod
    def forward(ctx: Context, a: Tensor, device: Device):
        ctx.source = a.device
        target = get_backend(device.type)
        # through the host: the one place a device-to-device copy is spelled out
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
    if dtype is not None and dtype is not out.dtype:
        if out.requires_grad and not dtype.is_floating_point:
            out = out.detach()  # an integer result cannot carry gradients
        out = Cast.apply(out, dtype)
    if device is not None and device != out.device:
        out = ToDevice.apply(out, device)
    if copy and out is t:
        out = t.clone()
    return out

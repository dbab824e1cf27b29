"""Devices: where a tensor's data lives (``cpu`` or ``cuda``)."""
from __future__ import annotations

from typing import Any, Iterable


class Device:
    """A device name, as in PyTorch: ``tg.device("cuda")``, ``tg.device("cuda:0")``."""

    __slots__ = ("type", "index")

    def __init__(self, spec: "str | Device", index: int | None = None) -> None:
        if isinstance(spec, Device):
            self.type, self.index = spec.type, spec.index
            return
        if not isinstance(spec, str):
            raise TypeError(f"device must be a string like 'cpu' or 'cuda', not {type(spec).__name__}")
        kind, _, idx = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(
                f"unknown device {spec!r}: teachgrad has 'cpu' (numpy) and 'cuda' "
                "(numba.cuda kernels, on a GPU or in the CUDA simulator)"
            )
        if idx:
            if not (idx.isascii() and idx.isdigit()):
                raise RuntimeError(f"invalid device {spec!r}: the index after ':' must be a "
                                   "number >= 0, as in 'cuda:1'")
            index = int(idx)
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)
                                  or index < 0):
            raise RuntimeError(f"invalid device index {index!r}: it must be an int >= 0")
        if kind == "cpu":
            index = None
        self.type = kind
        self.index = index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            if ":" not in other:  # t.device == "cuda": any cuda device (PyTorch says False)
                return self.type == Device(other).type
            other = Device(other)
        if not isinstance(other, Device):
            return NotImplemented
        # as in PyTorch, device('cuda') (no index) is not device('cuda:0'); a tensor's
        # .device always has its index (as_device fills in the current device)
        return self.type == other.type and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"


CPU = Device("cpu")


def is_device_name(text: object) -> bool:
    """Whether ``text`` is what ``str(device)`` can be: ``cpu``, ``cuda`` or ``cuda:N``
    (for checking files: says nothing about whether device N exists here)."""
    if not isinstance(text, str):
        return False
    kind, colon, index = text.partition(":")
    if not colon:
        return kind in ("cpu", "cuda")
    return kind == "cuda" and index.isascii() and index.isdigit() and len(index) <= 4


def mismatch_error(first: Device, second: Device, op: str) -> RuntimeError:
    """PyTorch's error for an operation given tensors on two devices (naming both)."""
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two "
        f"devices, {first} and {second} (in {op}). Fix: move one with "
        f".to('{first}') or .to('{second}') first."
    )


def common_device(tensors: Iterable[Any], op: str) -> Device:
    """The one device all ``tensors`` live on (cpu for none), or the error naming two."""
    device = None
    for t in tensors:
        if device is None:
            device = t.device
        elif t.device != device:
            raise mismatch_error(device, t.device, op)
    return device if device is not None else CPU


def as_device(d: "str | Device | int | None") -> Device:
    """Where a tensor goes: ``'cuda'`` is the current cuda device, ``cuda:N`` is checked."""
    if d is None:
        return CPU
    if isinstance(d, int) and not isinstance(d, bool):
        d = Device("cuda", d)  # PyTorch reads a bare int as a cuda index
    device = d if isinstance(d, Device) else Device(d)
    if device.type != "cuda":
        return device
    from . import cuda_devices

    index = cuda_devices.current_index() if device.index is None else device.index
    checked = cuda_devices.checked_devices
    if index not in checked:
        checked[index] = Device("cuda", cuda_devices.check_index(index))
    return checked[index]

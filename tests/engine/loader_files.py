"""Valid files for both loaders, and ways to change them, shared by the loader tests."""
from __future__ import annotations

import io
import json
import zipfile
from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad import nn


def elementwise_model() -> nn.Module:
    """A Linear then an elementwise chain: what fusion and the generated plan both see."""
    tg.manual_seed(0)

    class Chain(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            h = self.fc(x)
            return ((h * 2.0 + x).tanh() * x).sigmoid()

    return Chain()


def graph_bytes(model: Any = None, x: Any = None) -> bytes:
    """A ``.tgjit`` file, as bytes."""
    model = elementwise_model() if model is None else model
    x = tg.randn(2, 3) if x is None else x
    buffer = io.BytesIO()
    tg.jit.save(tg.jit.trace(model, (x,)), buffer)
    return buffer.getvalue()


def npz_members(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return {k: archive[k] for k in archive.files}


def graph_with(change: Callable[[dict], Any], data: bytes | None = None) -> io.BytesIO:
    """A ``.tgjit`` file whose JSON header ``change`` edited in place."""
    arrays = npz_members(graph_bytes() if data is None else data)
    header = json.loads(str(arrays["__graph__"]))
    change(header)
    arrays["__graph__"] = np.array(json.dumps(header))
    return npz_file(arrays)


def npz_file(arrays: dict[str, np.ndarray]) -> io.BytesIO:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    buffer.seek(0)
    return buffer


def checkpoint_bytes() -> bytes:
    """A ``tg.save`` file with tensors, containers and numbers."""
    tg.manual_seed(0)
    model = nn.Linear(2, 3)
    buffer = io.BytesIO()
    tg.save({"model": model.state_dict(), "step": (3, 2.5, None), "ids": tg.arange(4),
             "flags": [True, float("inf")]}, buffer)
    return buffer.getvalue()


def zip_members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def zip_file(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    buffer.seek(0)
    return buffer


def checkpoint_with(change: Callable[[dict], Any]) -> io.BytesIO:
    """A ``tg.save`` file whose manifest ``change`` edited in place."""
    members = zip_members(checkpoint_bytes())
    manifest = json.loads(members["manifest.json"])
    change(manifest)
    members["manifest.json"] = json.dumps(manifest).encode()
    return zip_file(members)


def npy_header_bytes(shape: tuple, dtype: str = "<f4") -> bytes:
    """Just the header of an ``.npy`` file declaring ``shape`` (no data after it)."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buffer.getvalue()

"""``tg.save`` and ``tg.load``: tensors and state dicts in a plain, safe file.

PyTorch's files are pickles, and unpickling can run any code the file's author
chose. teachgrad's file holds only data: a zip archive with

* ``manifest.json``: the format name and version, and the saved object as JSON,
  where each tensor is a reference ``{"__tensor__": 3, "dtype": ..., ...}``;
* ``tensors/3.npy``: that tensor's values, in numpy's ``.npy`` format, read
  back with ``allow_pickle=False``.

What can be saved: tensors (and parameters), ``None``, bools, ints, floats,
strings, and lists, tuples and dicts of those (dict keys may be strings,
numbers, bools or None). That covers ``model.state_dict()``,
``optimizer.state_dict()``, a scheduler's ``state_dict()`` and checkpoints
made of them::

    tg.save({"model": model.state_dict(), "epoch": 3}, "checkpoint.tg")
    checkpoint = tg.load("checkpoint.tg")
    model.load_state_dict(checkpoint["model"])

Loading checks everything (archive, manifest, every array against its entry)
before it builds anything, so a damaged file raises one clear error and
returns nothing half-made.
"""
from __future__ import annotations

import io
import json
import math
import os
import zipfile
from collections import Counter, OrderedDict
from contextlib import contextmanager
from typing import Any, BinaryIO, Iterator

import numpy as np

from . import dtypes
from .archive import (DEFAULT_MAX_BYTES, DEFAULT_MAX_COMPRESSION_RATIO, DEFAULT_MAX_JSON_BYTES,
                      ArchiveError, Limits, SafeArchive, describe, open_archive)
from .device import Device
from .manifest import LoadError, ManifestChecker
from .tensor import Tensor, tensor

FORMAT = "teachgrad"
VERSION = 1
MANIFEST = "manifest.json"
FileLike = str | os.PathLike | BinaryIO
_DICT_TYPES = {"dict": dict, "OrderedDict": OrderedDict, "Counter": Counter}


def _no_pickle_options(function: str, **options: Any) -> None:
    for name, value in options.items():
        if value is not None:
            raise ValueError(f"tg.{function} does not support {name}= (teachgrad files hold "
                             f"plain data, never pickles; leave it out)")


class _Writer:
    """Turns an object into JSON-able data, collecting its tensors' arrays on the way."""

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self.seen: dict[int, int] = {}  # id(tensor) -> its number: a tensor saved twice is one

    def encode(self, obj: Any, where: str) -> Any:
        if isinstance(obj, Tensor):
            return self._tensor(obj)
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            obj = obj.item()  # a numpy scalar is saved as the Python number it holds
        if obj is None or isinstance(obj, (bool, int, str)):
            return obj
        if isinstance(obj, float):
            return obj if math.isfinite(obj) else {"__float__": repr(obj)}
        if isinstance(obj, (list, tuple)):
            items = [self.encode(item, f"{where}[{i}]") for i, item in enumerate(obj)]
            return items if isinstance(obj, list) else {"__tuple__": items}
        if isinstance(obj, dict) and type(obj).__name__ in _DICT_TYPES:
            return {"__dict__": type(obj).__name__,
                    "items": [[self._key(k, where), self.encode(v, f"{where}[{k!r}]")]
                              for k, v in obj.items()]}
        raise TypeError(
            f"tg.save cannot store {type(obj).__name__} (at {where or 'the top level'}): the file "
            "holds tensors, None, bools, numbers, strings, and lists, tuples and dicts of those, so "
            "that loading never runs code. Fix: save the object's state_dict() instead."
        )

    def _key(self, key: Any, where: str) -> Any:
        if key is None or isinstance(key, (bool, int, float, str)):
            return self.encode(key, where)
        raise TypeError(f"tg.save: dict keys must be strings, numbers, bools or None, got "
                        f"{type(key).__name__} {key!r} (at {where or 'the top level'})")

    def _tensor(self, t: Tensor) -> dict[str, Any]:
        if id(t) not in self.seen:
            self.seen[id(t)] = len(self.arrays)
            array = np.array(t.detach()._host(), order="C")  # (0-d stays 0-d)
            self.arrays.append(array.view(dtypes.file_dtype(t.dtype)))
        from .nn.parameter import Parameter
        return {"__tensor__": self.seen[id(t)], "dtype": t.dtype.name, "shape": list(t.shape),
                "device": str(t.device), "requires_grad": t.requires_grad,
                "parameter": isinstance(t, Parameter)}


def save(obj: Any, f: FileLike, pickle_module: Any = None, pickle_protocol: Any = None) -> None:
    """Write ``obj`` (tensors, state dicts, and plain containers of them) to ``f``.

    ``f`` is a path or a binary file object. A path is written to a temporary
    file first and renamed at the end, so a failed save never leaves half a file.
    (PyTorch's ``pickle_module`` and ``pickle_protocol`` have no meaning here: no pickles.)
    """
    _no_pickle_options("save", pickle_module=pickle_module, pickle_protocol=pickle_protocol)
    writer = _Writer()
    root = writer.encode(obj, "")  # everything is checked before a byte is written
    manifest = json.dumps({"format": FORMAT, "version": VERSION, "tensors": len(writer.arrays),
                           "object": root}, allow_nan=False)
    if isinstance(f, (str, os.PathLike)):
        temporary = f"{os.fspath(f)}.partial"
        with open(temporary, "wb") as out:
            _write_archive(out, manifest, writer.arrays)
        os.replace(temporary, f)
    else:
        _write_archive(f, manifest, writer.arrays)


def _write_archive(out: BinaryIO, manifest: str, arrays: list[np.ndarray]) -> None:
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(MANIFEST, manifest)
        for number, array in enumerate(arrays):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, allow_pickle=False)
            archive.writestr(f"tensors/{number}.npy", buffer.getvalue())


class _Reader:
    """Rebuilds the saved object from the manifest and arrays, both already checked."""

    def __init__(self, arrays: list[np.ndarray], map_location: Any) -> None:
        self.arrays, self.map_location = arrays, map_location
        self.built: dict[int, Tensor] = {}

    def decode(self, data: Any) -> Any:
        if isinstance(data, list):
            return [self.decode(item) for item in data]
        if not isinstance(data, dict):
            return data
        if "__tensor__" in data:
            return self._tensor(data)
        if "__tuple__" in data:
            return tuple(self.decode(item) for item in data["__tuple__"])
        if "__float__" in data:
            return float(data["__float__"])
        items = {self.decode(k): self.decode(v) for k, v in data["items"]}
        return _DICT_TYPES[data["__dict__"]](items)  # (a Counter from pairs would count them)

    def _tensor(self, entry: dict[str, Any]) -> Tensor:
        number = entry["__tensor__"]
        if number not in self.built:
            device = entry["device"] if self.map_location is None else self.map_location
            dtype = dtypes.get_dtype(entry["dtype"])
            t = tensor(self.arrays[number].view(dtype.numpy), dtype=dtype, device=device)
            if entry["parameter"]:
                from .nn.parameter import Parameter
                t = Parameter(t, requires_grad=entry["requires_grad"])
            elif entry["requires_grad"]:
                t.requires_grad_(True)
            self.built[number] = t
        return self.built[number]


def load(f: FileLike, map_location: Any = None, pickle_module: Any = None, *,
         weights_only: bool = True, mmap: Any = None, max_bytes: int = DEFAULT_MAX_BYTES,
         max_json_bytes: int = DEFAULT_MAX_JSON_BYTES,
         max_compression_ratio: float = DEFAULT_MAX_COMPRESSION_RATIO) -> Any:
    """Read back what :func:`save` wrote. ``map_location`` (e.g. ``"cpu"``) puts every
    tensor on that device instead of the one it was saved from.

    Loading never runs code from the file, and checks the whole file before it
    builds anything; a file that is damaged, foreign or too big raises :class:`LoadError`
    (a RuntimeError) naming what and where. Limits, checked before anything is read:
    ``max_bytes`` (all members together, after decompression; default 2 GiB),
    ``max_json_bytes`` (the manifest; default 16 MiB) and ``max_compression_ratio``
    (default 100; tg.save stores members uncompressed). Nothing is ever unpickled,
    so ``weights_only=False`` is refused.
    """
    _no_pickle_options("load", pickle_module=pickle_module, mmap=mmap)
    if weights_only is not True:
        raise ValueError("tg.load reads only data (tensors, numbers, strings, containers), never "
                         "pickled objects: weights_only=False is not supported.")
    map_location = _check_map_location(map_location)
    limits = Limits(max_bytes, max_json_bytes, max_compression_ratio)
    limits.check("tg.load")
    name = describe(f)
    try:
        with open_archive(f, limits) as archive:
            manifest, arrays = _read_checked(archive, name)
    except ArchiveError as error:
        raise LoadError(
            f"tg.load: {name} is not a readable teachgrad file ({error}). It may be damaged "
            "or truncated, or written by something else (torch.save files are pickles, which "
            "teachgrad does not load: save their tensors' .numpy() with numpy instead)."
        ) from None
    return _Reader(arrays, map_location).decode(manifest["object"])


def _check_map_location(map_location: Any) -> str | None:
    if map_location is None:
        return None
    if not isinstance(map_location, (str, Device)):
        raise TypeError(f"tg.load: map_location must be a device such as 'cpu' or 'cuda' (or "
                        f"None), got {type(map_location).__name__}; teachgrad does not take "
                        "PyTorch's dicts or functions here.")
    return str(Device(map_location))


def _read_checked(archive: SafeArchive, name: str) -> tuple[dict[str, Any], list[np.ndarray]]:
    """The manifest and the arrays, each checked against the other before an array is read."""
    manifest = _read_manifest(archive, name)
    for number in range(manifest["tensors"]):  # (stops at the first missing one)
        if f"tensors/{number}.npy" not in archive.members:
            raise LoadError(f"tg.load: {name} lists tensor {number} but does not hold it: the "
                            "file is damaged")
    members = [f"tensors/{number}.npy" for number in range(manifest["tensors"])]
    extra = sorted(set(archive.members) - set(members) - {MANIFEST})
    if extra:
        raise LoadError(f"tg.load: {name} holds a member tg.save does not write ({extra[0]!r}): "
                        "it was not written by tg.save, or was changed since")
    with _tensor_errors(name):
        headers = [archive.array_header(member) for member in members]
    ManifestChecker(headers, name).check(manifest["object"], "object")
    with _tensor_errors(name):
        arrays = [archive.read_array(member, header) for member, header in zip(members, headers)]
    return manifest, arrays


@contextmanager
def _tensor_errors(name: str) -> Iterator[None]:
    """An ArchiveError about one tensor member as tg.load's error (the others pass through)."""
    try:
        yield
    except ArchiveError as error:
        if error.member is None:
            raise
        number = error.member.removeprefix("tensors/").removesuffix(".npy")
        raise LoadError(f"tg.load: tensor {number} in {name} is damaged ({error.problem})") from None


def _read_manifest(archive: SafeArchive, name: str) -> dict[str, Any]:
    if MANIFEST not in archive.members:
        raise LoadError(f"tg.load: {name} is a zip archive but has no {MANIFEST}: it was "
                        "not written by tg.save")
    try:
        manifest = archive.read_json(MANIFEST)
    except ArchiveError as error:
        raise LoadError(f"tg.load: the manifest of {name} is damaged ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise LoadError(f"tg.load: {name} is not a teachgrad file (its manifest names no "
                        f"'{FORMAT}' format)")
    if manifest.get("version") != VERSION:
        raise LoadError(
            f"tg.load: {name} was written in teachgrad file format version "
            f"{manifest.get('version')!r}, but this teachgrad reads version {VERSION}. Fix: load "
            "it with the teachgrad version that wrote it."
        )
    extra = sorted(set(manifest) - {"format", "version", "tensors", "object"})
    count = manifest.get("tensors")
    if extra or "object" not in manifest or type(count) is not int or count < 0:
        raise LoadError(f"tg.load: the manifest of {name} is incomplete or has unknown fields "
                        "(it needs exactly format, version, tensors (a count) and object)")
    return manifest

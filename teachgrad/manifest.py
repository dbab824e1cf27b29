"""Checking a ``tg.load`` manifest, whole, before anything is built from it.

The manifest is JSON written by :func:`teachgrad.save`. Every value in it must be
one of the encodings ``save`` writes, with exactly the fields ``save`` writes:

* ``null``, a bool, an int, a string, a finite float, or a list of values;
* ``{"__float__": "inf" | "-inf" | "nan"}``;
* ``{"__tuple__": [values]}``;
* ``{"__dict__": "dict" | "OrderedDict" | "Counter", "items": [[key, value], ...]}``
  where a key is ``null``, a bool, a number, a string or a ``__float__``;
* ``{"__tensor__": n, "dtype", "shape", "device", "requires_grad", "parameter"}``, whose
  dtype and shape must be those of the array ``tensors/n.npy`` declares.

Each problem is one :class:`LoadError` that says where in the manifest it is
(``object.items[0][1].shape``).
"""
from __future__ import annotations

from typing import Any

from . import dtypes
from .device import is_device_name
from .archive import ArrayHeader

DICT_TYPE_NAMES = ("dict", "OrderedDict", "Counter")
SPECIAL_FLOATS = ("inf", "-inf", "nan")
TENSOR_FIELDS = {"__tensor__", "dtype", "shape", "device", "requires_grad", "parameter"}
DEVICES = ("cpu", "cuda", "cuda:N")  # what str(tensor.device) can be (is_device_name)


class LoadError(RuntimeError):
    """A file :func:`teachgrad.load` cannot read: the message says what and where.

    (A RuntimeError, as tg.load's errors always were, so existing handlers still catch it.)
    """


class ManifestChecker:
    """Walks the saved object once, checking every value and every tensor entry."""

    def __init__(self, headers: list[ArrayHeader], file_name: str) -> None:
        self.headers, self.file_name = headers, file_name
        self.entries: dict[int, dict[str, Any]] = {}  # tensor number -> its first entry

    def fail(self, where: str, problem: str) -> LoadError:
        return LoadError(f"tg.load: {self.file_name}, manifest.json at {where}: {problem}")

    def check(self, data: Any, where: str) -> None:
        if data is None or isinstance(data, (bool, int, float, str)):
            return  # (the JSON parser already refused NaN and Infinity literals)
        if isinstance(data, list):
            for i, item in enumerate(data):
                self.check(item, f"{where}[{i}]")
            return
        if not isinstance(data, dict):
            raise self.fail(where, f"a {type(data).__name__} teachgrad cannot read")
        if "__tensor__" in data:
            self.tensor(data, where)
        elif set(data) == {"__tuple__"} and isinstance(data["__tuple__"], list):
            self.check(data["__tuple__"], f"{where}.__tuple__")
        elif set(data) == {"__float__"} and data["__float__"] in SPECIAL_FLOATS:
            return
        elif "__dict__" in data:
            self.dictionary(data, where)
        else:
            raise self.fail(where, f"the file holds an entry teachgrad cannot read ({_short(data)})")

    def dictionary(self, data: dict[str, Any], where: str) -> None:
        items = data.get("items")
        if set(data) != {"__dict__", "items"} or data["__dict__"] not in DICT_TYPE_NAMES \
                or not isinstance(items, list):
            raise self.fail(where, f"a dict in {self.file_name} is malformed (it needs "
                                   f"__dict__ in {DICT_TYPE_NAMES} and a list of items)")
        for i, pair in enumerate(items):
            if not (isinstance(pair, list) and len(pair) == 2 and _is_key(pair[0])):
                raise self.fail(f"{where}.items[{i}]", f"a dict in {self.file_name} is "
                                "malformed: each item must be a [key, value] pair with a "
                                "string, number, bool or null key")
            self.check(pair[1], f"{where}.items[{i}][1]")

    def tensor(self, entry: dict[str, Any], where: str) -> None:
        if set(entry) != TENSOR_FIELDS:
            raise self.fail(where, f"a tensor entry must have exactly the fields "
                                   f"{sorted(TENSOR_FIELDS)}, not {sorted(map(str, entry))}")
        number, dtype, shape = entry["__tensor__"], entry["dtype"], entry["shape"]
        if type(number) is not int or not 0 <= number < len(self.headers):
            raise self.fail(f"{where}.__tensor__", f"tensor number {_short(number)} is not one "
                            f"of the {len(self.headers)} tensors the file holds: the file is damaged")
        if not is_device_name(entry["device"]):
            raise self.fail(f"{where}.device", f"unknown device {_short(entry['device'])} "
                            f"(teachgrad has {', '.join(DEVICES)})")
        for flag in ("requires_grad", "parameter"):
            if not isinstance(entry[flag], bool):
                raise self.fail(f"{where}.{flag}", f"must be true or false, not {_short(entry[flag])}")
        header = self.headers[number]
        known = dtype in [d.name for d in dtypes.ALL_DTYPES]
        if not known or header.dtype != dtypes.file_dtype(dtypes.get_dtype(dtype)) \
                or not isinstance(shape, list) or list(header.shape) != shape:
            raise self.fail(where, f"the tensor entry (dtype {_short(dtype)}, shape "
                            f"{_short(shape)}) does not match the array stored for it: the file "
                            f"is damaged (tensors/{number}.npy holds {header.dtype}, "
                            f"{list(header.shape)})")
        if entry["requires_grad"] and not dtypes.get_dtype(dtype).is_floating_point:
            raise self.fail(f"{where}.requires_grad", f"a {dtype} tensor cannot require grad")
        first = self.entries.setdefault(number, entry)
        if first != entry:
            raise self.fail(where, f"tensor {number} is described twice, differently")


def _is_key(data: Any) -> bool:
    """Whether ``data`` decodes to something a dict key can be (what save writes)."""
    return data is None or isinstance(data, (bool, int, float, str)) or (
        isinstance(data, dict) and set(data) == {"__float__"}
        and data["__float__"] in SPECIAL_FLOATS)


def _short(value: Any, limit: int = 80) -> str:
    """``value`` for an error message, cut short (a file may hold a very long string)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."

"""Checking a saved graph's description, whole, before a single node is built.

:func:`check_header` reads the JSON header of a ``.tgjit`` file and returns the
nodes as plain checked values, or raises :class:`GraphFormatError` naming the
first problem and where it is (``node 3 ('linear'): args[1]: ...``). What it checks:

* the fields: exactly the ones ``tg.jit.save`` writes, each of the right type;
* node names: plain ASCII identifiers (``linear_1``), unique, not Python keywords;
  constant names: dotted identifiers (``0.weight``); strings in attributes: short
  plain tokens (``gt``, ``max``). So no text from a file can carry code anywhere;
* opcodes, and what each opcode needs (an ``output`` node, last and only one);
* operations: names registered in :mod:`teachgrad.jit.registry`, called with
  arguments their ``forward`` accepts;
* references: each names a node *before* it (so no dangling or forward
  references, and no cycles), with an output index only where that node has several;
* encoded values (``{"tuple": [...]}``, ``{"slice": [a, b, c]}``, ...): exactly the
  encodings :func:`teachgrad.jit.serialize.encode` writes;
* declared shapes and dtypes: known dtypes and devices, non-negative sizes, no
  tensor over the loader's ``max_bytes``, and each constant's shape and dtype
  equal to its stored array's.
"""
from __future__ import annotations

import functools
import inspect
import keyword
import math
import re
from typing import Any

from .. import dtypes
from ..archive import MAX_NDIM, ArrayHeader
from ..device import Device, is_device_name
from .ir import OPCODES, Node, Ref, TensorMeta
from .registry import lookup

NODE_FIELDS = {"name", "op", "target", "multi", "args", "kwargs", "meta"}
HEADER_FIELDS = {"format", "version", "name", "nodes", "requires_grad"}
MAX_NAME_LENGTH = 128
NODE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CONSTANT_NAME = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*")
PLAIN_STRING = re.compile(r"[A-Za-z0-9_.\-]*")
DTYPE_NAMES = tuple(d.name for d in dtypes.ALL_DTYPES)
META_DEVICES = ("cpu", "cuda")
SPECIAL_FLOATS = ("inf", "-inf", "nan")


class GraphFormatError(ValueError):
    """The file is not a graph this version of teachgrad can load."""


def fail(where: str, problem: str) -> GraphFormatError:
    return GraphFormatError(f"{where}: {problem}")


def short(value: Any, limit: int = 60) -> str:
    """``value`` for an error message, cut short (a file may hold a very long string)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


@functools.lru_cache(maxsize=None)
def forward_signature(function: type) -> inspect.Signature:
    """The signature of a registered Function's forward (looked up once per Function)."""
    return inspect.signature(function.forward)


def check_node_name(name: Any, where: str) -> str:
    """A node name as it may appear in a graph: a plain identifier (also checked by save)."""
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH or not NODE_NAME.fullmatch(name) \
            or keyword.iskeyword(name):
        raise fail(where, f"the name {short(name)} is not a plain identifier (ASCII letters, "
                          f"digits and _, at most {MAX_NAME_LENGTH} characters, not a keyword)")
    return name


def check_constant_name(name: Any, where: str) -> str:
    """A constant's name: dotted identifiers, as in a state dict (``fc1.weight``)."""
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH or not CONSTANT_NAME.fullmatch(name):
        raise fail(where, f"the constant name {short(name)} is not a dotted name such as "
                          "'fc1.weight' (ASCII letters, digits, _ and .)")
    return name


class GraphChecker:
    """Walks the header once; ``nodes`` are the checked nodes, in order."""

    def __init__(self, arrays: dict[str, ArrayHeader], max_bytes: int) -> None:
        self.arrays, self.max_bytes = arrays, max_bytes
        self.outputs: dict[str, int | None] = {}  # node name -> its outputs (None: one, no index)
        self.nodes: list[Node] = []
        self.names: set[str] = set()

    # -- the header and its nodes --------------------------------------------------
    def check(self, header: dict[str, Any]) -> tuple[list[Node], dict[str, bool], str]:
        fields(header, HEADER_FIELDS, "the header")
        name = header["name"]
        if not isinstance(name, str) or len(name) > 200 or not name.isprintable():
            raise fail("the header's name", f"{short(name)} is not a short printable string")
        nodes = header["nodes"]
        if not isinstance(nodes, list) or not nodes:
            raise fail("the header's nodes", "must be a non-empty list")
        for i, data in enumerate(nodes):
            self.node(data, i)
        if self.nodes[-1].op != "output":
            raise fail("the graph", "its last node must be the output node")
        return self.nodes, self.requires_grad(header["requires_grad"]), name

    def node(self, data: Any, i: int) -> None:
        where = f"node {i}"
        fields(data, NODE_FIELDS, where)
        name = check_node_name(data["name"], f"{where}'s name")
        where = f"node {i} ({name!r})"
        if name in self.names:
            raise fail(where, "a node of this name comes earlier")
        op, multi = data["op"], data["multi"]
        if op not in OPCODES:
            raise fail(where, f"unknown opcode {short(op)} (the opcodes are {', '.join(OPCODES)})")
        if self.nodes and self.nodes[-1].op == "output":
            raise fail(where, "a node after the output node")
        if not isinstance(multi, bool) or (multi and op != "call_function"):
            raise fail(f"{where}.multi", f"{short(multi)}: must be a bool, true only for operations")
        meta = self.meta(data["meta"], f"{where}.meta", op, multi)
        args = self.value(data["args"], f"{where}.args")
        kwargs = data["kwargs"]
        if not isinstance(args, tuple) or not isinstance(kwargs, dict):
            raise fail(where, "args must be an encoded tuple and kwargs an object")
        kwargs = {check_node_name(k, f"{where}.kwargs"): self.value(v, f"{where}.kwargs.{k}")
                  for k, v in kwargs.items()}
        target = self.target(data["target"], op, args, kwargs, meta, where)
        self.nodes.append(Node(name, op, target, args, kwargs, meta, multi))
        self.names.add(name)
        if op != "output":
            self.outputs[name] = len(meta) if multi else None

    def target(self, target: Any, op: str, args: tuple, kwargs: dict, meta: tuple, where: str) -> Any:
        if op == "output":
            out = args[0] if len(args) == 1 else None
            if target is not None or set(kwargs) - {"writes"} or meta or not (
                    isinstance(out, Ref) or (isinstance(out, tuple) and out
                                             and all(isinstance(r, Ref) for r in out))):
                raise fail(where, "the output node takes one reference or a tuple of them, no "
                                  "target or meta, and no kwargs but 'writes'")
            if "writes" in kwargs:
                self.writes(kwargs["writes"], f"{where}.kwargs.writes")
            return None
        if op != "call_function":
            if args or kwargs:
                raise fail(where, f"a {op} node takes no args or kwargs")
            if op == "placeholder":
                return check_node_name(target, f"{where}.target")
            return self.constant(target, meta[0], where)
        function = lookup(target)
        if function is None:
            raise fail(f"{where}.target", f"the graph uses the operation {short(target)}, which "
                       "is not a registered Function. Fix: if it is your own Function, run the "
                       "code that defines it and call tg.jit.register_function(ItsClass), then "
                       "load again (files never make teachgrad import anything)")
        try:
            forward_signature(function).bind(None, *args, **kwargs)
        except TypeError as error:
            raise fail(where, f"{function.__name__} cannot take these arguments ({error})") from None
        return function

    def constant(self, target: Any, meta: TensorMeta, where: str) -> str:
        name = check_constant_name(target, f"{where}.target")
        array = self.arrays.get(name)
        if array is None:
            raise fail(where, f"the constant {name!r} has no array in the file")
        if array.shape != meta.shape or array.dtype != dtypes.get_dtype(meta.dtype).numpy:
            raise fail(where, f"the constant {name!r} is declared {meta.dtype} {list(meta.shape)} "
                              f"but its array is {array.dtype} {list(array.shape)}")
        return name

    def writes(self, writes: Any, where: str) -> None:
        """The tensors the function wrote in place (a BatchNorm's running statistics): pairs
        ``(constant, reference)``, each constant one the graph reads, named once, and its new
        value of the constant's dtype and shape (the references were checked on decoding)."""
        constants = {n.target: n.meta[0] for n in self.nodes if n.op == "get_attr"}
        metas = {n.name: n.meta for n in self.nodes}
        if not isinstance(writes, tuple) or not writes:
            raise fail(where, "must be a non-empty tuple of (constant, reference) pairs")
        seen = set()
        for pair in writes:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], Ref)):
                raise fail(where, f"{short(pair)} is not a (constant, reference) pair")
            name, ref = pair
            if name not in constants or name in seen:
                raise fail(where, f"{short(name)} is not a constant the graph reads, or is "
                                  "written twice")
            seen.add(name)
            value = metas[ref.node][ref.index or 0]
            if (value.shape, value.dtype) != (constants[name].shape, constants[name].dtype):
                raise fail(where, f"the new value of {name!r} is {value.dtype} "
                                  f"{list(value.shape)}, the constant {constants[name].dtype} "
                                  f"{list(constants[name].shape)}")

    def requires_grad(self, flags: Any) -> dict[str, bool]:
        constants = {n.target: n.meta[0] for n in self.nodes if n.op == "get_attr"}
        if not isinstance(flags, dict) or set(flags) != set(constants) \
                or not all(isinstance(v, bool) for v in flags.values()):
            raise fail("the header's requires_grad", "must map each constant's name to true or false")
        unused = set(self.arrays) - set(constants)
        if unused:
            raise fail("the file", f"it holds an array no node reads ({short(sorted(unused)[0])})")
        for name, flag in flags.items():
            if flag and constants[name].dtype not in ("float32", "float64"):
                raise fail(f"the header's requires_grad[{name!r}]",
                           f"a {constants[name].dtype} tensor cannot require grad")
        return flags

    # -- values -------------------------------------------------------------------
    def meta(self, data: Any, where: str, op: str, multi: bool) -> tuple[TensorMeta, ...]:
        if not isinstance(data, list):
            raise fail(where, "must be a list of [shape, dtype, device]")
        wanted = "none" if op == "output" else ("one or more" if multi else "exactly one")
        if (op == "output") != (not data) or (not multi and len(data) > 1):
            raise fail(where, f"a {op} node has {wanted} [shape, dtype, device] entries, not {len(data)}")
        return tuple(self.tensor_meta(m, f"{where}[{i}]") for i, m in enumerate(data))

    def tensor_meta(self, data: Any, where: str) -> TensorMeta:
        if not (isinstance(data, list) and len(data) == 3):
            raise fail(where, "must be [shape, dtype, device]")
        shape, dtype, device = data
        if not isinstance(shape, list) or len(shape) > MAX_NDIM \
                or not all(type(s) is int and s >= 0 for s in shape):
            raise fail(where, f"the shape {short(shape)} is not a list of at most {MAX_NDIM} "
                              "sizes >= 0")
        if dtype not in DTYPE_NAMES or device not in META_DEVICES:
            raise fail(where, f"unknown dtype or device {short(dtype)}, {short(device)} "
                              f"(dtypes: {', '.join(DTYPE_NAMES)}; devices: {', '.join(META_DEVICES)})")
        nbytes = math.prod(shape) * dtypes.get_dtype(dtype).itemsize
        if nbytes > self.max_bytes:
            raise fail(where, f"declares a {shape} {dtype} tensor ({nbytes} bytes), more than "
                              f"max_bytes={self.max_bytes}")
        return TensorMeta(tuple(shape), dtype, device)

    def value(self, data: Any, where: str) -> Any:
        """One encoded argument, decoded (see ``serialize.encode`` for the encodings)."""
        if data is None or isinstance(data, (bool, int)):
            return data
        if isinstance(data, float):
            return data  # (the JSON parser refused NaN and Infinity literals)
        if isinstance(data, str):
            if len(data) > 64 or not PLAIN_STRING.fullmatch(data):
                raise fail(where, f"the string {short(data)} is not a plain token (ASCII letters, "
                                  "digits, _ . -; at most 64 characters)")
            return data
        if not isinstance(data, dict):
            raise fail(where, f"a {type(data).__name__} where an encoded value was expected")
        if set(data) == {"ref", "index"}:
            return self.ref(data["ref"], data["index"], where)
        if len(data) != 1:
            raise fail(where, f"cannot decode {short(data)}")
        ((kind, body),) = data.items()
        decode = DECODERS.get(kind)
        if decode is None:
            raise fail(where, f"unknown value kind {short(kind)}")
        return decode(self, body, f"{where}.{kind}")

    def ref(self, node: Any, index: Any, where: str) -> Ref:
        if not isinstance(node, str) or node not in self.outputs:
            raise fail(where, f"refers to node {short(node)}, which is not a node before this one")
        count = self.outputs[node]
        if count is None and index is not None:
            raise fail(where, f"index {short(index)} into node {node!r}, which has one output")
        if count is not None and not (type(index) is int and 0 <= index < count):
            raise fail(where, f"node {node!r} has {count} outputs: the index must be 0..{count - 1}, "
                              f"not {short(index)}")
        return Ref(node, index)

    def sequence(self, body: Any, where: str) -> list:
        if not isinstance(body, list):
            raise fail(where, f"must be a list, not {short(body)}")
        return [self.value(v, f"{where}[{i}]") for i, v in enumerate(body)]


def _tuple(checker: GraphChecker, body: Any, where: str) -> tuple:
    return tuple(checker.sequence(body, where))


def _slice(checker: GraphChecker, body: Any, where: str) -> slice:
    parts = checker.sequence(body, where)
    if len(parts) != 3 or not all(p is None or type(p) is int for p in parts):
        raise fail(where, "a slice is [start, stop, step], each an int or null")
    return slice(*parts)


def _float(checker: GraphChecker, body: Any, where: str) -> float:
    if body not in SPECIAL_FLOATS:
        raise fail(where, f"must be one of {SPECIAL_FLOATS}, not {short(body)}")
    return float(body)


def _ellipsis(checker: GraphChecker, body: Any, where: str) -> Any:
    if body is not True:
        raise fail(where, "must be true")
    return Ellipsis


def _dtype(checker: GraphChecker, body: Any, where: str) -> dtypes.DType:
    if body not in DTYPE_NAMES:
        raise fail(where, f"unknown dtype {short(body)}")
    return dtypes.get_dtype(body)


def _device(checker: GraphChecker, body: Any, where: str) -> Device:
    if not is_device_name(body):
        raise fail(where, f"unknown device {short(body)}")
    return Device(body)


def _list(checker: GraphChecker, body: Any, where: str) -> list:
    return checker.sequence(body, where)


DECODERS = {"tuple": _tuple, "list": _list, "slice": _slice, "float": _float,
            "ellipsis": _ellipsis, "dtype": _dtype, "device": _device}


def fields(data: Any, expected: set[str], where: str) -> None:
    """``data`` is an object with exactly the ``expected`` fields."""
    if not isinstance(data, dict):
        raise fail(where, f"must be an object, not {type(data).__name__}")
    if set(data) != expected:
        missing, extra = sorted(expected - set(data)), sorted(set(data) - expected)
        raise fail(where, f"wrong fields (missing {missing}, unexpected {short(extra)})")

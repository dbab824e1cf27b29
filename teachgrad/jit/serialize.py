"""``tg.jit.save`` / ``tg.jit.load``: a graph as plain files, with no Python code inside.

A saved graph is a single ``.npz`` archive
(numpy's own format, read with ``allow_pickle=False``) holding

* ``graph.json``-like text under the key ``__graph__``: the format version, the
  nodes, and each operation named by the module and class of its Function
  (``teachgrad.ops.elementwise:Mul``), with its attributes in JSON;
* one array per constant or parameter, under its name.

Loading reads and checks everything before building anything, so a file from
another format version, or a damaged one, raises :class:`GraphFormatError`
and nothing is half-loaded. Operations are looked up by name in teachgrad (or
any importable module): the model's own class is never needed.
"""
from __future__ import annotations

import importlib
import json
import math
import zipfile
from typing import Any

import numpy as np

from .. import dtypes
from ..autograd.function import Function
from ..device import Device
from ..tensor import tensor as make_tensor
from .ir import Graph, Node, Ref, TensorMeta
from .traced import TracedFunction

FORMAT = "teachgrad.jit"
FORMAT_VERSION = 1
GRAPH_KEY = "__graph__"


class GraphFormatError(ValueError):
    """The file is not a graph this version of teachgrad can load."""


# -- values <-> JSON -----------------------------------------------------------------

def encode(value: Any, where: str) -> Any:
    """A node argument as JSON data (``where`` names the node, for the error)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, Ref):
        return {"ref": value.node, "index": value.index}
    if isinstance(value, tuple):
        return {"tuple": [encode(v, where) for v in value]}
    if isinstance(value, list):
        return {"list": [encode(v, where) for v in value]}
    if isinstance(value, slice):
        return {"slice": [encode(v, where) for v in (value.start, value.stop, value.step)]}
    if value is Ellipsis:
        return {"ellipsis": True}
    if isinstance(value, dtypes.DType):
        return {"dtype": value.name}
    if isinstance(value, Device):
        return {"device": str(value)}
    raise TypeError(f"cannot save {where}: one of its arguments is a {type(value).__name__}, "
                    "which the graph format cannot store (numbers, strings, tuples, slices, "
                    "dtypes and devices only). Fix: pass it as a tensor input instead.")


def decode(data: Any) -> Any:
    """The inverse of :func:`encode`."""
    if isinstance(data, list):
        raise GraphFormatError("a list where an encoded value was expected")
    if not isinstance(data, dict):
        return data
    if "ref" in data:
        return Ref(data["ref"], data.get("index"))
    if len(data) != 1:
        raise GraphFormatError(f"cannot decode {data!r}")
    ((kind, body),) = data.items()
    if kind == "float":
        return float(body)
    if kind == "tuple":
        return tuple(decode(v) for v in body)
    if kind == "list":
        return [decode(v) for v in body]
    if kind == "slice":
        return slice(*(decode(v) for v in body))
    if kind == "ellipsis":
        return Ellipsis
    if kind == "dtype":
        return dtypes.get_dtype(body)
    if kind == "device":
        return Device(body)
    raise GraphFormatError(f"unknown value kind {kind!r}")


def function_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def find_function(name: str) -> type:
    """The Function class saved as ``module:Class``, or a GraphFormatError naming it."""
    module_name, _, qualname = name.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise GraphFormatError(
            f"the graph uses the operation {name!r}, which cannot be imported here. Fix: "
            "import the module that defines it (a custom Function must live in an importable "
            "module, not in a notebook's __main__), then load again.") from None
    if not (isinstance(obj, type) and issubclass(obj, Function)):
        raise GraphFormatError(f"{name!r} is not an autograd Function")
    return obj


# -- save / load -----------------------------------------------------------------------

def save(traced: TracedFunction, path: str) -> None:
    """Write ``traced``'s graph and its constants to ``path`` (an ``.npz`` file)."""
    if not isinstance(traced, TracedFunction):
        raise TypeError(f"tg.jit.save takes what tg.jit.trace returns, not {type(traced).__name__}. "
                        "Fix: save tg.jit.trace(model, inputs); a compiled function is saved "
                        "through its .traced graph.")
    graph = traced.graph
    nodes = []
    for n in graph.nodes:
        if n.op == "call_function" and getattr(n.target, "generated", False):
            raise TypeError(f"cannot save node {n.name!r}: it is a generated kernel. Fix: save "
                            "the traced graph (before compiling) and compile it again after loading.")
        target = function_name(n.target) if n.op == "call_function" else n.target
        nodes.append({
            "name": n.name, "op": n.op, "target": target, "multi": n.multi,
            "args": encode(n.args, f"node {n.name!r}"),
            "kwargs": {k: encode(v, f"node {n.name!r}") for k, v in n.kwargs.items()},
            "meta": [[list(m.shape), m.dtype, m.device] for m in n.meta],
        })
    header = {"format": FORMAT, "version": FORMAT_VERSION, "name": traced.name, "nodes": nodes,
              "requires_grad": {k: t.requires_grad for k, t in graph.constants.items()}}
    arrays = {name: t.detach().cpu().numpy() for name, t in graph.constants.items()}
    if GRAPH_KEY in arrays:
        raise ValueError(f"a constant may not be called {GRAPH_KEY!r}")
    with open(path, "wb") as f:
        np.savez(f, **{GRAPH_KEY: np.array(json.dumps(header))}, **arrays)


def _read(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """The header and arrays of a saved graph, all checked, nothing built yet."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            if GRAPH_KEY not in archive.files:
                raise GraphFormatError(f"{path} is an npz file but not a saved teachgrad graph "
                                       f"(it has no {GRAPH_KEY!r} entry)")
            header = json.loads(str(archive[GRAPH_KEY]))
            arrays = {k: archive[k] for k in archive.files if k != GRAPH_KEY}
    except GraphFormatError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError) as e:
        raise GraphFormatError(f"cannot read {path}: the file is damaged or is not a saved "
                               f"graph ({type(e).__name__}: {e}). Fix: save it again with "
                               "tg.jit.save.") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise GraphFormatError(f"{path} is not a teachgrad graph file")
    if header.get("version") != FORMAT_VERSION:
        raise GraphFormatError(
            f"{path} was written in graph format version {header.get('version')}, but this "
            f"teachgrad reads version {FORMAT_VERSION}. Fix: trace and save the model again "
            "with this version of teachgrad.")
    return header, arrays


def load(path: str) -> TracedFunction:
    """Read a graph written by :func:`save`; it runs without the traced Python code."""
    header, arrays = _read(path)
    graph = Graph()
    try:
        for d in header["nodes"]:
            target = find_function(d["target"]) if d["op"] == "call_function" else d["target"]
            meta = tuple(TensorMeta(tuple(s), dt, dev) for s, dt, dev in d["meta"])
            graph.nodes.append(Node(d["name"], d["op"], target, decode(d["args"]),
                                    {k: decode(v) for k, v in d["kwargs"].items()}, meta,
                                    d["multi"]))
        for n in graph.nodes:
            if n.op == "get_attr":
                graph.constants[n.target] = make_tensor(
                    arrays[n.target], device=n.meta[0].device,
                    requires_grad=bool(header["requires_grad"][n.target]))
    except GraphFormatError as e:
        raise GraphFormatError(f"cannot load {path}: {e}") from None
    except (KeyError, TypeError, ValueError) as e:
        raise GraphFormatError(f"cannot load {path}: the graph description is damaged "
                               f"({type(e).__name__}: {e}). Fix: save it again with "
                               "tg.jit.save.") from None
    if not graph.nodes or graph.nodes[-1].op != "output":
        raise GraphFormatError(f"cannot load {path}: the graph has no output node")
    return TracedFunction(graph, header.get("name", "loaded"))

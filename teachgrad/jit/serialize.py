"""``tg.jit.save`` / ``tg.jit.load``: a graph as plain files, with no Python code inside.

A saved graph is a single ``.npz`` archive
(numpy's own format, read with ``allow_pickle=False``) holding

* ``graph.json``-like text under the key ``__graph__``: the format version, the
  nodes, and each operation named as registered in :mod:`teachgrad.jit.registry`
  (``teachgrad.ops.elementwise:Mul``), with its attributes in JSON;
* one array per constant or parameter, under its name.

Loading never runs code from the file and never imports anything: operations are
looked up in the registry (teachgrad's own Functions, and those registered with
:func:`~teachgrad.jit.register_function`). It checks the whole file, with sizes
bounded (``max_bytes=`` ...), before it builds anything
(:mod:`teachgrad.jit.graph_check` says what is checked), so a damaged, foreign or
hostile file raises one :class:`GraphFormatError` and nothing is half-loaded.
"""
from __future__ import annotations

import json
from contextlib import nullcontext
import math
import os
import sys
from typing import Any, BinaryIO

import numpy as np

from .. import dtypes
from ..archive import (DEFAULT_MAX_BYTES, DEFAULT_MAX_COMPRESSION_RATIO, DEFAULT_MAX_JSON_BYTES,
                       ArchiveError, ArrayHeader, Limits, SafeArchive, describe, open_archive,
                       parse_json)
from ..device import Device
from ..tensor import tensor as make_tensor
from .graph_check import GraphChecker, GraphFormatError
from .ir import Graph, Ref
from .registry import lookup, name_of
from .traced import TracedFunction

FORMAT = "teachgrad.jit"
FORMAT_VERSION = 1
GRAPH_KEY = "__graph__"
FileLike = str | os.PathLike | BinaryIO


# -- values -> JSON (graph_check decodes them, checking each) ---------------------------

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


def function_name(cls: type) -> str:
    """The name a graph file uses for the Function ``cls`` (it must be registered)."""
    name = name_of(cls)
    if name is None:
        raise TypeError(f"cannot save a graph that uses {cls.__qualname__}: it is not a registered "
                        "Function, so tg.jit.load could not find it again. Fix: call "
                        f"tg.jit.register_function({cls.__name__}) (in the module that defines it, "
                        "which must also run before loading)")
    return name


def find_function(name: str) -> type:
    """The Function registered as ``name``; never imports anything."""
    function = lookup(name)
    if function is None:
        raise GraphFormatError(f"the graph uses the operation {name!r}, which is not a registered "
                               "Function. Fix: call tg.jit.register_function(ItsClass) first")
    return function


# -- save -------------------------------------------------------------------------------

def save(traced: TracedFunction, path: FileLike) -> None:
    """Write ``traced``'s graph and its constants to ``path`` (an ``.npz`` file).

    The header is checked as :func:`load` will check it before a byte is written,
    so what ``save`` writes, ``load`` reads.
    """
    if not isinstance(traced, TracedFunction):
        raise TypeError(f"tg.jit.save takes what tg.jit.trace returns, not {type(traced).__name__}. "
                        "Fix: save tg.jit.trace(model, inputs); a compiled function is saved "
                        "through its .traced graph.")
    graph = traced.graph
    header = {"format": FORMAT, "version": FORMAT_VERSION, "name": traced.name,
              "nodes": [_node_data(n) for n in graph.nodes],
              "requires_grad": {k: t.requires_grad for k, t in graph.constants.items()}}
    arrays = {name: t.detach().cpu().numpy() for name, t in graph.constants.items()}
    headers = {name: ArrayHeader(a.shape, a.dtype, False, a.nbytes) for name, a in arrays.items()}
    try:
        GraphChecker(headers, math.inf).check(json.loads(json.dumps(header)))
    except GraphFormatError as error:
        raise ValueError(f"cannot save this graph: tg.jit.load would refuse it ({error})") from None
    with open_for_writing(path) as f:
        np.savez(f, **{GRAPH_KEY: np.array(json.dumps(header))}, **arrays)


def _node_data(n: Any) -> dict[str, Any]:
    if n.op == "call_function" and getattr(n.target, "generated", False):
        raise TypeError(f"cannot save node {n.name!r}: it is a generated kernel. Fix: save "
                        "the traced graph (before compiling) and compile it again after loading.")
    return {"name": n.name, "op": n.op,
            "target": function_name(n.target) if n.op == "call_function" else n.target,
            "multi": n.multi, "args": encode(n.args, f"node {n.name!r}"),
            "kwargs": {k: encode(v, f"node {n.name!r}") for k, v in n.kwargs.items()},
            "meta": [[list(m.shape), m.dtype, m.device] for m in n.meta]}


def open_for_writing(path: FileLike) -> Any:
    """``path`` opened for writing, or the file object itself (left open for its owner)."""
    if isinstance(path, (str, os.PathLike)):
        return open(path, "wb")
    return nullcontext(path)


# -- load -------------------------------------------------------------------------------

def load(path: FileLike, *, max_bytes: int = DEFAULT_MAX_BYTES,
         max_json_bytes: int = DEFAULT_MAX_JSON_BYTES,
         max_compression_ratio: float = DEFAULT_MAX_COMPRESSION_RATIO) -> TracedFunction:
    """Read a graph written by :func:`save`; it runs without the traced Python code.

    No code from the file ever runs and nothing is imported. The limits are checked
    before anything is read: ``max_bytes`` (the whole file after decompression, and any
    tensor the graph declares; default 2 GiB), ``max_json_bytes`` (the graph
    description; default 16 MiB), ``max_compression_ratio`` (default 100;
    tg.jit.save stores members uncompressed). Any problem raises
    :class:`GraphFormatError` saying what and where.
    """
    limits = Limits(max_bytes, max_json_bytes, max_compression_ratio)
    limits.check("tg.jit.load")
    where = describe(path)
    try:
        with open_archive(path, limits) as archive:
            header, members = _read_header(archive, where)
            checker = GraphChecker({name: h for name, (_, h) in members.items()}, max_bytes)
            nodes, requires_grad, name = checker.check(header)
            arrays = {name: archive.read_array(member, h) for name, (member, h) in members.items()}
    except ArchiveError as error:
        raise GraphFormatError(f"cannot read {where}: the file is damaged or is not a saved "
                               f"graph ({error}). Fix: save it again with tg.jit.save.") from None
    except GraphFormatError as error:
        raise GraphFormatError(f"cannot load {where}: {error}") from None
    graph = Graph(nodes)  # everything is checked: from here on nothing can fail on the file
    for n in nodes:
        if n.op == "get_attr":
            graph.constants[n.target] = make_tensor(arrays[n.target], device=n.meta[0].device,
                                                    requires_grad=requires_grad[n.target])
    return TracedFunction(graph, name)


def _utf32_text(array: np.ndarray, member: str) -> str:
    """The text of a 0-d numpy string array, decoded here: numpy's own ``str()`` fails
    with a SystemError on code points that are not characters."""
    big = array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big")
    try:
        return array.tobytes().decode("utf-32-be" if big else "utf-32-le").rstrip("\0")
    except UnicodeDecodeError as error:
        raise ArchiveError(f"the graph description is not text ({error})", member) from None


def _read_header(archive: SafeArchive, where: str) -> tuple[dict, dict[str, tuple[str, ArrayHeader]]]:
    """The header (format and version checked) and each constant's member and array header."""
    member = GRAPH_KEY + ".npy"
    if member not in archive.members:
        raise GraphFormatError(f"{where} is an npz file but not a saved teachgrad graph (it has "
                               f"no {GRAPH_KEY!r} entry)")
    text = archive.array_header(member)
    characters = text.nbytes // 4  # (numpy stores text as UTF-32)
    if text.dtype.kind != "U" or text.shape != () or characters > archive.limits.max_json_bytes:
        raise ArchiveError("the graph description is not one string of at most "
                           f"max_json_bytes={archive.limits.max_json_bytes} bytes", member)
    header = parse_json(_utf32_text(archive.read_array(member, text), member), member)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise GraphFormatError(f"{where} is not a teachgrad graph file")
    if header.get("version") != FORMAT_VERSION:
        raise GraphFormatError(
            f"{where} was written in graph format version {header.get('version')!r}, but this "
            f"teachgrad reads version {FORMAT_VERSION}. Fix: trace and save the model again "
            "with this version of teachgrad.")
    members = {}
    for other in archive.members:
        if other == member:
            continue
        if not other.endswith(".npy"):
            raise ArchiveError("a member that is not an .npy array", other)
        members[other.removesuffix(".npy")] = (other, archive.array_header(other))
    return header, members

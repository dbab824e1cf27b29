"""Fuzzing both loaders: every mutation of a valid file loads or raises the loader's own error.

Mutations: flipped bytes, truncation, a member replaced (random bytes, or an
``.npy`` header declaring any shape and dtype), and the JSON description edited
at any place (values replaced, fields removed or added, hostile strings, huge
numbers). Whatever the file, loading never raises another exception, never runs
text from the file, and never allocates much more than the file holds.
"""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import builtins
import io
import os
import json
import tracemalloc
import warnings
import zipfile
from typing import Any, Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from loader_files import (checkpoint_bytes, graph_bytes, graph_with, npy_header_bytes,
                          npz_members, zip_file, zip_members)
from teachgrad.jit import GraphFormatError, TracedFunction
from teachgrad.serialization import LoadError

FLAG = "TG_PAYLOAD_RAN"
MEMORY_BOUND = 8 * 1024**2  # the valid files are a few KiB: 8 MiB is far more than loading needs
GRAPH = graph_bytes()
# a richer graph for the JSON mutations: slices, a two-output max, where, conv, batch norm
with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "graph_format_v1.tgjit"), "rb") as f:
    RICH_GRAPH = f.read()
CHECKPOINT = checkpoint_bytes()
LOADERS = {"graph": (GRAPH, tg.jit.load, GraphFormatError),
           "checkpoint": (CHECKPOINT, tg.load, LoadError)}
FUZZ = settings(max_examples=40)


def _outcome(data: bytes, loader: Callable, error: type) -> Any:
    """Load ``data``: the loaded object, or the loader's error; anything else fails the test."""
    if hasattr(builtins, FLAG):
        delattr(builtins, FLAG)
    tracemalloc.start()
    try:
        result = loader(io.BytesIO(data))
    except error as e:
        result = e
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert not hasattr(builtins, FLAG), "text from the file was executed"
    assert peak < MEMORY_BOUND, f"loading a {len(data)}-byte file took {peak} bytes"
    if loader is tg.jit.load and not isinstance(result, error):
        assert isinstance(result, TracedFunction)
    return result


# -- bytes ----------------------------------------------------------------------------------

@FUZZ
@given(kind=st.sampled_from(sorted(LOADERS)),
       flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=8))
def test_flipped_bytes(kind, flips):
    data, loader, error = LOADERS[kind]
    mutated = bytearray(data)
    for position, mask in flips:
        mutated[position % len(mutated)] ^= mask
    _outcome(bytes(mutated), loader, error)


@FUZZ
@given(kind=st.sampled_from(sorted(LOADERS)), cut=st.integers(0, 10**6),
       tail=st.binary(max_size=64))
def test_truncated_or_extended_files(kind, cut, tail):
    data, loader, error = LOADERS[kind]
    _outcome(data[:cut % (len(data) + 1)] + tail, loader, error)


# -- members --------------------------------------------------------------------------------

DTYPES = ["<f4", "<f8", "<i8", "|b1", ">f4", "|O", "<U10", "<c16", "V8", "<f2", "|u1"]
npy_members = st.builds(lambda shape, dtype, data: npy_header_bytes(tuple(shape), dtype) + data,
                        st.lists(st.integers(0, 2**63), max_size=4), st.sampled_from(DTYPES),
                        st.binary(max_size=128))
small_npy = st.builds(lambda shape, dtype, data: npy_header_bytes(tuple(shape), dtype) + data,
                      st.lists(st.integers(0, 4), max_size=3), st.sampled_from(DTYPES),
                      st.binary(max_size=128))


@FUZZ
@given(kind=st.sampled_from(sorted(LOADERS)), which=st.integers(0, 100),
       content=st.one_of(st.binary(max_size=200), npy_members, small_npy),
       deflate=st.booleans())
def test_a_member_replaced(kind, which, content, deflate):
    data, loader, error = LOADERS[kind]
    members = zip_members(data)
    name = sorted(members)[which % len(members)]
    members[name] = content
    compression = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    _outcome(zip_file(members, compression).getvalue(), loader, error)


@FUZZ
@given(kind=st.sampled_from(sorted(LOADERS)), name=st.sampled_from(
    ["extra.npy", "tensors/9.npy", "tensors/-1.npy", "__graph__.npy", "manifest.json", "../x.npy"]),
    content=st.one_of(st.binary(max_size=64), small_npy))
def test_a_member_added(kind, name, content):
    data, loader, error = LOADERS[kind]
    buffer = io.BytesIO(data)
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "a") as archive:
        warnings.simplefilter("ignore", UserWarning)  # (zipfile warns of a duplicate name)
        archive.writestr(name, content)
    _outcome(buffer.getvalue(), loader, error)


# -- the JSON description -------------------------------------------------------------------

HOSTILE = [f"x\"); __import__('builtins').{FLAG} = True #", f"a(b):\n {FLAG}\ndef c",
           "os:system", "builtins:eval", "teachgrad.ops.elementwise:Mul", "fc.weight", "x", "add",
           "mul", "tanh", "inf", "nan", "cpu", "cuda", "float32", "int64", "bool", "OrderedDict"]
KEYS = ["ref", "index", "tuple", "list", "slice", "float", "ellipsis", "dtype", "device",
        "__tensor__", "__tuple__", "__dict__", "items", "__float__", "shape", "requires_grad",
        "parameter", "name", "op", "target", "args", "kwargs", "meta", "multi", "nodes"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.sampled_from([0, 1, 2, 3, -1, 2**40, 2**63]),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from(HOSTILE), st.text(max_size=12))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)), inner, max_size=4)),
    max_leaves=12)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON tree (a tuple of keys and indexes)."""
    found = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, prefix + (i,))
    return found


def _graph_header() -> dict:
    return json.loads(str(npz_members(RICH_GRAPH)["__graph__"]))


def _manifest() -> dict:
    return json.loads(zip_members(CHECKPOINT)["manifest.json"])


GRAPH_PATHS = _paths(_graph_header())[1:]
MANIFEST_PATHS = _paths(_manifest())[1:]


def _mutate(tree: Any, path: tuple, how: str, value: Any) -> None:
    parent = tree
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if how == "replace":
        parent[key] = value
    elif how == "delete":
        del parent[key]
    elif isinstance(parent, list):
        parent.insert(key, value)
    else:
        parent[str(value)[:8] if not isinstance(value, str) else value] = value


def _checkpoint_with(change: Callable[[dict], Any]) -> bytes:
    members = zip_members(CHECKPOINT)
    manifest = json.loads(members["manifest.json"])
    change(manifest)
    members["manifest.json"] = json.dumps(manifest).encode()
    return zip_file(members).getvalue()


@settings(max_examples=120)
@given(path=st.sampled_from(GRAPH_PATHS), how=st.sampled_from(["replace", "delete", "insert"]),
       value=json_values)
def test_graph_description_mutations(path, how, value):
    mutated = graph_with(lambda h: _mutate(h, path, how, value), RICH_GRAPH).getvalue()
    _outcome(mutated, tg.jit.load, GraphFormatError)


@settings(max_examples=80)
@given(path=st.sampled_from(MANIFEST_PATHS), how=st.sampled_from(["replace", "delete", "insert"]),
       value=json_values)
def test_checkpoint_manifest_mutations(path, how, value):
    mutated = _checkpoint_with(lambda m: _mutate(m, path, how, value))
    _outcome(mutated, tg.load, LoadError)


@FUZZ
@given(kind=st.sampled_from(sorted(LOADERS)), text=st.one_of(
    st.binary(max_size=200), st.sampled_from([b"[" * 100000, b"{\"a\":" * 50000, b"1" * 5000,
                                               b"NaN", b"\xff\xfe", b'{"format": 1e999}'])))
def test_the_description_replaced_by_any_text(kind, text):
    data, loader, error = LOADERS[kind]
    members = zip_members(data)
    if kind == "checkpoint":
        members["manifest.json"] = text
    else:
        header = npy_header_bytes((), f"<U{max(len(text) // 4, 1)}")
        members["__graph__.npy"] = header + text[:max(len(text) // 4, 1) * 4].ljust(4, b"\0")
    _outcome(zip_file(members).getvalue(), loader, error)


def test_the_unmutated_files_load():
    for graph in (GRAPH, RICH_GRAPH):
        assert isinstance(_outcome(graph, tg.jit.load, GraphFormatError), TracedFunction)
    assert _outcome(CHECKPOINT, tg.load, LoadError)["step"] == (3, 2.5, None)

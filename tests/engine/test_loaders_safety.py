"""Loading a file never runs code, never imports, and checks the whole file first.

Both loaders: ``tg.jit.load`` (graphs) and ``tg.load`` (tensors and state dicts).
Hostile files carry a payload that would set ``builtins.TG_PAYLOAD_RAN`` if any
of its text were ever executed; every test checks it never was.
"""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import builtins
import io
import os
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

from loader_files import (checkpoint_bytes, checkpoint_with, elementwise_model, graph_bytes,
                          graph_with, npy_header_bytes, npz_file, npz_members, zip_file,
                          zip_members)
from teachgrad import nn
from teachgrad.jit import GraphFormatError, passes
from teachgrad.jit.compiler import CompiledGraph
from teachgrad.serialization import LoadError

FLAG = "TG_PAYLOAD_RAN"
PAYLOADS = [
    f'x"); __import__("builtins").{FLAG} = True #',
    f"x\n__import__('builtins').{FLAG} = True\n",
    f"a(b):\n    pass\n__import__('builtins').{FLAG} = True\ndef c",
    f"x' + str(setattr(__import__('builtins'), '{FLAG}', True)) + '",
    f"x}}; __import__('builtins').{FLAG} = True; {{",
]


@pytest.fixture(autouse=True)
def _no_payload_ran():
    """Every test here ends by checking that no text from a file ran."""
    if hasattr(builtins, FLAG):
        delattr(builtins, FLAG)
    yield
    assert not hasattr(builtins, FLAG), "text from a file was executed"


def _rename(header: dict, old: str, new: str) -> None:
    """Rename node ``old`` and every reference to it."""
    def walk(value):
        if isinstance(value, dict):
            if value.get("ref") == old:
                value["ref"] = new
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
    for node in header["nodes"]:
        if node["name"] == old:
            node["name"] = new
        walk(node["args"])


def _node(header: dict, name: str) -> dict:
    return next(n for n in header["nodes"] if n["name"] == name)


# -- the registry: never an import -------------------------------------------------------

def test_every_function_of_teachgrads_ops_is_registered_and_nothing_else_by_default():
    import pkgutil

    import teachgrad.ops
    from teachgrad.autograd.function import Function
    from teachgrad.jit.registry import BUILTIN_MODULES
    modules = [m.name for m in pkgutil.iter_modules(teachgrad.ops.__path__)]
    defined = {cls for cls in _all_subclasses(Function)
               if cls.__module__.split(".")[:2] == ["teachgrad", "ops"]
               and cls.__module__.split(".")[-1] in modules}
    defined |= {cls for cls in _all_subclasses(Function) if cls.__module__ == "teachgrad.jit.ops"}
    registered = set(tg.jit.registered_functions().values())
    assert defined - registered == set()
    assert {c.__module__ for c in registered} <= {m.__name__ for m in BUILTIN_MODULES}
    assert tg.jit.registered_functions()["teachgrad.ops.elementwise:Mul"] is tg.ops.elementwise.Mul


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


@pytest.mark.parametrize("target", ["this:Zen", "os:system", "builtins:eval", "subprocess:Popen",
                                    "teachgrad.utils.hooks:BackwardHookFunction",
                                    "teachgrad.ops.elementwise:Mul.__init_subclass__",
                                    "teachgrad.autograd.function:Function"])
def test_an_operation_is_never_imported_by_the_name_in_the_file(target, monkeypatch):
    imported = []
    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: imported.append(name) or
                        real_import(name, *a, **k))
    had_this = "this" in sys.modules
    bad = graph_with(lambda h: _node(h, "mul").update(target=target))
    with pytest.raises(GraphFormatError, match=r"node 4 \('mul'\)\.target: the graph uses the "
                                               r"operation .* which is not a registered Function"):
        tg.jit.load(bad)
    module = target.partition(":")[0]
    assert module not in imported and module.split(".")[0] not in imported
    assert ("this" in sys.modules) == had_this


class Cube(tg.autograd.Function):
    rule = "d(x^3)/dx = 3x^2"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.backend.binary("mul", x._array, ctx.backend.binary("mul", x._array, x._array))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x


def test_a_users_function_is_saved_and_loaded_once_registered():
    x = tg.randn(4)
    fn = lambda x: Cube.apply(x) + 1.0  # noqa: E731
    with pytest.raises(TypeError, match=r"uses Cube: it is not a registered Function.*Fix: call "
                                        r"tg.jit.register_function\(Cube\)"):
        tg.jit.save(tg.jit.trace(fn, (x,)), io.BytesIO())
    tg.jit.register_function(Cube)
    try:
        buffer = io.BytesIO()
        tg.jit.save(tg.jit.trace(fn, (x,)), buffer)
        buffer.seek(0)
        loaded = tg.jit.load(buffer)
        np.testing.assert_allclose(loaded(x).numpy(), x.numpy() ** 3 + 1, rtol=1e-6)
        assert tg.jit.registered_functions()[f"{__name__}:Cube"] is Cube
    finally:
        tg.jit.unregister_function(Cube)
    buffer.seek(0)
    with pytest.raises(GraphFormatError, match=rf"the operation '{__name__}:Cube', which is not a "
                                               "registered Function"):
        tg.jit.load(buffer)


def test_register_function_checks_what_it_is_given():
    with pytest.raises(TypeError, match="takes a tg.autograd.Function subclass, not <class 'int'>"):
        tg.jit.register_function(int)
    with pytest.raises(ValueError, match=r"the name 'teachgrad.ops.elementwise:Mul' already "
                                         r"belongs to .*Mul"):
        tg.jit.register_function(Cube, name="teachgrad.ops.elementwise:Mul")
    with pytest.raises(ValueError, match=r"name must look like 'package.module:ClassName', got "
                                         r"'os; rm'"):
        tg.jit.register_function(Cube, name="os; rm")
    with pytest.raises(ValueError, match="Mul is one of teachgrad's own Functions"):
        tg.jit.unregister_function(tg.ops.elementwise.Mul)
    assert Cube not in tg.jit.registered_functions().values()
    assert tg.jit.register_function(Cube, name="mylib.ops:Cube") is Cube  # also a decorator
    try:
        assert tg.jit.registered_functions()["mylib.ops:Cube"] is Cube
    finally:
        tg.jit.unregister_function(Cube)


# -- hostile text in a graph file ----------------------------------------------------------

def _hostile_graphs(payload: str):
    """(what is hostile, the file) for one payload in every text field of a graph file."""
    def node_name(h):
        _rename(h, "mul", payload)

    def input_name(h):
        _node(h, "x")["target"] = payload

    def attribute(h):
        _node(h, "mul")["args"]["tuple"][1] = payload

    def kwarg(h):
        _node(h, "mul")["kwargs"] = {payload: 1}

    def device(h):
        _node(h, "tanh")["meta"][0][2] = payload

    def dtype(h):
        _node(h, "tanh")["meta"][0][1] = payload

    def graph_name(h):
        h["name"] = payload

    def ref(h):
        _node(h, "tanh")["args"]["tuple"][0]["ref"] = payload

    for change in (node_name, input_name, attribute, kwarg, device, dtype, graph_name, ref):
        yield change.__name__, graph_with(change)
    arrays = npz_members(graph_bytes())
    arrays[payload] = arrays.pop("fc.bias")
    yield "constant name", graph_with(lambda h: (_node(h, "fc_bias").update(target=payload),
                                                  h["requires_grad"].update({payload: True}),
                                                  h["requires_grad"].pop("fc.bias")),
                                       npz_file(arrays).getvalue())


@pytest.mark.parametrize("payload", PAYLOADS)
def test_text_that_could_be_code_is_refused_wherever_it_sits_in_a_graph_file(payload):
    for field, bad in _hostile_graphs(payload):
        if field == "graph_name" and payload.isprintable():
            _compile_and_compare(tg.jit.load(bad))  # a label, kept as data: it may stay
            continue
        with pytest.raises(GraphFormatError, match=r"cannot load the file object: "):
            tg.jit.load(bad)


def _compile_and_compare(loaded) -> None:
    """Run ``loaded`` through every pass, the fused kernels and the generated plan."""
    x = tg.randn(2, 3)
    want = elementwise_model()(x).detach().numpy()
    fused = passes.fuse_elementwise(loaded.graph.copy())
    compiled = CompiledGraph(loaded.graph, passes.DEFAULT_PASSES)
    with tg.no_grad():
        np.testing.assert_allclose(tg.compile(loaded)(x).numpy(), want, rtol=1e-5)
        np.testing.assert_allclose(tg.jit.interpreter.run(fused, [x]).numpy(), want, rtol=1e-5)
        np.testing.assert_allclose(compiled([x]).numpy(), want, rtol=1e-5)  # the generated plan
    np.testing.assert_allclose(compiled([x]).detach().numpy(), want, rtol=1e-5)  # with autograd


def test_save_refuses_what_load_would_refuse(tmp_path):
    traced = tg.jit.trace(lambda x: x * 2.0, (tg.randn(3),))
    traced.graph.nodes[1].name = PAYLOADS[0]
    with pytest.raises(ValueError, match=r"cannot save this graph: tg.jit.load would refuse it "
                                         r"\(node 1's name: the name .* is not a plain identifier"):
        tg.jit.save(traced, str(tmp_path / "f.tgjit"))
    assert not (tmp_path / "f.tgjit").exists()


GENERATOR_NAMES = ["cpu", "cuda", "Tensor", "no_grad", "np", "math", "njit", "i", "start",
                   "stride", "zero", "c0", "x_in", "sigmoid_f32", "tanh_f32", "compiled_forward",
                   "fused_mul", "cpu_device", "builtins", "exec"]


def _graph_named_like_the_generators_own_names() -> io.BytesIO:
    def rename_all(h):
        ops = [n["name"] for n in h["nodes"] if n["op"] in ("call_function", "get_attr")]
        for old, new in zip(ops, GENERATOR_NAMES):
            _rename(h, old, new)
        _rename(h, "x", GENERATOR_NAMES[-1])
    return graph_with(rename_all)


def test_a_graph_with_names_the_generated_code_uses_itself_compiles_to_the_same_values():
    """Accepted names (plain identifiers) must still never clash with generated code."""
    loaded = tg.jit.load(_graph_named_like_the_generators_own_names())
    assert [n.name for n in loaded.graph.nodes][1:4] == ["cpu", "cuda", "Tensor"]
    for graph in (passes.optimise(loaded.graph)[0], passes.fuse_elementwise(loaded.graph.copy())):
        assert [n.op for n in graph.nodes][-1] == "output"
    _compile_and_compare(loaded)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_names_that_reach_the_compiler_another_way_never_run(payload):
    """Defence in depth: a loaded graph edited in memory (as a user-chosen name could be)
    is compiled with every identifier generated, never with the name's text."""
    loaded = tg.jit.load(io.BytesIO(graph_bytes()))
    graph = loaded.graph
    for i, node in enumerate(graph.nodes[:-1]):
        old, new = node.name, payload + str(i)
        node.name = new
        for user in graph.nodes:
            user.args = tg.jit.ir.map_refs(user.args, lambda r: tg.jit.Ref(new, r.index)
                                           if r.node == old else r)
    _compile_and_compare(loaded)


# -- malformed graph files: one clear error each -------------------------------------------

MALFORMED_GRAPHS = [
    (lambda h: _node(h, "tanh")["args"]["tuple"][0].update(ref="sigmoid"),
     r"node 6 \('tanh'\)\.args\.tuple\[0\]: refers to node 'sigmoid', which is not a node before"),
    (lambda h: _node(h, "tanh")["args"]["tuple"][0].update(ref="tanh"),
     r"refers to node 'tanh', which is not a node before this one"),
    (lambda h: _node(h, "tanh")["args"]["tuple"][0].update(ref="nowhere"),
     r"refers to node 'nowhere', which is not a node before this one"),
    (lambda h: _node(h, "tanh")["args"]["tuple"][0].update(index=0),
     r"index 0 into node 'add', which has one output"),
    (lambda h: _node(h, "tanh").update(op="call_method"), r"unknown opcode 'call_method'"),
    (lambda h: _node(h, "tanh").update(args={"tuple": "abc"}), r"\.args\.tuple: must be a list"),
    (lambda h: _node(h, "tanh").update(args={"tuple": [{"ref": "add", "index": None}, 1]}),
     r"node 6 \('tanh'\): Tanh cannot take these arguments"),
    (lambda h: _node(h, "tanh").update(args={"set": [1]}), r"unknown value kind 'set'"),
    (lambda h: _node(h, "tanh").update(args=[1]), r"\.args: a list where an encoded value"),
    (lambda h: _node(h, "mul")["args"]["tuple"].__setitem__(1, {"float": "1e999"}),
     r"must be one of \('inf', '-inf', 'nan'\)"),
    (lambda h: _node(h, "tanh")["meta"][0].__setitem__(0, [2**40, 2**40]),
     r"node 6 \('tanh'\)\.meta\[0\]: declares a \[1099511627776, 1099511627776\] float32 tensor "
     r"\(\d+ bytes\), more than max_bytes=2147483648"),
    (lambda h: _node(h, "tanh")["meta"][0].__setitem__(0, [-1]), r"the shape \[-1\] is not"),
    (lambda h: _node(h, "tanh")["meta"][0].__setitem__(1, "float128"),
     r"unknown dtype or device 'float128'"),
    (lambda h: _node(h, "fc_weight")["meta"][0].__setitem__(0, [9, 9]),
     r"the constant 'fc.weight' is declared float32 \[9, 9\] but its array is float32 \[3, 3\]"),
    (lambda h: h["nodes"].append(dict(h["nodes"][-1])), r"node 10 \('output'\): a node of this name"),
    (lambda h: h["nodes"].pop(), r"its last node must be the output node"),
    (lambda h: h["nodes"].insert(5, dict(h["nodes"][4])), r"node 5 \('mul'\): a node of this name"),
    (lambda h: h["requires_grad"].pop("fc.bias"), r"requires_grad: must map each constant"),
    (lambda h: h.update(nodes=[]), r"the header's nodes: must be a non-empty list"),
    (lambda h: h.update(extra=1), r"the header: wrong fields \(missing \[\], unexpected \['extra'\]\)"),
    (lambda h: _node(h, "tanh").update(multi="yes"), r"\.multi: 'yes': must be a bool"),
    (lambda h: _node(h, "output").update(args={"tuple": [3]}), r"the output node takes one "
                                                               r"reference or a tuple of them"),
    (lambda h: _node(h, "mul")["args"]["tuple"].__setitem__(1, [[[[[1]]]]] * 3),
     r"a list where an encoded value was expected"),
    (lambda h: _node(h, "mul")["args"]["tuple"].append({"list": [{"list": []}] * 2}),
     r"node 4 \('mul'\): Mul cannot take these arguments \(too many positional"),
    (lambda h: _node(h, "mul")["args"]["tuple"].__setitem__(1, {"slice": [1, "a", None]}),
     r"the string 'a' is not a plain token|a slice is \[start, stop, step\]"),
]


@pytest.mark.parametrize("change, message", MALFORMED_GRAPHS)
def test_a_malformed_graph_file_raises_one_clear_error_naming_where(change, message):
    with pytest.raises(GraphFormatError, match=r"cannot load the file object: .*" + message):
        tg.jit.load(graph_with(change))


def test_deeply_nested_values_are_refused_not_a_recursion_error():
    def nest(h):
        value = 1.0
        for _ in range(300):
            value = {"tuple": [value]}
        _node(h, "mul")["args"]["tuple"][1] = value
    with pytest.raises(GraphFormatError, match=r"nests deeper than 100 levels"):
        tg.jit.load(graph_with(nest))


def test_a_graph_member_that_is_not_an_array_or_not_read_is_refused():
    arrays = npz_members(graph_bytes())
    arrays["spare"] = np.zeros(3, np.float32)
    with pytest.raises(GraphFormatError, match=r"it holds an array no node reads \('spare'\)"):
        tg.jit.load(npz_file(arrays))
    members = zip_members(graph_bytes())
    members["notes.txt"] = b"hello"
    with pytest.raises(GraphFormatError, match=r"notes.txt: a member that is not an .npy array"):
        tg.jit.load(zip_file(members))
    arrays = npz_members(graph_bytes())
    arrays["fc.bias"] = np.array([{"a": 1}], dtype=object)
    members = zip_members(npz_file({k: v for k, v in arrays.items() if k != "fc.bias"}).getvalue())
    buffer = io.BytesIO()
    np.save(buffer, arrays["fc.bias"], allow_pickle=True)
    members["fc.bias.npy"] = buffer.getvalue()
    with pytest.raises(GraphFormatError, match=r"fc.bias.npy: the array has dtype object.*"
                                               r"allow_pickle=False"):
        tg.jit.load(zip_file(members))


def test_a_missing_file_is_still_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        tg.jit.load(str(tmp_path / "nothing.tgjit"))
    with pytest.raises(FileNotFoundError):
        tg.load(str(tmp_path / "nothing.tg"))


# -- malformed tg.load files ----------------------------------------------------------------

def _tensor_entry(manifest: dict) -> dict:
    return manifest["object"]["items"][0][1]["items"][0][1]


MALFORMED_CHECKPOINTS = [
    (lambda m: _tensor_entry(m).update(__tensor__=True),
     r"object\.items\[0\]\[1\]\.items\[0\]\[1\]\.__tensor__: tensor number True is not one of"),
    (lambda m: _tensor_entry(m).update(__tensor__=7), r"tensor number 7 is not one of the 3 tensors"),
    (lambda m: m["object"]["items"][1].__setitem__(1, {"__tuple__": "abc"}),
     r"object\.items\[1\]\[1\]: the file holds an entry teachgrad cannot read"),
    (lambda m: m["object"]["items"][1].__setitem__(1, {"__float__": "1e5"}),
     r"holds an entry teachgrad cannot read \(\{'__float__': '1e5'\}\)"),
    (lambda m: m["object"].update(__dict__="defaultdict"), r"object: a dict in .* is malformed"),
    (lambda m: m["object"].update(items="abc"), r"object: a dict in .* is malformed"),
    (lambda m: m["object"]["items"].append([[1, 2], 3]), r"object\.items\[4\]: a dict .* malformed"),
    (lambda m: _tensor_entry(m).update(device="tpu"), r"\.device: unknown device 'tpu'"),
    (lambda m: _tensor_entry(m).update(requires_grad="yes"), r"requires_grad: must be true or false"),
    (lambda m: _tensor_entry(m).update(extra=1), r"a tensor entry must have exactly the fields"),
    (lambda m: _tensor_entry(m).update(shape=[2**40]), r"does not match the array stored for it"),
    (lambda m: _tensor_entry(m).update(shape="abc"), r"does not match the array stored for it"),
    (lambda m: m["object"]["items"][2].__setitem__(1, dict(
        _tensor_entry(m), __tensor__=2, dtype="int64", shape=[4], requires_grad=True)),
     r"requires_grad: a int64 tensor cannot require grad"),
    (lambda m: m["object"]["items"][0][1]["items"][1].__setitem__(1, dict(
        _tensor_entry(m), parameter=not _tensor_entry(m)["parameter"])),
     r"tensor 0 is described twice, differently"),
    (lambda m: m.update(tensors=10**100), r"lists tensor 3 but does not hold it"),
    (lambda m: m.update(tensors=-1), r"the manifest of the file object is incomplete"),
    (lambda m: m.update(tensors=True), r"the manifest of the file object is incomplete"),
    (lambda m: m.update(spare=1), r"the manifest of the file object is incomplete or has unknown"),
]


@pytest.mark.parametrize("change, message", MALFORMED_CHECKPOINTS)
def test_a_malformed_checkpoint_raises_one_clear_error_naming_where(change, message):
    with pytest.raises(LoadError, match=message):
        tg.load(checkpoint_with(change))


def test_load_error_is_a_runtime_error_as_before():
    assert issubclass(LoadError, RuntimeError)
    assert tg.serialization.LoadError is LoadError


def test_a_checkpoint_member_tg_save_does_not_write_is_refused():
    members = zip_members(checkpoint_bytes())
    members["tensors/extra.npy"] = members["tensors/0.npy"]
    with pytest.raises(LoadError, match=r"holds a member tg.save does not write \('tensors/extra"):
        tg.load(zip_file(members))


# -- sizes: zip bombs and lying headers -----------------------------------------------------

def _bomb(member: str, size: int) -> bytes:
    return b"\x00" * size


@pytest.mark.parametrize("loader, error, members, member", [
    (tg.load, LoadError, lambda: zip_members(checkpoint_bytes()), "tensors/0.npy"),
    (tg.jit.load, GraphFormatError, lambda: zip_members(graph_bytes()), "fc.weight.npy"),
])
def test_a_zip_bomb_is_refused_before_it_is_decompressed(loader, error, members, member):
    files = members()
    files[member] = npy_header_bytes((16 * 1024**2,)) + b"\x00" * (64 * 1024**2)
    bomb = zip_file(files, compression=zipfile.ZIP_DEFLATED)
    assert len(bomb.getvalue()) < 200_000
    tracemalloc.start()
    try:
        with pytest.raises(error, match=rf"{member}: the member expands \d+x when decompressed, "
                                        r"more than max_compression_ratio=100"):
            loader(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024**2
    bomb.seek(0)
    with pytest.raises(error, match=r"more than max_bytes=1000000"):
        loader(bomb, max_bytes=1_000_000, max_compression_ratio=10**6)


@pytest.mark.parametrize("loader, error, members, member", [
    (tg.load, LoadError, lambda: zip_members(checkpoint_bytes()), "tensors/0.npy"),
    (tg.jit.load, GraphFormatError, lambda: zip_members(graph_bytes()), "fc.weight.npy"),
])
def test_a_declared_shape_of_2_to_the_40_is_a_clear_error_not_a_memory_error(
        loader, error, members, member):
    files = members()
    files[member] = npy_header_bytes((2**40,)) + b"\x00" * 64
    tracemalloc.start()
    try:
        with pytest.raises(error, match=r"(: |is damaged \()its header declares a \(1099511627776,\) "
                                        r"float32 array \(4398046511104 bytes of data\), but the "
                                        r"member holds 64"):
            loader(zip_file(files))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024**2


def test_a_member_whose_zip_header_lies_about_its_size_is_refused():
    data = bytearray(checkpoint_bytes())
    # shrink tensors/0.npy's declared (uncompressed) size in its central directory entry
    entry = data.index(b"PK\x01\x02" , data.index(b"PK\x01\x02") + 1)  # the second member's
    size = int.from_bytes(data[entry + 24:entry + 28], "little")
    data[entry + 24:entry + 28] = (size - 8).to_bytes(4, "little")
    with pytest.raises(LoadError, match=r"not a readable teachgrad file \(Bad CRC-32 for file "
                                        r"'tensors/0.npy'"):
        tg.load(io.BytesIO(bytes(data)))


def test_the_limits_are_checked_parameters():
    with pytest.raises(ValueError, match=r"tg.load: max_bytes must be a positive number, got 0"):
        tg.load(io.BytesIO(checkpoint_bytes()), max_bytes=0)
    with pytest.raises(ValueError, match=r"tg.jit.load: max_json_bytes must be a positive number"):
        tg.jit.load(io.BytesIO(graph_bytes()), max_json_bytes="big")
    with pytest.raises(GraphFormatError, match=r"the graph description is not one string of at "
                                               r"most max_json_bytes=100 bytes"):
        tg.jit.load(io.BytesIO(graph_bytes()), max_json_bytes=100)
    with pytest.raises(LoadError, match=r"manifest.json: the member declares \d+ bytes, more than "
                                        r"max_json_bytes=10"):
        tg.load(io.BytesIO(checkpoint_bytes()), max_json_bytes=10)
    assert tg.load(io.BytesIO(checkpoint_bytes()), max_bytes=10_000)["step"] == (3, 2.5, None)


def test_valid_files_still_load_with_their_values():
    back = tg.load(io.BytesIO(checkpoint_bytes()))
    model = nn.Linear(2, 3)
    model.load_state_dict(back["model"])
    assert back["flags"] == [True, float("inf")] and back["ids"].tolist() == [0, 1, 2, 3]
    x = tg.randn(2, 3)
    loaded = tg.jit.load(io.BytesIO(graph_bytes()))
    np.testing.assert_allclose(loaded(x).detach().numpy(),
                               elementwise_model()(x).detach().numpy(), rtol=1e-6)


def test_files_saved_before_the_registry_and_the_limits_still_load():
    """Written by scripts/record_format_v1_fixtures.py with the teachgrad of format 1."""
    fixtures = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")
    values = np.load(os.path.join(fixtures, "format_v1_values.npz"))
    loaded = tg.jit.load(os.path.join(fixtures, "graph_format_v1.tgjit"))
    outputs = loaded(tg.tensor(values["x"]))
    for name, out in zip(("y0", "y1", "y2"), outputs):
        np.testing.assert_allclose(out.detach().numpy(), values[name], rtol=1e-6)
    checkpoint = tg.load(os.path.join(fixtures, "checkpoint_format_v1.tg"))
    assert checkpoint["epoch"] == 3 and checkpoint["note"] == "v1"
    assert checkpoint["pair"][0] == 1 and np.isnan(checkpoint["pair"][1])
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8, 3))
    model.load_state_dict(checkpoint["model"])
    model.eval()
    np.testing.assert_allclose(model(tg.tensor(values["x"])).max(dim=1)[0].detach().numpy(),
                               values["y1"], rtol=1e-6)

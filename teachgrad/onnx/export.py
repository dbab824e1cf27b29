"""``tg.onnx.export``: a traced graph written as an ONNX model, after ``torch.onnx.export``.

Each traced operation becomes one or a few ONNX nodes (``Linear`` -> ``Gemm``,
``Tanh`` -> ``Tanh``, a Python number -> a constant initializer), parameters
become initializers under their own names (``0.weight``), and the axes named in
``dynamic_axes`` become symbolic dimensions (``batch``), so one file serves every
batch size. An operation with no translation stops the export with its name,
before anything is written.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from ..jit.ir import Graph, Node, Ref
from ..jit.ops import Compare
from ..jit.traced import trace_graph
from ..jit.tracer import as_inputs
from ..ops import activation, convert, elementwise as ew, linalg, reduce as red, shape as sh

DEFAULT_OPSET = 17
SUPPORTED_OPSETS = range(13, 18)  # ReduceSum takes axes as an input from 13; ReduceMean until 17

SAME_NAME = {ew.Add: "Add", ew.Sub: "Sub", ew.Mul: "Mul", ew.Div: "Div", ew.Pow: "Pow",
             ew.Neg: "Neg", ew.Exp: "Exp", ew.Log: "Log", ew.Sqrt: "Sqrt", ew.Abs: "Abs",
             ew.Sin: "Sin", ew.Cos: "Cos", ew.Tanh: "Tanh", ew.Sigmoid: "Sigmoid",
             ew.Relu: "Relu", ew.Sign: "Sign", ew.Maximum: "Max", ew.Minimum: "Min",
             linalg.MatMul: "MatMul", ew.Where: "Where",
             sh.Contiguous: "Identity", sh.Clone: "Identity", convert.ToDevice: "Identity"}
COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}


class UnsupportedOperatorError(RuntimeError):
    """The graph uses an operation the exporter cannot write as ONNX."""


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:  # pragma: no cover  (the extra is installed wherever tests run)
        raise ImportError("tg.onnx.export needs the onnx package. Fix: pip install "
                          "'teachgrad[onnx]' (onnx and onnxruntime).") from None
    return onnx


class _Writer:
    """Turns graph nodes into ONNX nodes and initializers, one translation per Function."""

    def __init__(self, graph: Graph, onnx: Any) -> None:
        self.graph, self.onnx, self.helper = graph, onnx, onnx.helper
        self.nodes: list = []
        self.initializers: list = []
        self.names: dict[Ref, str] = {}

    def name(self, ref: Ref) -> str:
        return self.names[Ref(ref.node, ref.index)]

    def constant(self, value: Any, dtype: Any, hint: str) -> str:
        """A new initializer holding ``value`` (a Python number becomes a 0-d tensor)."""
        name = f"{hint}_const{len(self.initializers)}"
        array = np.asarray(value, dtype=dtype)
        self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
        return name

    def operand(self, value: Any, node: Node, dtype: str) -> str:
        """An input of an ONNX node: a value's name, or a new constant of ``dtype``."""
        if isinstance(value, Ref):
            return self.name(value)
        return self.constant(value, dtype, node.name)

    def dtype_of(self, ref: Ref) -> str:
        return self.graph.node(ref.node).meta[ref.index or 0].dtype

    def emit(self, op: str, inputs: list[str], node: Node, outputs: list[str] | None = None,
             **attrs: Any) -> None:
        outs = outputs or [node.name]
        self.nodes.append(self.helper.make_node(op, inputs, outs, name=f"{node.name}_{op}", **attrs))

    def translate(self, node: Node) -> None:
        t, a = node.target, node.args
        op = lambda v: self.operand(v, node, node.meta[0].dtype)  # noqa: E731
        ints = lambda v: self.constant(list(v), np.int64, node.name)  # noqa: E731
        if t in SAME_NAME:
            self.emit(SAME_NAME[t], [op(x) for x in a if x is not None], node)
        elif t is Compare:
            dtype = self.dtype_of(next(x for x in a[1:] if isinstance(x, Ref)))
            operands = [self.operand(x, node, dtype) for x in a[1:]]
            if a[0] == "ne":
                self.emit("Equal", operands, node, [node.name + "_eq"])
                self.emit("Not", [node.name + "_eq"], node)
            else:
                self.emit(COMPARE[a[0]], operands, node)
        elif t is linalg.Linear:
            x, w, b = (list(a) + [None])[:3]
            if node.meta[0].shape and len(self.graph.node(x.node).meta[x.index or 0].shape) == 2:
                self.emit("Gemm", [op(x), op(w)] + ([op(b)] if b is not None else []), node, transB=1)
            else:  # a batch with more than one leading dimension: MatMul with Wᵀ
                self.emit("Transpose", [op(w)], node, [node.name + "_wT"], perm=[1, 0])
                out = [node.name + "_mm"] if b is not None else None
                self.emit("MatMul", [op(x), node.name + "_wT"], node, out)
                if b is not None:
                    self.emit("Add", [node.name + "_mm", op(b)], node)
        elif t in (activation.Softmax, activation.LogSoftmax):
            self.emit(t.__name__, [op(a[0])], node, axis=int(a[1]))
        elif t is red.Sum:
            axes = [] if a[1] is None else [ints(a[1])]
            self.emit("ReduceSum", [op(a[0])] + axes, node, keepdims=int(a[2]))
        elif t is red.Mean or t is red.Amax:
            kind = a[3] if len(a) > 3 else "max"  # Amax also runs amin, with "min"
            name = "ReduceMean" if t is red.Mean else ("ReduceMax" if kind == "max" else "ReduceMin")
            extra = {} if a[1] is None else {"axes": list(a[1])}
            self.emit(name, [op(a[0])], node, keepdims=int(a[2]), **extra)
        elif t is sh.Reshape:
            source = self.graph.node(a[0].node).meta[a[0].index or 0].shape
            shape = list(a[1])
            if shape and source and shape[0] == source[0]:
                shape[0] = 0  # ONNX: copy the input's size, so the batch dimension stays dynamic
            self.emit("Reshape", [op(a[0]), ints(shape)], node)
        elif t is sh.Permute:
            self.emit("Transpose", [op(a[0])], node, perm=list(a[1]))
        elif t is sh.Expand:
            self.emit("Expand", [op(a[0]), ints(a[1])], node)
        elif t is sh.Cat:
            self.emit("Concat", [op(x) for x in a], node, axis=int(node.kwargs["dim"]))
        elif t is convert.Cast:
            to = self.helper.np_dtype_to_tensor_dtype(np.dtype(a[1].numpy))
            self.emit("Cast", [op(a[0])], node, to=int(to))
        elif t is ew.Clamp:
            lo = "" if a[1] is None else op(a[1])
            hi = "" if a[2] is None else op(a[2])
            self.emit("Clip", [op(a[0]), lo, hi], node)
        else:
            raise UnsupportedOperatorError(
                f"ONNX export: the operation {node.target_name} (node {node.name!r}) has no ONNX "
                "translation in teachgrad's exporter. Fix: export the part of the model before it "
                "(and compute it in your application), or express it with supported operations "
                f"({', '.join(sorted(set(SAME_NAME.values())))}, Gemm, Softmax, Reshape, ...).")


def _check_names(names: Sequence[str] | None, count: int, what: str, default: list[str]) -> list[str]:
    if names is None:
        return default
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"{what}_names must be a list of strings, e.g. ['input'], not {names!r}")
    if len(names) != count:
        raise ValueError(f"{what}_names has {len(names)} name(s) but the model has {count} "
                         f"{what}(s). Fix: give one name per {what}.")
    if len(set(names)) != len(names):
        raise ValueError(f"{what}_names must be different from each other: {list(names)}")
    return list(names)


def _axes(dynamic_axes: dict | None, ranks: dict[str, int]) -> dict[str, dict[int, str]]:
    """``dynamic_axes`` as {value name: {axis: symbol}}, checked against the names and ranks."""
    out: dict[str, dict[int, str]] = {}
    for name, axes in (dynamic_axes or {}).items():
        if name not in ranks:
            raise ValueError(f"dynamic_axes names {name!r}, which is not an input or output name "
                             f"({', '.join(ranks)}). Fix: use the names given in input_names / "
                             "output_names.")
        if isinstance(axes, dict):
            pairs = {int(k): str(v) for k, v in axes.items()}
        else:
            pairs = {int(k): f"{name}_dynamic_axes_{int(k) + 1}" for k in axes}
        for axis in pairs:
            if not 0 <= axis < ranks[name]:
                raise ValueError(f"dynamic_axes: {name!r} has {ranks[name]} dimensions, so axis "
                                 f"{axis} does not exist")
        out[name] = pairs
    return out


def _value_info(helper: Any, name: str, meta: Any, symbolic: dict[int, str]) -> Any:
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(meta.dtype if meta.dtype != "bool" else np.bool_))
    dims = [symbolic.get(i, s) for i, s in enumerate(meta.shape)]
    return helper.make_tensor_value_info(name, elem, dims)


def export(model: Any, args: Any, f: Any, input_names: Sequence[str] | None = None,
           output_names: Sequence[str] | None = None, dynamic_axes: dict | None = None,
           opset_version: int = DEFAULT_OPSET) -> Any:
    """Trace ``model(*args)`` and write it to ``f`` (a path or a binary file) as ONNX.

    As in ``torch.onnx.export``: a Module is exported in eval mode (dropout off),
    ``input_names``/``output_names`` name the graph's values, and ``dynamic_axes``
    (``{"x": {0: "batch"}}`` or ``{"x": [0]}``) makes those axes symbolic. The model's
    IR version is the lowest the opset needs, so older onnxruntime builds load it.
    Returns the ``onnx.ModelProto`` that was written.
    """
    onnx = _onnx()
    if opset_version not in SUPPORTED_OPSETS:
        raise ValueError(f"opset_version {opset_version} is not supported: choose "
                         f"{SUPPORTED_OPSETS.start}..{SUPPORTED_OPSETS.stop - 1} (default {DEFAULT_OPSET})")
    if not (isinstance(f, (str, os.PathLike)) or hasattr(f, "write")):
        raise TypeError(f"f must be a file path or a binary file, not {type(f).__name__}")
    inputs = as_inputs(args)
    was_training = getattr(model, "training", None)
    if was_training:
        model.eval()
    try:
        graph = trace_graph(model, inputs)
    finally:
        if was_training:
            model.train()
    holders = graph.placeholders
    out = graph.output.args[0]
    out_refs = list(out) if isinstance(out, tuple) else [out]
    in_names = _check_names(input_names, len(holders), "input", [h.name for h in holders])
    out_names = _check_names(output_names, len(out_refs), "output",
                             [f"output{i}" if len(out_refs) > 1 else "output" for i in range(len(out_refs))])
    out_meta = [graph.node(r.node).meta[r.index or 0] for r in out_refs]
    ranks = {n: len(h.meta[0].shape) for n, h in zip(in_names, holders)}
    ranks.update({n: len(m.shape) for n, m in zip(out_names, out_meta)})
    symbolic = _axes(dynamic_axes, ranks)

    writer = _Writer(graph, onnx)
    for name, h in zip(in_names, holders):
        writer.names[Ref(h.name)] = name
    for n in graph.nodes:  # translate everything first: an unsupported op writes nothing
        if n.op == "get_attr":
            writer.names[Ref(n.name)] = n.target
            value = graph.constants[n.target].detach().cpu().numpy()
            writer.initializers.append(onnx.numpy_helper.from_array(value, n.target))
        elif n.op == "call_function":
            for i in range(len(n.meta)):
                writer.names[Ref(n.name, i if n.multi else None)] = n.name if not n.multi else f"{n.name}_{i}"
            writer.translate(n)
    for r, name in zip(out_refs, out_names):  # rename each output's producer to the output name
        old = writer.name(r)
        if old in in_names or old in graph.constants:
            writer.nodes.append(onnx.helper.make_node("Identity", [old], [name], name=f"{name}_Identity"))
            continue
        for node in writer.nodes:
            node.output[:] = [name if o == old else o for o in node.output]
            node.input[:] = [name if i == old else i for i in node.input]

    onnx_graph = onnx.helper.make_graph(
        writer.nodes, getattr(model, "__name__", type(model).__name__),
        [_value_info(onnx.helper, n, h.meta[0], symbolic.get(n, {})) for n, h in zip(in_names, holders)],
        [_value_info(onnx.helper, n, m, symbolic.get(n, {})) for n, m in zip(out_names, out_meta)],
        writer.initializers)
    proto = onnx.helper.make_model(onnx_graph, producer_name="teachgrad",
                                   opset_imports=[onnx.helper.make_opsetid("", opset_version)])
    # recent onnx writes an IR version older runtimes refuse: use the lowest the opset needs
    proto.ir_version = onnx.helper.find_min_ir_version_for(proto.opset_import)
    onnx.checker.check_model(proto)
    if hasattr(f, "write"):
        f.write(proto.SerializeToString())
    else:
        onnx.save(proto, os.fspath(f))
    return proto


__all__ = ["export", "UnsupportedOperatorError", "DEFAULT_OPSET"]

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
import warnings
from typing import Any, Sequence

import numpy as np

import teachgrad as tg

from ..jit.ir import Graph, Ref
from ..jit.traced import trace_graph
from ..jit.tracer import as_inputs
from ..tensor import Tensor
from . import constants
from .layers import layers_as_nodes
from .writer import UnsupportedOperatorError, Writer

DEFAULT_OPSET = 17
SUPPORTED_OPSETS = range(13, 18)  # ReduceSum takes axes as an input from 13; ReduceMean until 17


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:  # pragma: no cover  (the extra is installed wherever tests run)
        raise ImportError("tg.onnx.export needs the onnx package. Fix: pip install "
                          "'teachgrad[onnx]' (onnx and onnxruntime).") from None
    return onnx


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


def _trace(model: Any, inputs: tuple[Tensor, ...]) -> tuple[Graph, dict[str, str]]:
    """The graph of ``model(*inputs)`` in eval mode, with whole layers as single nodes, and
    for each node the layer it came from."""
    origin: dict[int, str] = {}
    was_training = getattr(model, "training", None)
    if was_training:
        model.eval()
    try:
        with layers_as_nodes(model, origin):
            graph = trace_graph(model, inputs)
    finally:
        if was_training:
            model.train()
    return graph, {graph.nodes[i].name: where for i, where in origin.items() if i < len(graph.nodes)}


#: how much longer each dynamic axis is in the second trace: a different factor per axis,
#: so two axes of one size (batch 2, length 2) still tell apart there
FACTORS = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29)


def _repeated(t: Tensor, factors: dict[int, int]) -> Tensor:
    """``t`` with axis ``a`` ``factors[a]`` times as long: its own values tiled, so token
    ids stay valid and every size stays divisible as it was."""
    reps = [factors.get(axis, 1) for axis in range(t.ndim)]
    return tg.tensor(np.tile(t.detach().cpu().numpy(), reps), dtype=t.dtype, device=t.device)


def _second_trace(model: Any, inputs: tuple, in_names: list[str], symbolic: dict,
                  graph: Graph) -> Graph | None:
    """The graph again with every dynamic input axis longer: the sizes that changed follow
    the dynamic axes. Each axis name (``batch``) gets its own factor, so two axes of one
    size still tell apart; when the model needs its axes to agree (``x * y`` with two
    differently named batch axes), all are doubled instead. None (with a warning) when
    the model does not trace the same way at the longer sizes."""
    if not any(symbolic.get(n) for n in in_names):
        return None
    symbols = sorted({s for n in in_names for s in symbolic.get(n, {}).values()})
    own = dict(zip(symbols, FACTORS * (len(symbols) // len(FACTORS) + 1)))
    problem = ""
    for factor_of in (own, {s: 2 for s in symbols}):
        bigger = tuple(_repeated(t, {axis: factor_of[s] for axis, s in symbolic.get(n, {}).items()})
                       for n, t in zip(in_names, inputs))
        try:
            other, _ = _trace(model, bigger)
        except Exception as error:  # noqa: BLE001  (any failure only means: no second view)
            problem = f"it fails there ({type(error).__name__}: {error})"
            continue
        if [(n.name, n.target) for n in other.nodes] == [(n.name, n.target) for n in graph.nodes]:
            return other
        problem = "it records other operations there"
    warnings.warn(f"ONNX export: the model was traced again with its dynamic axes longer to find "
                  f"the sizes that follow them, but {problem}. Sizes inside the graph (reshapes) "
                  "are written as traced, so the file may only run at the example size.",
                  UserWarning, stacklevel=3)
    return None


def _parameter_names(model: Any, graph: Graph, in_names: list[str], out_names: list[str]) -> set[str]:
    """The names the file must keep: inputs, outputs and the model's parameters and buffers.
    A user name equal to a parameter's would make two values of one name: refused."""
    owned = set()
    for getter in ("named_parameters", "named_buffers"):
        if hasattr(model, getter):
            owned.update(n for n, _ in getattr(model, getter)())
    owned &= set(graph.constants)
    for kind, names in (("input", in_names), ("output", out_names)):
        clash = sorted(set(names) & owned)
        if clash:
            raise ValueError(f"{kind}_names: {clash[0]!r} is the name of a parameter of the model "
                             "in the ONNX file. Fix: choose another name for the " + kind + ".")
    both = sorted(set(in_names) & set(out_names))
    if both:
        raise ValueError(f"{both[0]!r} is both an input name and an output name; ONNX values "
                         "have one name each. Fix: rename the output.")
    return owned


def export(model: Any, args: Any, f: Any, input_names: Sequence[str] | None = None,
           output_names: Sequence[str] | None = None, dynamic_axes: dict | None = None,
           opset_version: int = DEFAULT_OPSET) -> Any:
    """Trace ``model(*args)`` and write it to ``f`` (a path or a binary file) as ONNX.

    As in ``torch.onnx.export``: a Module is exported in eval mode (dropout off),
    ``input_names``/``output_names`` name the graph's values, and ``dynamic_axes``
    (``{"x": {0: "batch"}}`` or ``{"x": [0]}``) makes those axes symbolic. The model's
    IR version is the lowest the opset needs, so older onnxruntime builds load it.
    With dynamic input axes the model is traced a second time with those axes longer,
    to tell which sizes inside the graph follow them (see :mod:`teachgrad.onnx.writer`).
    Returns the ``onnx.ModelProto`` that was written.
    """
    onnx = _onnx()
    if opset_version not in SUPPORTED_OPSETS:
        raise ValueError(f"opset_version {opset_version} is not supported: choose "
                         f"{SUPPORTED_OPSETS.start}..{SUPPORTED_OPSETS.stop - 1} (default {DEFAULT_OPSET})")
    if not (isinstance(f, (str, os.PathLike)) or hasattr(f, "write")):
        raise TypeError(f"f must be a file path or a binary file, not {type(f).__name__}")
    inputs = as_inputs(args)
    graph, origin = _trace(model, inputs)
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
    parameters = _parameter_names(model, graph, in_names, out_names)
    other = _second_trace(model, inputs, in_names, symbolic, graph)

    writer = Writer(graph, onnx, set(in_names) | set(out_names) | parameters, origin, other)
    _translate(writer, graph, in_names, parameters)
    _name_outputs(writer, graph, out_refs, out_names, in_names)

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


def _translate(writer: Writer, graph: Graph, in_names: list[str], parameters: set[str]) -> None:
    """Every node into ONNX, before anything is written: an unsupported op writes nothing."""
    for name, h in zip(in_names, graph.placeholders):
        writer.names[Ref(h.name)] = name
    for n in graph.nodes:
        if n.op == "get_attr":
            writer.names[Ref(n.name)] = n.target if n.target in parameters else writer.fresh(n.target)
            value = graph.constants[n.target].detach().cpu().numpy()
            constants.write(writer, n, value, writer.names[Ref(n.name)])
        elif n.op == "call_function":
            for i in range(len(n.meta)):
                ref = Ref(n.name, i if n.multi else None)
                writer.names[ref] = writer.fresh(n.name if not n.multi else f"{n.name}_{i}")
            writer.translate(n)


def _name_outputs(writer: Writer, graph: Graph, out_refs: list[Ref], out_names: list[str],
                  in_names: list[str]) -> None:
    """Rename each output's producer to the output's name (an input or a parameter returned
    as it is gets an Identity node instead)."""
    onnx = writer.onnx
    for r, name in zip(out_refs, out_names):
        old = writer.name(r)
        if old in in_names or graph.node(r.node).op == "get_attr" or old in out_names:
            writer.nodes.append(onnx.helper.make_node("Identity", [old], [name], name=writer.fresh(f"{name}_Identity")))
            continue
        for node in writer.nodes:
            node.output[:] = [name if o == old else o for o in node.output]
            node.input[:] = [name if i == old else i for i in node.input]
        writer.names[r] = name


__all__ = ["export", "UnsupportedOperatorError", "DEFAULT_OPSET"]

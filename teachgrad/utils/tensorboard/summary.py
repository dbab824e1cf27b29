"""Summaries as TensorBoard's own protocol buffers: scalars, histograms, graphs, hparams.

Each function returns a ``Summary`` (or ``GraphDef``) built from the message types
the ``tensorboard`` package ships (``tensorboard.compat.proto``), the same ones
``torch.utils.tensorboard`` writes, so TensorBoard reads our files as its own.
"""
from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np
from tensorboard.compat.proto.attr_value_pb2 import AttrValue
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.node_def_pb2 import NodeDef
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.versions_pb2 import VersionDef
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

from ...graph import Graph
from ...tensor import Tensor


def as_number(value: Any, what: str) -> float:
    """A Python float from a number or a one-element tensor (``loss``, not ``loss.item()``)."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ValueError(f"{what} must be a single number, got a tensor of shape "
                             f"{list(value.shape)}. Fix: log loss.item() or a reduced tensor")
        value = value.item()
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{what} must be a number, got {type(value).__name__}")
    return float(value)


def scalar(tag: str, value: float) -> Summary:
    return Summary(value=[Summary.Value(tag=tag, simple_value=value)])


def histogram(tag: str, values: np.ndarray, bins: Any) -> Summary:
    """Counts per bucket; TensorBoard stores each bucket's right edge (``bucket_limit``)."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.size == 0:
        raise ValueError(f"add_histogram('{tag}'): there are no values to count")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"add_histogram('{tag}'): the values contain NaN or infinity "
                         "(a diverged run?). Fix: log them only while they are finite")
    counts, edges = np.histogram(values, bins=bins)
    histo = HistogramProto(
        min=float(values.min()), max=float(values.max()), num=float(values.size),
        sum=float(values.sum()), sum_squares=float(np.dot(values, values)),
        bucket_limit=[float(e) for e in edges[1:]], bucket=[float(c) for c in counts],
    )
    return Summary(value=[Summary.Value(tag=tag, histo=histo)])


def _scope(name: str) -> str:
    """TensorBoard nests a node named ``a/b/op`` in boxes ``a`` then ``b``."""
    return "/".join(part for part in name.replace(".", "/").split("/") if part)


def graph_def(graph: Graph) -> GraphDef:
    """A ``GraphDef`` from a :mod:`teachgrad.graph` snapshot; each op is named
    ``<module>/<Op>_<k>`` so TensorBoard draws one box per module."""
    names: dict[str, str] = {}
    counts: dict[str, int] = {}
    for n in graph.nodes:
        if n.kind == "op":
            scope = _scope(n.block)
            base = f"{scope}/{n.label}" if scope else n.label
            counts[base] = counts.get(base, 0) + 1
            names[n.id] = f"{base}_{counts[base] - 1}"
        else:  # a parameter ("0.weight" -> box 0, node weight), an input, the output
            names[n.id] = _scope(n.label) or n.kind
    inputs: dict[str, list[tuple[int, str]]] = {}
    for e in graph.edges:
        inputs.setdefault(e.target, []).append((e.position, names[e.source]))
    nodes = []
    for n in graph.nodes:
        shape = TensorShapeProto(dim=[TensorShapeProto.Dim(size=int(s)) for s in n.shape])
        attrs = {"_output_shapes": AttrValue(list=AttrValue.ListValue(shape=[shape])),
                 "dtype": AttrValue(s=n.dtype.encode())}
        if n.rule:
            attrs["rule"] = AttrValue(s=n.rule.encode())
        op = n.label if n.kind == "op" else ("Parameter" if n.kind == "leaf" else "Output")
        nodes.append(NodeDef(name=names[n.id], op=op, attr=attrs,
                             input=[src for _, src in sorted(inputs.get(n.id, []))]))
    return GraphDef(node=nodes, versions=VersionDef(producer=22))


def _plugin(content: plugin_data_pb2.HParamsPluginData, tag: str) -> Summary:
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(
        plugin_name=metadata.PLUGIN_NAME, content=content.SerializeToString()))
    return Summary(value=[Summary.Value(tag=tag, metadata=meta)])


def hparams(hparam_dict: dict, metric_dict: dict) -> tuple[Summary, Summary, Summary]:
    """The three summaries TensorBoard's HParams dashboard reads: the experiment (which
    hyperparameters and metrics exist), a session start (this run's values), a session end."""
    infos, start = [], plugin_data_pb2.SessionStartInfo()
    for name, value in hparam_dict.items():
        if isinstance(value, bool):
            start.hparams[name].bool_value = value
            kind = api_pb2.DATA_TYPE_BOOL
        elif isinstance(value, str):
            start.hparams[name].string_value = value
            kind = api_pb2.DATA_TYPE_STRING
        else:
            start.hparams[name].number_value = as_number(value, f"hparam '{name}'")
            kind = api_pb2.DATA_TYPE_FLOAT64
        infos.append(api_pb2.HParamInfo(name=name, type=kind))
    metrics = [api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag)) for tag in metric_dict]
    version = metadata.PLUGIN_DATA_VERSION
    experiment = plugin_data_pb2.HParamsPluginData(
        experiment=api_pb2.Experiment(hparam_infos=infos, metric_infos=metrics), version=version)
    session_start = plugin_data_pb2.HParamsPluginData(session_start_info=start, version=version)
    session_end = plugin_data_pb2.HParamsPluginData(
        session_end_info=plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS),
        version=version)
    return (_plugin(experiment, metadata.EXPERIMENT_TAG),
            _plugin(session_start, metadata.SESSION_START_INFO_TAG),
            _plugin(session_end, metadata.SESSION_END_INFO_TAG))


def check_hparam_values(hparam_dict: Any, metric_dict: Any) -> None:
    if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
        raise TypeError("add_hparams takes two dicts: hparam_dict ({'lr': 0.1, ...}) and "
                        "metric_dict ({'hparam/loss': 0.3, ...})")
    for name, value in hparam_dict.items():
        if not isinstance(value, (bool, str, Real, Tensor)):
            raise TypeError(f"hparam '{name}' must be a number, a string or a bool, got "
                            f"{type(value).__name__}")
    for tag, value in metric_dict.items():
        if not math.isfinite(as_number(value, f"metric '{tag}'")):
            raise ValueError(f"metric '{tag}' is {value}: TensorBoard cannot compare runs on it")

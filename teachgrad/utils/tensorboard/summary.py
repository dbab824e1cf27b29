"""Summaries as TensorBoard's own protocol buffers: scalars, histograms, graphs, hparams.

Each function returns a ``Summary`` (or ``GraphDef``) built from the message types
the ``tensorboard`` package ships (``tensorboard.compat.proto``), the same ones
``torch.utils.tensorboard`` writes, so TensorBoard reads our files as its own.
"""
from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=1)
def tensorflow_bins() -> np.ndarray:
    """TensorFlow's default bucket edges, PyTorch's ``bins="tensorflow"``: 0 and ±1e-12
    growing by 10% per bucket up to 1e20 (1,549 edges), fine near zero, coarse far away,
    so one set of edges serves weights of any scale."""
    positive = []
    edge = 1e-12
    while edge < 1e20:
        positive.append(edge)
        edge *= 1.1
    return np.array([-e for e in reversed(positive)] + [0.0] + positive)


def _fewer_bins(counts: np.ndarray, edges: np.ndarray, max_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge neighbouring buckets (``len(counts) // max_bins`` at a time) as PyTorch does."""
    group = len(counts) // max_bins
    if len(counts) % group:
        counts = np.pad(counts, (0, group - len(counts) % group))
    counts = counts.reshape(-1, group).sum(axis=-1)
    return counts, np.append(edges[:-1:group][: len(counts)], edges[-1])


def _occupied(counts: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The buckets from the first non-empty one to the last, as TensorBoard stores them:
    each bucket keeps only its right edge, so an empty bucket goes first, its right edge
    being the left edge of the data (the bucket before the first, or one added)."""
    filled = np.flatnonzero(counts)
    start, end = int(filled[0]), int(filled[-1]) + 1
    if start > 0:
        counts = counts[start - 1:end]
    else:
        counts = np.concatenate([[0], counts[:end]])
    return counts, edges[start:end + 1]


def histogram(tag: str, values: np.ndarray, bins: Any, max_bins: int | None = None) -> Summary:
    """Counts per bucket, laid out as ``torch.utils.tensorboard`` writes them (see
    :func:`_occupied`); ``bins="tensorflow"`` uses :func:`tensorflow_bins`."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.size == 0:
        raise ValueError(f"add_histogram('{tag}'): there are no values to count")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"add_histogram('{tag}'): the values contain NaN or infinity "
                         "(a diverged run?). Fix: log them only while they are finite")
    counts, edges = np.histogram(values, bins=tensorflow_bins() if _is_tensorflow(bins) else bins)
    if max_bins is not None and len(counts) > max_bins:
        counts, edges = _fewer_bins(counts, edges, max_bins)
    counts, limits = _occupied(counts, edges)
    histo = HistogramProto(
        min=float(values.min()), max=float(values.max()), num=float(values.size),
        sum=float(values.sum()), sum_squares=float(np.dot(values, values)),
        bucket_limit=[float(e) for e in limits], bucket=[float(c) for c in counts],
    )
    return Summary(value=[Summary.Value(tag=tag, histo=histo)])


def _is_tensorflow(bins: Any) -> bool:
    return isinstance(bins, str) and bins == "tensorflow"


def check_bins(bins: Any, max_bins: Any) -> None:
    """``bins`` as ``np.histogram`` takes it (or "tensorflow"); ``max_bins`` a positive int."""
    if isinstance(bins, str):
        if bins != "tensorflow" and bins not in BIN_RULES:
            raise ValueError(f"add_histogram: bins={bins!r} is not a binning rule: use "
                             f"'tensorflow' (the default, as PyTorch), {', '.join(map(repr, BIN_RULES))}, "
                             "a number of bins or a list of edges")
    elif isinstance(bins, bool) or not isinstance(bins, (int, np.integer, list, tuple, np.ndarray)):
        raise TypeError(f"add_histogram: bins must be a rule name, a number of bins or a list of "
                        f"edges, got {type(bins).__name__}")
    if max_bins is not None and (isinstance(max_bins, bool) or not isinstance(max_bins, int)
                                 or max_bins < 1):
        raise ValueError(f"add_histogram: max_bins must be a positive int or None, got {max_bins!r}")


#: numpy's rules for choosing bins (np.histogram_bin_edges)
BIN_RULES = ("auto", "fd", "doane", "scott", "stone", "rice", "sturges", "sqrt")


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

"""Layers the exporter writes whole: ``Conv2d`` -> ``Conv``, ``MaxPool2d`` -> ``MaxPool``, ...

Eager teachgrad computes a convolution as im2col, a matmul and some reshapes; ONNX
has one ``Conv`` node that a runtime runs far faster. So while exporting, each such
layer's ``forward`` is swapped for one call of a small Function below: it computes
the layer's output eagerly (the same code as always), and the tracer records it as
*one* node holding the layer's settings. The swap lasts for the export only.

The same pass notes which module each recorded node came from (``features.0``), so an
operation with no ONNX translation is reported with the layer that used it.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ..autograd import function as function_module
from ..autograd.function import Context, Function
from ..nn import conv, sparse
from ..tensor import Tensor


class _ExportOnly(Function):
    """A layer as one operation of the traced graph; it exists only while exporting."""

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Any:
        raise RuntimeError("this operation only stands for a layer inside tg.onnx.export; "
                           "it has no gradient")


class Conv2dLayer(_ExportOnly):
    """``Conv2d`` (stride, padding as the layer holds it, dilation, groups) -> ONNX ``Conv``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, weight: Tensor, bias: Tensor | None, stride: tuple,
                padding: Any, dilation: tuple, groups: int) -> Tensor:
        return conv.conv2d(x, weight, bias, stride, padding, dilation, groups)


class MaxPool2dLayer(_ExportOnly):
    """``MaxPool2d`` (kernel, stride, padding, dilation; ceil_mode is always off here)."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, kernel: tuple, stride: tuple, padding: tuple,
                dilation: tuple) -> Tensor:
        return conv.max_pool2d(x, kernel, stride, padding, dilation)


class AvgPool2dLayer(_ExportOnly):
    """``AvgPool2d`` (kernel, stride, padding; zero padding counted, as in PyTorch)."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, kernel: tuple, stride: tuple, padding: tuple) -> Tensor:
        return conv.avg_pool2d(x, kernel, stride, padding)


class EmbeddingLayer(_ExportOnly):
    """``Embedding``: rows of the table, ONNX ``Gather`` along axis 0."""

    @staticmethod
    def forward(ctx: Context, weight: Tensor, indices: Tensor, padding_idx: int | None) -> Tensor:
        return sparse.embedding(indices, weight, padding_idx)


def _conv_call(m: Any) -> Callable:
    return lambda x: Conv2dLayer.apply(x, m.weight, m.bias, m.stride, m.padding, m.dilation,
                                       m.groups)


def _max_pool_call(m: Any) -> Callable:
    kernel, stride, padding, dilation = conv._pool_args("MaxPool2d", m.kernel_size, m.stride,
                                                        m.padding, m.dilation, m.ceil_mode)
    return lambda x: MaxPool2dLayer.apply(x, kernel, stride, padding, dilation)


def _avg_pool_call(m: Any) -> Callable:
    kernel, stride, padding, _ = conv._pool_args("AvgPool2d", m.kernel_size, m.stride,
                                                 m.padding, 1, m.ceil_mode)
    return lambda x: AvgPool2dLayer.apply(x, kernel, stride, padding)


def _embedding_call(m: Any) -> Callable:
    return lambda indices: EmbeddingLayer.apply(m.weight, indices, m.padding_idx)


#: layer class -> the one-node forward used while exporting
WHOLE_LAYERS: dict[type, Callable[[Any], Callable]] = {
    conv.Conv2d: _conv_call, conv.MaxPool2d: _max_pool_call, conv.AvgPool2d: _avg_pool_call,
    sparse.Embedding: _embedding_call}


_NONE = object()


def _graph_length() -> int:
    """How many nodes the running trace holds (0 when no trace is running)."""
    tracer = getattr(function_module.observer, "__self__", None)
    return len(tracer.graph.nodes) if tracer is not None else 0


def _watched(path: str, forward: Callable, origin: dict[int, str], original: Callable) -> Callable:
    """``forward`` that files each node it records under ``path`` (inner layers file first);
    it shows ``original``'s signature, so the inputs keep their names."""
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        start = _graph_length()
        try:
            return forward(*args, **kwargs)
        finally:
            for index in range(start, _graph_length()):
                origin.setdefault(index, path)
    return call


@contextmanager
def layers_as_nodes(model: Any, origin: dict[int, str]) -> Iterator[None]:
    """While exporting ``model``: whole layers become one node each, and ``origin`` maps a
    node's position in the graph to the path of the module that recorded it."""
    modules = list(model.named_modules()) if hasattr(model, "named_modules") else []
    swapped = []
    try:
        for path, m in modules:
            make = WHOLE_LAYERS.get(type(m))
            forward = make(m) if make is not None else m.forward
            where = f"layer '{path}' ({type(m).__name__})" if path else f"the {type(m).__name__}"
            swapped.append((m, m.__dict__.get("forward", _NONE)))
            m.__dict__["forward"] = _watched(where, forward, origin, m.forward)
        yield
    finally:
        for m, own in swapped:  # put back exactly what was there (usually nothing)
            if own is _NONE:
                del m.__dict__["forward"]
            else:
                m.__dict__["forward"] = own

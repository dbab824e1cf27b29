"""Graph nodes to ONNX nodes: one translation per Function (and per whole layer).

The writer owns every name in the ONNX graph. The user's input and output names and
the parameters' names (``0.weight``) are fixed; every other value gets a fresh
name that collides with none of them.

Sizes that follow a dynamic axis: a traced ``Reshape`` holds the sizes it saw, e.g.
``(8, 2)`` for ``x.reshape(-1, 2)`` on a batch of 4. The exporter traced the model a
second time with every dynamic axis longer (``other``), so a size that changed
between the two traces is known to follow the batch: it is written as ``-1``, ``0``
(copy the input's size) or read at run time with ``Shape`` -> ``Gather``, as
``torch.onnx`` does.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..jit.ir import Graph, Node, Ref
from ..jit.ops import Compare
from ..nn import conv
from ..ops import activation, attention, convert, diagonals, elementwise as ew, indexing as ix, linalg, masked
from ..ops import normalization
from ..ops import pointwise_activation as pa, reduce as red, shape as sh
from . import attention as onnx_attention, indexing, layers
from .errors import UnsupportedOperatorError

SAME_NAME = {ew.Add: "Add", ew.Sub: "Sub", ew.Mul: "Mul", ew.Div: "Div", ew.Pow: "Pow",
             ew.Neg: "Neg", ew.Exp: "Exp", ew.Log: "Log", ew.Sqrt: "Sqrt", ew.Abs: "Abs",
             ew.Sin: "Sin", ew.Cos: "Cos", ew.Tanh: "Tanh", ew.Sigmoid: "Sigmoid",
             ew.Relu: "Relu", ew.Sign: "Sign", ew.Maximum: "Max", ew.Minimum: "Min",
             linalg.MatMul: "MatMul", ew.Where: "Where", pa.Erf: "Erf",
             sh.Contiguous: "Identity", sh.Clone: "Identity", convert.ToDevice: "Identity"}
COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}
#: ops whose non-tensor arguments are sizes the writer knows how to make dynamic
SHAPED = (sh.Reshape, sh.Expand)


class Writer:
    """Turns graph nodes into ONNX nodes and initializers."""

    def __init__(self, graph: Graph, onnx: Any, fixed_names: set[str], origin: dict[str, str],
                 other: Graph | None) -> None:
        self.graph, self.onnx, self.helper = graph, onnx, onnx.helper
        self.nodes: list = []
        self.initializers: list = []
        self.names: dict[Ref, str] = {}
        self.taken = set(fixed_names)
        self.origin = origin  # node name -> "layer 'features.0' (Conv2d)"
        self.other = {n.name: n for n in other.nodes} if other is not None else None
        self.other_constants = other.constants if other is not None else {}

    # -- names and values ---------------------------------------------------------
    def fresh(self, base: str) -> str:
        """A value name no user name, parameter or earlier value has."""
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name

    def name(self, ref: Ref) -> str:
        return self.names[Ref(ref.node, ref.index)]

    def constant(self, value: Any, dtype: Any, hint: str) -> str:
        """A new initializer holding ``value`` (a Python number becomes a 0-d tensor)."""
        name = self.fresh(f"{hint}_const")
        self.initializers.append(self.onnx.numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def operand(self, value: Any, node: Node, dtype: str) -> str:
        """An input of an ONNX node: a value's name, or a new constant of ``dtype``."""
        if isinstance(value, Ref):
            return self.name(value)
        return self.constant(value, dtype, node.name)

    def meta(self, ref: Ref) -> Any:
        return self.graph.node(ref.node).meta[ref.index or 0]

    def emit(self, op: str, inputs: list[str], node: Node, outputs: list[str] | None = None,
             **attrs: Any) -> str:
        """Append one ONNX node; returns its (first) output's name."""
        outs = outputs or [self.name(Ref(node.name, 0 if node.multi else None))]
        self.nodes.append(self.helper.make_node(op, inputs, outs, name=self.fresh(f"{node.name}_{op}"),
                                                **attrs))
        return outs[0]

    def temp(self, node: Node, suffix: str) -> list[str]:
        """A fresh name for an intermediate value of ``node``'s translation."""
        return [self.fresh(f"{node.name}_{suffix}")]

    def where(self, node: Node) -> str:
        """``(node 'conv2dlayer', in layer 'features.0' (Conv2d))``: for error messages."""
        layer = self.origin.get(node.name)
        return f"(node {node.name!r}" + (f", in {layer})" if layer else ")")

    # -- translations ---------------------------------------------------------------
    def translate(self, node: Node) -> None:
        t = node.target
        if self.other is not None and t not in SHAPED:
            self.check_same_arguments(node)
        if t in SAME_NAME:
            self.emit(SAME_NAME[t], [self.value(x, node) for x in node.args if x is not None], node)
            return
        method = TRANSLATIONS.get(t)
        if method is None:
            raise UnsupportedOperatorError(
                f"ONNX export: the operation {node.target_name} {self.where(node)} has no ONNX "
                "translation in teachgrad's exporter. Fix: export the part of the model before it "
                "(and compute it in your application), or express it with supported operations "
                f"({', '.join(sorted(set(SAME_NAME.values())))}, Gemm, Conv, MaxPool, AveragePool, "
                "Gather, Softmax, Reshape, ...).")
        method(self, node, *node.args)

    def value(self, x: Any, node: Node) -> str:
        """An operand in the node's own dtype (a Python number becomes a constant of it)."""
        return self.operand(x, node, node.meta[0].dtype)

    def ints(self, values: Any, node: Node) -> str:
        return self.constant(list(values), np.int64, node.name)

    def compare(self, node: Node, kind: str, *operands: Any) -> None:
        dtype = self.meta(next(x for x in operands if isinstance(x, Ref))).dtype
        names = [self.operand(x, node, dtype) for x in operands]
        if kind == "ne":
            self.emit("Not", [self.emit("Equal", names, node, self.temp(node, "eq"))], node)
        else:
            self.emit(COMPARE[kind], names, node)

    def linear(self, node: Node, x: Ref, w: Ref, b: Any = None) -> None:
        if node.meta[0].shape and len(self.meta(x).shape) == 2:
            self.emit("Gemm", [self.name(x), self.name(w)] + ([self.name(b)] if b is not None else []),
                      node, transB=1)
            return
        # a batch with more than one leading dimension: MatMul with Wᵀ (then add the bias)
        w_t = self.emit("Transpose", [self.name(w)], node, self.temp(node, "wT"), perm=[1, 0])
        product = self.emit("MatMul", [self.name(x), w_t], node,
                            self.temp(node, "mm") if b is not None else None)
        if b is not None:
            self.emit("Add", [product, self.name(b)], node)

    def softmax(self, node: Node, x: Ref, dim: int, *rest: Any) -> None:
        self.emit(node.target.__name__, [self.name(x)], node, axis=int(dim))

    def reduce_sum(self, node: Node, x: Ref, dims: Any, keepdim: bool, *rest: Any) -> None:
        axes = [] if dims is None else [self.ints(dims, node)]
        self.emit("ReduceSum", [self.name(x)] + axes, node, keepdims=int(keepdim))

    def reduce_other(self, node: Node, x: Ref, dims: Any, keepdim: bool, kind: str = "max") -> None:
        if node.target is red.Mean:
            op = "ReduceMean"
        else:  # Amax also runs amin, with "min"
            op = "ReduceMax" if kind == "max" else "ReduceMin"
        extra = {} if dims is None else {"axes": list(dims)}
        self.emit(op, [self.name(x)], node, keepdims=int(keepdim), **extra)

    def permute(self, node: Node, x: Ref, dims: Any) -> None:
        self.emit("Transpose", [self.name(x)], node, perm=list(dims))

    def cat(self, node: Node, *parts: Ref) -> None:
        self.emit("Concat", [self.name(p) for p in parts], node, axis=int(node.kwargs["dim"]))

    def cast(self, node: Node, x: Ref, dtype: Any) -> None:
        to = self.helper.np_dtype_to_tensor_dtype(np.dtype(dtype.numpy))
        self.emit("Cast", [self.name(x)], node, to=int(to))

    def clamp(self, node: Node, x: Ref, low: Any, high: Any) -> None:
        bounds = ["" if v is None else self.value(v, node) for v in (low, high)]
        self.emit("Clip", [self.name(x)] + bounds, node)

    # -- sizes that may follow a dynamic axis ----------------------------------------------
    def sizes_elsewhere(self, node: Node) -> tuple[tuple, tuple] | None:
        """(the output's shape, its input's shape) in the second trace, if there was one."""
        if self.other is None:
            return None
        twin = self.other[node.name]
        source = node.args[0]
        return twin.meta[0].shape, self.other[source.node].meta[source.index or 0].shape

    def reshape(self, node: Node, x: Ref, shape: Any) -> None:
        self.emit("Reshape", [self.name(x), self.reshape_target(node, x, list(shape))], node)

    def reshape_target(self, node: Node, x: Ref, shape: list[int]) -> str:
        """The target shape as an ONNX value: constant sizes, ``0`` (copy the input's size),
        sizes read at run time from an input's Shape, and at most one ``-1`` (inferred)."""
        elsewhere = self.sizes_elsewhere(node)
        if elsewhere is None:
            return self.ints(shape, node)
        other, other_source = elsewhere
        pieces: list[Any] = []  # an int, or (value, j): size j of that value, read at run time
        unknown = []
        for i, (size, size2) in enumerate(zip(shape, other)):
            if size == size2:
                pieces.append(size)
            elif i < len(other_source) and (self.meta(x).shape[i], other_source[i]) == (size, size2):
                pieces.append(0)
            else:
                found = self.dynamic_size(x, other_source, size, size2)
                pieces.append(-1 if found is None else found)
                if found is None:
                    unknown.append(i)
        if len(unknown) > 1:
            raise UnsupportedOperatorError(
                f"ONNX export: the Reshape {self.where(node)} makes {len(unknown)} sizes "
                f"({[shape[i] for i in unknown]}) that follow a dynamic axis, and ONNX infers at "
                "most one (-1). Fix: reshape in two steps, or keep those axes static.")
        if not any(isinstance(p, tuple) for p in pieces):
            return self.ints(pieces, node)
        return self.shape_from_pieces(node, pieces)

    def dynamic_size(self, x: Ref, other_source: tuple, size: int, size2: int) -> tuple | None:
        """A dimension that has ``size`` here and ``size2`` in the second trace: one of the
        reshaped value's own, else one of a graph input's (where ``x.shape[0]`` came from)."""
        candidates = [(x, other_source)] + [(Ref(h.name), self.other[h.name].meta[0].shape)
                                            for h in self.graph.placeholders]
        for ref, shape2 in candidates:
            for j, pair in enumerate(zip(self.meta(ref).shape, shape2)):
                if pair == (size, size2):
                    return (ref, j)
        return None

    def shape_from_pieces(self, node: Node, pieces: list[Any]) -> str:
        """``Concat`` of constant sizes and ``Gather(Shape(v), j)``: a shape known at run time."""
        parts = []
        for p in pieces:
            if isinstance(p, tuple):
                shape_of = self.emit("Shape", [self.name(p[0])], node, self.temp(node, "shape"))
                parts.append(self.emit("Gather", [shape_of, self.ints([p[1]], node)], node,
                                       self.temp(node, "dim"), axis=0))
            else:
                parts.append(self.ints([p], node))
        return self.emit("Concat", parts, node, self.temp(node, "target"), axis=0)

    def expand(self, node: Node, x: Ref, shape: Any) -> None:
        shape = list(shape)
        elsewhere = self.sizes_elsewhere(node)
        if elsewhere is not None:
            other, other_source = elsewhere
            source = self.meta(x).shape
            offset = len(shape) - len(source)  # sizes are matched from the right
            for i, (size, size2) in enumerate(zip(list(shape), other)):
                j = i - offset
                if size != size2:
                    if j < 0 or (source[j], other_source[j]) != (size, size2):
                        raise UnsupportedOperatorError(
                            f"ONNX export: the expand {self.where(node)} makes a size that follows "
                            "a dynamic axis from a size-1 dimension. Fix: broadcast with an "
                            "operation instead (x + zeros), or keep that axis static.")
                    shape[i] = 1  # ONNX Expand broadcasts both ways: 1 keeps the input's size
        self.emit("Expand", [self.name(x), self.ints(shape, node)], node)

    def check_same_arguments(self, node: Node) -> None:
        """A number or size that changed when the dynamic axes grew was baked in by the
        trace: refuse instead of writing a file that is wrong at every other size."""
        twin = self.other.get(node.name)  # type: ignore[union-attr]
        if twin is not None and (repr(twin.args), repr(twin.kwargs)) != (repr(node.args), repr(node.kwargs)):
            raise UnsupportedOperatorError(
                f"ONNX export: the operation {node.target_name} {self.where(node)} holds a number "
                f"that depends on the size of a dynamic axis ({node.args!r} at the example size, "
                f"{twin.args!r} at another). The trace would bake it in. Fix: compute it with "
                "tensor operations (x.mean() instead of x.sum() / x.shape[0]), or keep that "
                "axis static.")

    # -- whole layers -------------------------------------------------------------------------
    def conv2d(self, node: Node, x: Ref, w: Ref, b: Any, stride: Any, padding: Any,
               dilation: Any, groups: int) -> None:
        kernel = self.meta(w).shape[2:]
        (top, bottom), (left, right) = conv._conv_padding(padding, tuple(kernel), tuple(stride),
                                                          tuple(dilation))
        inputs = [self.name(w)] + ([self.name(b)] if b is not None else [])
        self.with_batch(node, x, "Conv", inputs, kernel_shape=list(kernel), strides=list(stride),
                        pads=[top, left, bottom, right], dilations=list(dilation), group=int(groups))

    def max_pool2d(self, node: Node, x: Ref, kernel: Any, stride: Any, padding: Any,
                   dilation: Any) -> None:
        self.with_batch(node, x, "MaxPool", [], kernel_shape=list(kernel), strides=list(stride),
                        pads=list(padding) * 2, dilations=list(dilation), ceil_mode=0)

    def avg_pool2d(self, node: Node, x: Ref, kernel: Any, stride: Any, padding: Any) -> None:
        self.with_batch(node, x, "AveragePool", [], kernel_shape=list(kernel), strides=list(stride),
                        pads=list(padding) * 2, count_include_pad=1, ceil_mode=0)

    def with_batch(self, node: Node, x: Ref, op: str, inputs: list[str], **attrs: Any) -> None:
        """``op`` on a batch of images; one ``(C, H, W)`` image is made a batch of one first."""
        if len(self.meta(x).shape) == 4:
            self.emit(op, [self.name(x)] + inputs, node, **attrs)
            return
        axis0 = self.ints([0], node)
        batch = self.emit("Unsqueeze", [self.name(x), axis0], node, self.temp(node, "batch"))
        out = self.emit(op, [batch] + inputs, node, self.temp(node, "batched"), **attrs)
        self.emit("Squeeze", [out, axis0], node)

    def embedding(self, node: Node, weight: Ref, indices: Ref, padding_idx: Any) -> None:
        self.emit("Gather", [self.name(weight), self.name(indices)], node, axis=0)

    def step(self, node: Node, op: str, inputs: list[str], last: bool = False, **attrs: Any) -> str:
        """One ONNX node of a translation that takes several: into a fresh value, or (``last``)
        into the node's own output."""
        return self.emit(op, inputs, node, None if last else self.temp(node, op.lower()), **attrs)

    def layer_norm(self, node: Node, x: Ref, weight: Any, bias: Any, axes: Any, eps: float) -> None:
        """Layer norm spelled out (ONNX's LayerNormalization needs opset 17; this runs on all)."""
        mean = self.step(node, "ReduceMean", [self.name(x)], axes=list(axes), keepdims=1)
        centered = self.step(node, "Sub", [self.name(x), mean])
        square = self.step(node, "Mul", [centered, centered])
        var = self.step(node, "ReduceMean", [square], axes=list(axes), keepdims=1)
        std = self.step(node, "Sqrt", [self.step(node, "Add", [var, self.value(eps, node)])])
        then = [(op, operand) for op, operand in (("Mul", weight), ("Add", bias)) if operand is not None]
        out = self.step(node, "Div", [centered, std], last=not then)
        for i, (op, operand) in enumerate(then):
            out = self.step(node, op, [out, self.name(operand)], last=i == len(then) - 1)

    # -- the smooth and leaky activations (ops/pointwise_activation.py) ---------------------
    def gelu(self, node: Node, x: Ref) -> None:
        """``x * (1 + erf(x / sqrt(2))) / 2``."""
        erf = self.step(node, "Erf", [self.step(node, "Mul", [self.name(x), self.value(pa.SQRT_HALF, node)])])
        half = self.step(node, "Mul", [self.step(node, "Add", [erf, self.value(1.0, node)]),
                                       self.value(0.5, node)])
        self.step(node, "Mul", [self.name(x), half], last=True)

    def gelu_tanh(self, node: Node, x: Ref) -> None:
        """``x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) / 2``."""
        x_name = self.name(x)
        cube = self.step(node, "Mul", [self.step(node, "Mul", [x_name, x_name]), x_name])
        inner = self.step(node, "Add", [x_name, self.step(node, "Mul", [cube, self.value(pa.TANH_GELU_CUBIC, node)])])
        t = self.step(node, "Tanh", [self.step(node, "Mul", [inner, self.value(pa.TANH_GELU_SCALE, node)])])
        half = self.step(node, "Mul", [self.step(node, "Add", [t, self.value(1.0, node)]), self.value(0.5, node)])
        self.step(node, "Mul", [x_name, half], last=True)

    def silu(self, node: Node, x: Ref) -> None:
        self.step(node, "Mul", [self.name(x), self.step(node, "Sigmoid", [self.name(x)])], last=True)

    def leaky_relu(self, node: Node, x: Ref, slope: float) -> None:
        self.emit("LeakyRelu", [self.name(x)], node, alpha=float(slope))

    def elu(self, node: Node, x: Ref, alpha: float) -> None:
        self.emit("Elu", [self.name(x)], node, alpha=float(alpha))

    def softplus(self, node: Node, x: Ref, beta: float, threshold: float) -> None:
        """``x`` where ``beta * x > threshold``, else ``Softplus(beta * x) / beta``."""
        scaled = self.step(node, "Mul", [self.name(x), self.value(beta, node)])
        smooth = self.step(node, "Div", [self.step(node, "Softplus", [scaled]), self.value(beta, node)])
        linear = self.step(node, "Greater", [scaled, self.value(threshold, node)])
        self.step(node, "Where", [linear, self.name(x), smooth], last=True)

    def log1p(self, node: Node, x: Ref) -> None:
        self.step(node, "Log", [self.step(node, "Add", [self.name(x), self.value(1.0, node)])], last=True)

    def expm1(self, node: Node, x: Ref) -> None:
        self.step(node, "Sub", [self.step(node, "Exp", [self.name(x)]), self.value(1.0, node)], last=True)


TRANSLATIONS = {
    Compare: Writer.compare, linalg.Linear: Writer.linear,
    activation.Softmax: Writer.softmax, activation.LogSoftmax: Writer.softmax,
    red.Sum: Writer.reduce_sum, red.Mean: Writer.reduce_other, red.Amax: Writer.reduce_other,
    sh.Reshape: Writer.reshape, sh.Permute: Writer.permute, sh.Expand: Writer.expand,
    sh.Cat: Writer.cat, convert.Cast: Writer.cast, ew.Clamp: Writer.clamp,
    layers.Conv2dLayer: Writer.conv2d, layers.MaxPool2dLayer: Writer.max_pool2d,
    layers.AvgPool2dLayer: Writer.avg_pool2d, layers.EmbeddingLayer: Writer.embedding,
    normalization.LayerNorm: Writer.layer_norm,
    pa.Gelu: Writer.gelu, pa.GeluTanh: Writer.gelu_tanh, pa.Silu: Writer.silu,
    pa.LeakyRelu: Writer.leaky_relu, pa.Elu: Writer.elu, pa.Softplus: Writer.softplus,
    pa.Log1p: Writer.log1p, pa.Expm1: Writer.expm1,
    ix.Index: indexing.index, diagonals.Triangle: indexing.triangle,
    masked.MaskedFill: indexing.masked_fill,
    attention.ScaledDotProductAttention: onnx_attention.scaled_dot_product_attention,
}

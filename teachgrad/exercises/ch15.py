"""Checkers for chapter 15, *The ecosystem*: Keras weights, reading an exported file, an
exported model served.

Exercise 15.1 loads weights written in Keras's layout into a teachgrad model; 15.2 reads
what an ONNX file holds (its inputs and outputs, operators, stored values); 15.3 exports a
model with ``tg.onnx.export`` and serves it with onnxruntime.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from typing import Any, Callable, Iterator

import numpy as np

import teachgrad as tg
from teachgrad import nn

from .core import (
    Feedback, Mismatch, Test, check, expect_close, expect_true, to_numpy, unseen_rng,
)

# -- 15.1 Keras weights into a teachgrad model ---------------------------------------------------

def _keras_reference(x: np.ndarray, kernels: list, biases: list, *, relu_after: str = "hidden",
                     use_bias: bool = True) -> np.ndarray:
    """What the Keras model computes: Dense(relu) ... Dense(linear), kernel stored (in, out).
    ``relu_after`` ("hidden", "all", "none") and ``use_bias=False`` compute usual mistakes,
    to name them."""
    for i, (kernel, bias) in enumerate(zip(kernels, biases)):
        x = x @ kernel + (bias if use_bias else 0.0)
        last = i == len(kernels) - 1
        if relu_after == "all" or (relu_after == "hidden" and not last):
            x = np.maximum(x, 0.0)
    return x


def _keras_hint(got: np.ndarray, x: np.ndarray, kernels: list, biases: list) -> str:
    def matches(kernels_used: list = kernels, **mistake: Any) -> bool:
        return bool(np.allclose(got, _keras_reference(x, kernels_used, biases, **mistake),
                                rtol=1e-4, atol=1e-4))
    if any(k.shape[0] == k.shape[1] for k in kernels) and matches(
            [k.T if k.shape[0] == k.shape[1] else k for k in kernels]):
        return "a square kernel still needs transposing: Keras (in, out) -> (out, in)"
    if matches(relu_after="all"):
        return "the last Dense layer's activation is linear: no ReLU after it"
    if matches(relu_after="none"):
        return "put an nn.ReLU after every Linear but the last (Dense(activation='relu'))"
    if matches(use_bias=False):
        return "copy the biases too: layer.bias.copy_(...)"
    return "Dense(relu) after every layer but the last, whose activation is linear"


def check_from_keras(from_keras: Callable[[list, list], Any]) -> Feedback:
    """Exercise 15.1: ``from_keras(kernels, biases)`` -> a module computing the same."""

    def case(sizes: tuple[int, ...], seed: int) -> Test:
        def run() -> None:
            rng = np.random.default_rng(seed)
            kernels = [rng.normal(size=(a, b)).astype(np.float32) for a, b in zip(sizes, sizes[1:])]
            biases = [rng.normal(size=b).astype(np.float32) for b in sizes[1:]]
            model = from_keras([k.copy() for k in kernels], [b.copy() for b in biases])
            expect_true(isinstance(model, nn.Module),
                        f"from_keras should return a teachgrad nn.Module, got {type(model).__name__}",
                        hint="build nn.Sequential(nn.Linear(...), nn.ReLU(), ...) and copy the "
                             "weights into its layers")
            for i, layer in enumerate(m for m in model.modules() if isinstance(m, nn.Linear)):
                if i < len(kernels) and tuple(layer.weight.shape) == kernels[i].shape != \
                        kernels[i].T.shape:
                    raise Mismatch(f"layer {i}: weight of shape {list(layer.weight.shape)}, "
                                   f"expected {list(kernels[i].T.shape)} (out_features, "
                                   "in_features)", hint="Keras stores a Dense kernel as (in, "
                                   "out); nn.Linear's weight is (out, in): transpose it",
                                   show_values=False)
            x = rng.normal(size=(7, sizes[0])).astype(np.float32)
            expected = _keras_reference(x.astype(np.float64), kernels, biases)
            got = model(tg.tensor(x))
            hint = "" if got is None else _keras_hint(to_numpy(got), x.astype(np.float64),
                                                       kernels, biases)
            expect_close(got, expected, rtol=1e-4, atol=1e-4, what="output", hint=hint)
            got.sum().backward()
            values = sum(k.size + b.size for k, b in zip(kernels, biases))
            trainable = [p for p in model.parameters() if p.requires_grad]
            expect_true(sum(p.numel() for p in trainable) == values,
                        f"the model has {sum(p.numel() for p in trainable)} trainable values, "
                        f"the Keras model {values}", hint="keep the weights and biases as the "
                        "layers' parameters: copy values into them under tg.no_grad()")
            frozen = [i for i, p in enumerate(trainable) if p.grad is None]
            expect_true(not frozen, f"no gradient reached parameter(s) {frozen}",
                        hint="copy values into the parameters (with tg.no_grad(): "
                             "layer.weight.copy_(...)), keep them parameters")
        return Test(f"a Keras MLP with layer sizes {list(sizes)}", run,
                    hint="one nn.Linear(in, out) per kernel (kernel.shape is (in, out)); copy "
                         "kernel.T into its weight and the bias into its bias, under tg.no_grad()")

    rng = unseen_rng()
    hidden = int(rng.integers(3, 9))
    tests = [case((4, 6, 3), 15), case((5, 5, 5, 2), 16), case((3, 2), 17),
             case((3, hidden, hidden, int(rng.integers(2, 5))), int(rng.integers(1 << 30))),
             case(tuple(int(n) for n in rng.integers(2, 7, size=5)), int(rng.integers(1 << 30)))]
    return check("15.1", tests, candidate=from_keras,
                 solved="your model computes what the Keras model computes, and trains.")


def _random_classifier(n_in: int, hidden: int, n_out: int, seed: int, depth: int = 1) -> nn.Module:
    """``depth`` Linear+ReLU layers of ``hidden`` units, then a Linear to ``n_out`` logits."""
    tg.manual_seed(seed)
    layers: list[nn.Module] = []
    width = n_in
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    return nn.Sequential(*layers, nn.Linear(width, n_out))


# -- 15.2 what an exported file holds ------------------------------------------------------------

def _file_truth(path: str) -> dict:
    """The reference reading of an ONNX file (the checker's own, from onnx.load)."""
    import onnx
    graph = onnx.load(path).graph

    def shapes(values: Any) -> dict:
        return {v.name: [d.dim_param if d.dim_param else int(d.dim_value)
                         for d in v.type.tensor_type.shape.dim] for v in values}
    operators: dict[str, int] = {}
    for node in graph.node:
        operators[node.op_type] = operators.get(node.op_type, 0) + 1
    stored = sum(int(np.prod(list(t.dims), dtype=np.int64)) for t in graph.initializer)
    return {"inputs": shapes(graph.input), "outputs": shapes(graph.output),
            "operators": operators, "stored_values": stored}


class _TwoInTwoOut(nn.Module):
    """Two inputs, two outputs, a value used twice and two constants."""

    def __init__(self, n_x: int, n_z: int, hidden: int) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(n_x, hidden), nn.Linear(n_z, hidden)

    def forward(self, x: tg.Tensor, z: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor]:
        h = self.a(x) + self.b(z)
        return h.relu() * 2.0, (h - 1.0).sum(dim=1)


def _describe_hint(key: str, got: Any, want: Any) -> str:
    if key in ("inputs", "outputs"):
        if isinstance(got, dict) and set(got) == set(want):
            return ("a dimension is either named (dim.dim_param, a str, for a dynamic axis) or "
                    "fixed (dim.dim_value, an int): use the name where there is one")
        return f"one entry per graph.{key[:-1]} value, keyed by its name"
    if key == "operators":
        return "count node.op_type over graph.node: {'Gemm': 2, 'Relu': 1, ...}"
    return ("add up the sizes of every initializer (the product of its dims): weights, biases "
            "and the constants the model used")


def check_describe_onnx(describe_onnx: Callable[[str], dict]) -> Feedback:
    """Exercise 15.2: ``describe_onnx(path)`` reads an ONNX file: its inputs' and outputs'
    shapes, how often each operator occurs, and how many values the initializers store."""
    rng = unseen_rng()

    def case(description: str, build: Callable, example: tuple, names: tuple, axes: dict) -> Test:
        def run() -> None:
            model = build()
            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, "model.onnx")
                with warnings.catch_warnings():
                    # the file is only read here, never run at another size: the exporter's
                    # note that a model cannot be traced at longer axes is not the learner's
                    warnings.simplefilter("ignore", UserWarning)
                    tg.onnx.export(model, example, path, input_names=names[0],
                                   output_names=names[1], dynamic_axes=axes)
                want = _file_truth(path)
                got = describe_onnx(path)
            expect_true(isinstance(got, dict), f"describe_onnx returned a {type(got).__name__}",
                        hint="return {'inputs': ..., 'outputs': ..., 'operators': ..., "
                             "'stored_values': ...}")
            for key, value in want.items():
                mine = got.get(key)
                if isinstance(mine, dict):
                    mine = {k: [v if isinstance(v, str) else int(v) for v in shape]
                            if isinstance(shape, (list, tuple)) else shape
                            for k, shape in mine.items()} if key != "operators" else {
                        k: int(v) for k, v in mine.items()}
                elif isinstance(mine, (int, np.integer)):
                    mine = int(mine)
                if mine != value:
                    raise Mismatch(f"wrong {key!r}", value, mine,
                                   _describe_hint(key, mine, value))
        return Test(description, run)

    width = int(rng.integers(3, 9))
    n_x, n_z, hidden = (int(v) for v in rng.integers(2, 6, size=3))
    batch = int(rng.integers(2, 6))
    tests = [case("the chapter's kind of classifier, dynamic batch",
                  lambda: _random_classifier(2, 8, 3, 1), (tg.randn(4, 2),),
                  (["x"], ["logits"]), {"x": {0: "batch"}, "logits": {0: "batch"}}),
             case(f"a {width}-wide classifier with a fixed batch of {batch}",
                  lambda: _random_classifier(width, width, 2, 2), (tg.randn(batch, width),),
                  (["input"], ["output"]), {}),
             case("two inputs and two outputs, constants, dynamic axes on all four",
                  lambda: _TwoInTwoOut(n_x, n_z, hidden), (tg.randn(5, n_x), tg.randn(5, n_z)),
                  (["x", "z"], ["y", "s"]),
                  {"x": {0: "batch"}, "z": {0: "batch"}, "y": {0: "batch"}, "s": {0: "batch"}}),
             case("two inputs and two outputs, only some axes dynamic",
                  lambda: _TwoInTwoOut(n_x, n_z, hidden), (tg.randn(3, n_x), tg.randn(3, n_z)),
                  (["a", "b"], ["first", "second"]), {"a": {0: "n"}, "first": {0: "n"}})]
    return check("15.2", tests, candidate=describe_onnx,
                 solved="you can read any exported file: what goes in, what comes out, which "
                        "operators run, how many values it carries.")


# -- 15.3 export and serve ---------------------------------------------------------------------

@contextlib.contextmanager
def _counting_session_runs() -> Iterator[list[int]]:
    """Count ``InferenceSession.run`` calls inside: the file must really be run."""
    import onnxruntime

    original = onnxruntime.InferenceSession.run
    count = [0]

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return original(self, *args, **kwargs)

    onnxruntime.InferenceSession.run = run
    try:
        yield count
    finally:
        onnxruntime.InferenceSession.run = original


def check_export_and_serve(export_and_serve: Callable[..., Callable]) -> Feedback:
    """Exercise 15.3: ``export_and_serve(model, example, path)`` exports ``model`` to ONNX at
    ``path`` (input "x", output "logits", any batch size) and returns ``predict(array)``,
    which runs the file in onnxruntime and returns a numpy array of logits."""
    import onnx

    def case(n_in: int, hidden: int, n_out: int, seed: int, depth: int, sizes: tuple) -> Test:
        def run() -> None:
            model = _random_classifier(n_in, hidden, n_out, seed, depth)
            rng = np.random.default_rng(seed)
            batches = [rng.normal(size=(b, n_in)).astype(np.float32) for b in sizes]
            with tg.no_grad():
                expected = [to_numpy(model(tg.tensor(x))) for x in batches]
            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, "model.onnx")
                predict = export_and_serve(model, tg.tensor(batches[0][:1].repeat(2, 0)), path)
                expect_true(callable(predict), "export_and_serve should return a function "
                            "predict(array) -> logits", hint="return a closure over the "
                            "onnxruntime.InferenceSession")
                expect_true(os.path.exists(path), f"nothing was written to {path!r}",
                            hint="tg.onnx.export(model, example, path, ...)")
                graph = onnx.load(path).graph
                inputs = [i.name for i in graph.input]
                outputs = [o.name for o in graph.output]
                expect_true(inputs == ["x"] and outputs == ["logits"],
                            f"the file's inputs are {inputs} and outputs {outputs}, expected "
                            "['x'] and ['logits']",
                            hint="input_names=['x'], output_names=['logits']")
                for value in (graph.input[0], graph.output[0]):
                    batch_dim = value.type.tensor_type.shape.dim[0]
                    expect_true(bool(batch_dim.dim_param),
                                f"the batch dimension of {value.name!r} is fixed at "
                                f"{batch_dim.dim_value}: a server gets batches of any size",
                                hint="dynamic_axes={'x': {0: 'batch'}, 'logits': {0: 'batch'}}: "
                                     "the input's and the output's")
                with tg.no_grad():  # the served file must not depend on the live model
                    for p in model.parameters():
                        p.add_(1.0)
                for x, want in zip(batches, expected):
                    with _counting_session_runs() as runs:
                        got = predict(x.copy())
                    expect_true(runs[0] >= 1, "predict returned without running an ONNX Runtime "
                                "session", hint="create onnxruntime.InferenceSession(path) once, "
                                "and call session.run(['logits'], {'x': array}) in predict")
                    expect_true(isinstance(got, np.ndarray),
                                f"predict returned a {type(got).__name__}, expected a numpy "
                                "array", hint="session.run returns a list of outputs: take "
                                "the first one")
                    expect_close(got, want, rtol=1e-4, atol=1e-5, what=f"logits of a batch of "
                                 f"{len(x)}", hint="predict must run the exported file (an "
                                 "onnxruntime.InferenceSession), not the teachgrad model, "
                                 "whose weights may change after export")
        layers = "-".join([str(n_in)] + [str(hidden)] * depth + [str(n_out)])
        return Test(f"a {layers} classifier, batches of {', '.join(map(str, sizes))}", run)

    rng = unseen_rng()
    tests = [case(2, 8, 3, 1, 1, (1, 5, 13)),
             case(int(rng.integers(3, 7)), int(rng.integers(4, 12)), int(rng.integers(2, 6)),
                  int(rng.integers(1 << 30)), int(rng.integers(2, 4)),
                  (int(rng.integers(14, 200)), 1, int(rng.integers(2, 9))))]
    return check("15.3", tests, candidate=export_and_serve,
                 solved="the exported file serves any batch size with the model's logits.")

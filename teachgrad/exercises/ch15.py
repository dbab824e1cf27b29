"""Checkers for chapter 15, *The ecosystem*: the map, Keras weights, an exported model served.

Exercise 15.1 asks where each tool sits on the map of the ecosystem; 15.2 loads
weights written in Keras's layout into a teachgrad model; 15.3 exports a model
with ``tg.onnx.export`` and serves it with onnxruntime.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad import nn

from .core import Feedback, Mismatch, Test, check, expect_close, expect_true, to_numpy

# -- 15.1 the map ----------------------------------------------------------------------------

#: The layers of the map, as the chapter names them.
LAYERS = ("research framework", "exchange format", "compiler", "inference runtime",
          "inference server", "edge runtime", "low level")

#: Where each tool belongs (a set where the chapter accepts two readings), and what to say
#: to a learner who put it somewhere else.
MAP: dict[str, tuple[set[str], str]] = {
    "PyTorch": ({"research framework"},
                "you write and train models in it, eagerly, op by op"),
    "JAX": ({"research framework"},
            "you write and train models in it; it hands whole functions to XLA"),
    "teachgrad": ({"research framework"},
                  "the engine you built: tensors, autograd, nn, optim"),
    "ONNX": ({"exchange format"},
             "ONNX is a file format (a graph of standard operators), not a program that "
             "runs it: ONNX Runtime and TensorRT are the programs"),
    "ONNX Runtime": ({"inference runtime"},
                     "it loads an ONNX graph and runs it, on CPU or through execution "
                     "providers (CUDA, TensorRT, ...)"),
    "TensorRT": ({"inference runtime"},
                 "it builds an optimised engine for one NVIDIA GPU from a trained network "
                 "(e.g. an ONNX file) and runs it"),
    "Triton Inference Server": ({"inference server"},
                                "it serves models over HTTP/gRPC, batching requests and "
                                "handing them to backends such as TensorRT or ONNX Runtime; "
                                "not to be confused with the Triton kernel language"),
    "Triton (language)": ({"low level", "compiler"},
                          "you write GPU kernels in it, a level above CUDA: it belongs with "
                          "the kernels (its compiler turns them into GPU code)"),
    "XLA": ({"compiler"},
            "it compiles whole graphs from JAX/TensorFlow/PyTorch, fusing ops into kernels"),
    "torch.compile": ({"compiler"},
                      "it captures PyTorch code as graphs and compiles them (TorchInductor "
                      "generates fused kernels); training still happens in PyTorch"),
    "TorchScript": ({"compiler"},
                    "TorchScript captures a PyTorch program as a static graph (trace or "
                    "script) that an interpreter runs without Python: a graph compiler's "
                    "front end, not an inference runtime of its own"),
    "tg.compile": ({"compiler"},
                   "chapter 11's compiler: trace, passes, generated fused kernels"),
    "CUDA": ({"low level"}, "the programming model and toolkit of NVIDIA GPUs"),
    "ROCm": ({"low level"}, "AMD's GPU software stack (HIP is its CUDA-like language)"),
    "OpenCL": ({"low level"}, "a vendor-neutral standard for kernels on GPUs, CPUs, DSPs"),
    "LiteRT": ({"edge runtime"},
               "Google's on-device runtime, formerly TensorFlow Lite"),
    "ExecuTorch": ({"edge runtime"},
                   "PyTorch's on-device runtime, after PyTorch Mobile"),
    "Core ML": ({"edge runtime"}, "Apple's on-device inference framework"),
}


def check_place_on_map(place_on_map: Callable[[], dict]) -> Feedback:
    """Exercise 15.1: ``place_on_map()`` returns ``{tool: layer}`` for every tool in ``MAP``."""
    answers: dict = {}

    def load() -> None:
        got = place_on_map()
        expect_true(isinstance(got, dict), f"place_on_map() should return a dict, "
                    f"got {type(got).__name__}", hint="return {'PyTorch': 'research framework', ...}")
        answers.update(got)
        missing = [tool for tool in MAP if tool not in got]
        expect_true(not missing, f"these tools have no place yet: {', '.join(missing)}",
                    hint="one entry per tool of the chapter's table, spelt as there")
        unknown = sorted({str(v) for v in got.values() if v not in LAYERS})
        expect_true(not unknown, f"not a layer of the map: {', '.join(unknown)}",
                    hint=f"use one of: {', '.join(LAYERS)}")

    def placed(tool: str) -> Test:
        accepted, why = MAP[tool]

        def run() -> None:
            got = answers[tool]
            if got not in accepted:
                raise Mismatch(f"{tool} is not a {got}", " or ".join(sorted(accepted)), got,
                               hint=why)
        return Test(f"where does {tool} go?", run)

    tests = [Test("your map", load)] + [placed(tool) for tool in MAP]
    return check("15.1", tests, candidate=place_on_map,
                 solved="every tool is on the right layer of the map.")


# -- 15.2 Keras weights into a teachgrad model ---------------------------------------------------

def _keras_reference(x: np.ndarray, kernels: list, biases: list) -> np.ndarray:
    """What the Keras model computes: Dense(relu) ... Dense(linear), kernel stored (in, out)."""
    for i, (kernel, bias) in enumerate(zip(kernels, biases)):
        x = x @ kernel + bias
        if i < len(kernels) - 1:
            x = np.maximum(x, 0.0)
    return x


def check_from_keras(from_keras: Callable[[list, list], Any]) -> Feedback:
    """Exercise 15.2: ``from_keras(kernels, biases)`` -> an ``nn.Sequential`` computing the same."""

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
            linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
            expect_true(len(linears) == len(kernels),
                        f"the model has {len(linears)} Linear layers, the Keras model "
                        f"{len(kernels)} Dense layers", hint="one nn.Linear per Dense layer")
            for i, (layer, kernel) in enumerate(zip(linears, kernels)):
                expect_true(tuple(layer.weight.shape) == kernel.T.shape,
                            f"layer {i}: weight of shape {list(layer.weight.shape)}, expected "
                            f"{list(kernel.T.shape)} (out_features, in_features)",
                            hint="Keras stores a Dense kernel as (in, out); nn.Linear's weight "
                                 "is (out, in): transpose it")
            x = rng.normal(size=(7, sizes[0])).astype(np.float32)
            expected = _keras_reference(x.astype(np.float64), kernels, biases)
            got = model(tg.tensor(x))
            hint = "Dense(relu) after every layer but the last, whose activation is linear"
            # a square kernel copied without transposing fits the shape and gives wrong values
            untransposed = [k.T if k.shape[0] == k.shape[1] else k for k in kernels]
            if got is not None and any(k.shape[0] == k.shape[1] for k in kernels) and np.allclose(
                    to_numpy(got), _keras_reference(x.astype(np.float64), untransposed, biases),
                    rtol=1e-4, atol=1e-4):
                hint = "a square kernel still needs transposing: Keras (in, out) -> (out, in)"
            expect_close(got, expected, rtol=1e-4, atol=1e-4, what="output", hint=hint)
            got.sum().backward()
            frozen = [i for i, layer in enumerate(linears) if layer.weight.grad is None]
            expect_true(not frozen, f"no gradient reached the weights of layer(s) {frozen}",
                        hint="copy values into the parameters (with tg.no_grad(): "
                             "layer.weight.copy_(...)), keep them parameters")
        return Test(f"a Keras MLP with layer sizes {list(sizes)}", run,
                    hint="Keras stores a Dense kernel as (in, out); nn.Linear's weight is "
                         "(out, in): copy kernel.T into it")

    rng = np.random.default_rng()
    hidden = int(rng.integers(3, 9))
    tests = [case((4, 6, 3), 15), case((5, 5, 5, 2), 16),
             case((3, hidden, hidden, int(rng.integers(2, 5))), int(rng.integers(1 << 30)))]
    return check("15.2", tests, candidate=from_keras,
                 solved="your model computes what the Keras model computes, and trains.")


# -- 15.3 export and serve ---------------------------------------------------------------------

def _random_classifier(n_in: int, hidden: int, n_out: int, seed: int) -> nn.Module:
    tg.manual_seed(seed)
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))


def check_export_and_serve(export_and_serve: Callable[..., Callable]) -> Feedback:
    """Exercise 15.3: ``export_and_serve(model, example, path)`` exports ``model`` to ONNX at
    ``path`` (input "x", output "logits", any batch size) and returns ``predict(array)``,
    which runs the file in onnxruntime and returns a numpy array of logits."""
    import onnx

    def case(n_in: int, hidden: int, n_out: int, seed: int) -> Test:
        def run() -> None:
            model = _random_classifier(n_in, hidden, n_out, seed)
            rng = np.random.default_rng(seed)
            batches = [rng.normal(size=(b, n_in)).astype(np.float32) for b in (1, 5, 13)]
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
                batch_dim = graph.input[0].type.tensor_type.shape.dim[0]
                expect_true(bool(batch_dim.dim_param),
                            f"the batch dimension of 'x' is fixed at {batch_dim.dim_value}: "
                            "a server gets batches of any size",
                            hint="dynamic_axes={'x': {0: 'batch'}, 'logits': {0: 'batch'}}")
                with tg.no_grad():  # the served file must not depend on the live model
                    for p in model.parameters():
                        p.add_(1.0)
                for x, want in zip(batches, expected):
                    got = predict(x.copy())
                    expect_true(isinstance(got, np.ndarray),
                                f"predict returned a {type(got).__name__}, expected a numpy "
                                "array", hint="session.run returns a list of outputs: take "
                                "the first one")
                    expect_close(got, want, rtol=1e-4, atol=1e-5, what=f"logits of a batch of "
                                 f"{len(x)}", hint="predict must run the exported file (an "
                                 "onnxruntime.InferenceSession), not the teachgrad model, "
                                 "whose weights may change after export")
        return Test(f"a {n_in}-{hidden}-{n_out} classifier, batches of 1, 5 and 13", run)

    rng = np.random.default_rng()
    tests = [case(2, 8, 3, 1), case(int(rng.integers(3, 7)), int(rng.integers(4, 12)),
                                    int(rng.integers(2, 6)), int(rng.integers(1 << 30)))]
    return check("15.3", tests, candidate=export_and_serve,
                 solved="the exported file serves any batch size with the model's logits.")

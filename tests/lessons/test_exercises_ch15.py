"""Chapter 15's checkers: the reference answers pass, realistic wrong answers are rejected."""
from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import teachgrad as tg
from teachgrad import nn
from teachgrad.exercises import ch15

# -- 15.1 ---------------------------------------------------------------------------------


def reference_from_keras(kernels, biases):
    layers = []
    for i, (kernel, bias) in enumerate(zip(kernels, biases)):
        linear = nn.Linear(kernel.shape[0], kernel.shape[1])
        with tg.no_grad():
            linear.weight.copy_(tg.tensor(kernel.T))
            linear.bias.copy_(tg.tensor(bias))
        layers.append(linear)
        if i < len(kernels) - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def test_from_keras_reference_passes():
    assert ch15.check_from_keras(reference_from_keras).passed


def test_from_keras_rejects_missing_transpose():
    def no_transpose(kernels, biases):
        layers = [nn.Linear(*k.shape) for k in kernels]
        with tg.no_grad():
            for layer, kernel in zip(layers, kernels):
                layer.weight.copy_(tg.tensor(kernel))  # (in, out) into (out, in)
        return nn.Sequential(*layers)

    feedback = ch15.check_from_keras(no_transpose)
    assert feedback.status == "error" and "copy kernel.T" in feedback.message


def test_from_keras_rejects_transposing_only_where_shapes_differ():
    def transpose_when_it_fails(kernels, biases):
        fitted = [k if k.shape[0] == k.shape[1] else k.T for k in kernels]
        return reference_from_keras([f.T for f in fitted], biases)  # square ones stay (in, out)

    feedback = ch15.check_from_keras(transpose_when_it_fails)
    assert feedback.status == "wrong" and "square kernel still needs transposing" in feedback.message


def test_from_keras_rejects_relu_after_the_last_layer():
    def relu_everywhere(kernels, biases):
        return nn.Sequential(reference_from_keras(kernels, biases), nn.ReLU())

    feedback = ch15.check_from_keras(relu_everywhere)
    assert feedback.status == "wrong" and "last" in feedback.message


def test_from_keras_rejects_dropped_biases():
    def no_bias(kernels, biases):
        return reference_from_keras(kernels, [np.zeros_like(b) for b in biases])

    assert ch15.check_from_keras(no_bias).status == "wrong"


def test_from_keras_rejects_frozen_copies():
    def frozen(kernels, biases):
        model = reference_from_keras(kernels, biases)
        for p in model.parameters():
            p.requires_grad_(False)
        return model

    feedback = ch15.check_from_keras(frozen)
    assert feedback.status in ("wrong", "error")


def test_from_keras_rejects_a_plain_function():
    def numpy_function(kernels, biases):
        return lambda x: tg.tensor(ch15._keras_reference(x.numpy(), kernels, biases))

    feedback = ch15.check_from_keras(numpy_function)
    assert feedback.status == "wrong" and "nn.Module" in feedback.message


# -- 15.3 ---------------------------------------------------------------------------------

NAMES = dict(input_names=["x"], output_names=["logits"])
DYNAMIC = dict(dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})


def _session_predict(path):
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return lambda x: session.run(["logits"], {"x": x})[0]


def reference_export_and_serve(model, example, path):
    tg.onnx.export(model, (example,), path, **NAMES, **DYNAMIC)
    return _session_predict(path)


def test_export_and_serve_reference_passes():
    assert ch15.check_export_and_serve(reference_export_and_serve).passed


def test_export_and_serve_rejects_a_fixed_batch_size():
    def fixed(model, example, path):
        tg.onnx.export(model, (example,), path, **NAMES)
        return _session_predict(path)

    feedback = ch15.check_export_and_serve(fixed)
    assert feedback.status == "wrong" and "dynamic_axes" in feedback.message


def test_export_and_serve_rejects_serving_the_live_model():
    def live(model, example, path):
        tg.onnx.export(model, (example,), path, **NAMES, **DYNAMIC)
        return lambda x: model(tg.tensor(x)).detach().numpy()  # skips onnxruntime

    feedback = ch15.check_export_and_serve(live)
    assert feedback.status == "wrong" and "InferenceSession" in feedback.message


def test_export_and_serve_rejects_the_output_list():
    def whole_list(model, example, path):
        tg.onnx.export(model, (example,), path, **NAMES, **DYNAMIC)
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        return lambda x: session.run(None, {"x": x})

    feedback = ch15.check_export_and_serve(whole_list)
    assert feedback.status == "wrong" and "first one" in feedback.message


def test_export_and_serve_rejects_wrong_names_and_no_file():
    def default_names(model, example, path):
        tg.onnx.export(model, (example,), path, **DYNAMIC)
        return _session_predict(path)

    def nothing_written(model, example, path):
        return lambda x: model(tg.tensor(x)).detach().numpy()

    assert "input_names" in ch15.check_export_and_serve(default_names).message
    assert "nothing was written" in ch15.check_export_and_serve(nothing_written).message

"""tg.onnx.export: files that onnxruntime runs with the same outputs, and its errors."""
from __future__ import annotations

import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import teachgrad as tg
from teachgrad.onnx import UnsupportedOperatorError

nn = tg.nn


def run(path_or_bytes, feeds: dict) -> list:
    session = ort.InferenceSession(path_or_bytes, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def classifier() -> nn.Module:
    """A small conv-free classifier: flatten, two hidden layers, dropout, log-probabilities."""
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3), nn.LogSoftmax(dim=1))


def test_classifier_round_trip_with_a_dynamic_batch(tmp_path):
    model = classifier()
    path = str(tmp_path / "clf.onnx")
    proto = tg.onnx.export(model, (tg.randn(4, 3, 4),), path, input_names=["images"],
                           output_names=["logp"], dynamic_axes={"images": {0: "batch"}, "logp": [0]})
    assert model.training  # exported in eval mode, then put back
    assert proto.ir_version == onnx.helper.find_min_ir_version_for(proto.opset_import) == 8
    assert proto.opset_import[0].version == 17
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and [d.dim_value for d in dims[1:]] == [3, 4]
    assert proto.graph.output[0].name == "logp"
    assert "1.weight" in {i.name for i in proto.graph.initializer}
    model.eval()
    for batch in (1, 4, 11):
        x = tg.randn(batch, 3, 4)
        (got,) = run(path, {"images": x.numpy()})
        np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_sequential_mlp_to_a_file_object_with_default_names():
    model = nn.Sequential(nn.Linear(5, 7), nn.Sigmoid(), nn.Linear(7, 2), nn.Softmax(dim=1))
    buffer = io.BytesIO()
    proto = tg.onnx.export(model, tg.randn(3, 5), buffer)
    assert [i.name for i in proto.graph.input] == ["input"]
    assert [o.name for o in proto.graph.output] == ["output"]
    x = tg.randn(3, 5)
    (got,) = run(buffer.getvalue(), {"input": x.numpy()})
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_many_operations_two_inputs_two_outputs(tmp_path):
    bias = tg.tensor([0.5, -1.0, 2.0])

    def f(x, y):
        a = tg.where(x > 0, x * 2.0, 1.0 - x) / (y.abs() + 1.0)
        b = a.exp().log().sqrt().clamp(0.1, 3.0) + bias
        c = tg.cat([b, x.permute(0, 1)], dim=1).sum(dim=1, keepdim=True)
        d = a.amax(dim=1, keepdim=True)
        return c - d.mean() - a.amin(dim=0), tg.maximum(a, y).reshape(-1, 3).sin() * (x != y).float()

    x, y = tg.randn(4, 3), tg.randn(4, 3)
    path = str(tmp_path / "f.onnx")
    tg.onnx.export(f, (x, y), path, input_names=["x", "y"], output_names=["c", "e"],
                   dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
    for n in (4, 6):
        x, y = tg.randn(n, 3), tg.randn(n, 3)
        got = run(path, {"x": x.numpy(), "y": y.numpy()})
        for g, w in zip(got, f(x, y)):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)


def test_model_traced_on_cuda_exports_the_same_graph(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = tg.randn(2, 3)
    path = str(tmp_path / "m.onnx")
    tg.onnx.export(model.to("cuda"), (x.to("cuda"),), path, dynamic_axes={"input": [0]})
    (got,) = run(path, {"input": x.numpy()})
    np.testing.assert_allclose(got, model(x.to("cuda")).detach().cpu().numpy(), rtol=1e-5, atol=1e-6)


# -- errors --------------------------------------------------------------------------------

def test_an_operation_onnx_lacks_is_named_and_nothing_is_written(tmp_path):
    path = tmp_path / "bad.onnx"
    with pytest.raises(UnsupportedOperatorError, match=r"the operation CumSum \(node 'cumsum'\) has no "
                                                       r"ONNX translation.*Fix: export the part"):
        tg.onnx.export(lambda x: x.cumsum(0) * 2.0, (tg.randn(3, 2),), str(path))
    assert not path.exists()
    with pytest.raises(UnsupportedOperatorError, match=r"the operation NLLLoss"):
        tg.onnx.export(lambda x, t: nn.functional.nll_loss(x, t), (tg.randn(3, 2), tg.tensor([0, 1, 1])),
                       str(path))


def test_bad_arguments_are_rejected_before_writing(tmp_path):
    model = nn.Linear(3, 2)
    x = tg.randn(2, 3)
    path = str(tmp_path / "m.onnx")
    with pytest.raises(ValueError, match=r"input_names has 2 name\(s\) but the model has 1 input\(s\)"):
        tg.onnx.export(model, (x,), path, input_names=["a", "b"])
    with pytest.raises(TypeError, match=r"output_names must be a list of strings"):
        tg.onnx.export(model, (x,), path, output_names="y")
    with pytest.raises(ValueError, match=r"dynamic_axes names 'batch', which is not an input or output "
                                         r"name \(input, output\)"):
        tg.onnx.export(model, (x,), path, dynamic_axes={"batch": [0]})
    with pytest.raises(ValueError, match=r"'input' has 2 dimensions, so axis 2 does not exist"):
        tg.onnx.export(model, (x,), path, dynamic_axes={"input": [2]})
    with pytest.raises(ValueError, match=r"opset_version 9 is not supported: choose 13..17"):
        tg.onnx.export(model, (x,), path, opset_version=9)
    with pytest.raises(TypeError, match=r"f must be a file path or a binary file, not int"):
        tg.onnx.export(model, (x,), 3)
    assert not (tmp_path / "m.onnx").exists()

"""tg.onnx.export of LayerNorm (one Function in eager teachgrad, spelled out as ReduceMean,
Sub, Mul, Sqrt and Div in ONNX): onnxruntime's numbers against eager teachgrad's."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import teachgrad as tg

nn = tg.nn


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("make", [lambda: nn.LayerNorm(6), lambda: nn.LayerNorm((3, 6), eps=1e-2),
                                  lambda: nn.LayerNorm(6, bias=False),
                                  lambda: nn.LayerNorm(6, elementwise_affine=False)])
def test_layer_norm_exports_and_runs_in_onnxruntime(tmp_path, make, opset):
    model = nn.Sequential(nn.Linear(6, 6), make())
    with tg.no_grad():
        for p in model.parameters():
            p.copy_(tg.randn(*p.shape))
    path = str(tmp_path / "ln.onnx")
    tg.onnx.export(model, (tg.randn(2, 3, 6),), path, input_names=["x"], output_names=["y"],
                   dynamic_axes={"x": [0], "y": [0]}, opset_version=opset)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for batch in (1, 4):
        x = tg.randn(batch, 3, 6)
        (got,) = session.run(None, {"x": x.numpy()})
        np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)

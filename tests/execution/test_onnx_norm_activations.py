"""tg.onnx.export of LayerNorm and of the smooth and leaky activations (each one Function in
eager teachgrad, written as ONNX's own LeakyRelu / Elu / Erf or spelled out in elementwise
nodes): onnxruntime's numbers against eager teachgrad's, opsets 13 and 17."""
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


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("make", [
    lambda: nn.GELU(), lambda: nn.GELU("tanh"), lambda: nn.SiLU(), lambda: nn.LeakyReLU(0.2),
    lambda: nn.ELU(0.5), lambda: nn.Softplus(), lambda: nn.Softplus(beta=2.0, threshold=5.0),
    lambda: tg.erf, lambda: tg.expm1, lambda: (lambda x: (x.abs() + 0.5).log1p()),
], ids=["gelu", "gelu_tanh", "silu", "leaky_relu", "elu", "softplus", "softplus_beta", "erf",
        "expm1", "log1p"])
def test_the_smooth_and_leaky_activations_export(tmp_path, make, opset):
    layer = make()
    model = nn.Sequential(nn.Linear(5, 5), layer) if isinstance(layer, nn.Module) else layer
    path = str(tmp_path / "act.onnx")
    tg.onnx.export(model, (tg.randn(3, 5) * 3,), path, input_names=["x"], output_names=["y"],
                   dynamic_axes={"x": [0], "y": [0]}, opset_version=opset)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for batch in (1, 6):
        x = tg.randn(batch, 5) * 3
        (got,) = session.run(None, {"x": x.numpy()})
        np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)

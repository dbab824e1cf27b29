"""The layers, gradient clipping and batch norm's running statistics against PyTorch's own
numbers, recorded by scripts/record_torch_layers.py into tests/fixtures (torch is not imported)."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import json
import os

import numpy as np
import pytest

import teachgrad.nn.functional as F
from teachgrad import nn

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
with open(os.path.join(FIXTURES, "torch_layers.json")) as _f:
    CASES = {case["name"]: case for case in json.load(_f)["cases"]}
ARRAYS = np.load(os.path.join(FIXTURES, "torch_layers.npz"), allow_pickle=False)
DEVICES = ["cpu", "cpu-numba", "cuda"]  # cpu-numba: the cpu device on the numba CPU backend


@pytest.fixture
def device(request):
    """The device to run on; for ``cpu-numba``, the cpu device with the numba backend."""
    name = request.param
    if name != "cpu-numba":
        yield name
        return
    tg.backends.set_cpu_backend("numba", wait=True)
    try:
        yield "cpu"
    finally:
        tg.backends.set_cpu_backend("numpy")


def _names(fn: str) -> list[str]:
    return [name for name, case in CASES.items() if case["fn"] == fn]


def _close(actual: tg.Tensor, expected: np.ndarray) -> None:
    np.testing.assert_allclose(actual.detach().cpu().numpy(), expected, rtol=1e-10, atol=1e-12)


def _run(case: dict, **t: tg.Tensor) -> tg.Tensor:
    fn, options = case["fn"], case["options"]
    if fn == "conv2d":
        return F.conv2d(t["input"], t["weight"], t.get("bias"), **options)
    if fn in ("max_pool2d", "avg_pool2d"):
        return getattr(F, fn)(t["input"], **options)
    if fn == "layer_norm":
        return F.layer_norm(t["input"], options["normalized_shape"], t.get("weight"), t.get("bias"))
    if fn == "batch_norm":
        return F.batch_norm(t["input"], None, None, t["weight"], t["bias"], training=True)
    assert fn == "embedding"
    return F.embedding(t["indices"], t["weight"], padding_idx=options["padding_idx"])


FUNCTION_CASES = [name for fn in ("conv2d", "max_pool2d", "avg_pool2d", "layer_norm",
                                  "batch_norm", "embedding") for name in _names(fn)]


@pytest.mark.parametrize("device", DEVICES, indirect=True)
@pytest.mark.parametrize("name", FUNCTION_CASES)
def test_forward_and_backward_match_pytorch(name, device):
    case = CASES[name]
    tensors = {}
    for key in case["inputs"]:
        values = ARRAYS[f"{name}/{key}"]
        tensors[key] = tg.tensor(values, device=device, requires_grad=values.dtype == np.float64)
    out = _run(case, **tensors)
    assert out.device == tg.device("cuda:0" if device == "cuda" else device)
    _close(out, ARRAYS[f"{name}/output"])
    out.backward(tg.tensor(ARRAYS[f"{name}/upstream"], device=device))
    for key, t in tensors.items():
        if t.requires_grad:
            _close(t.grad, ARRAYS[f"{name}/grad_{key}"])


@pytest.mark.parametrize("device", DEVICES, indirect=True)
@pytest.mark.parametrize("name", _names("bn_module"))
def test_batch_norm_running_statistics_and_eval_match_pytorch(name, device):
    case = CASES[name]
    first = ARRAYS[f"{name}/train_input_0"]
    layer = getattr(nn, case["class"])(first.shape[1], dtype=tg.float64, **case["options"]).to(device)
    for step in range(case["steps"]):
        out = layer(tg.tensor(ARRAYS[f"{name}/train_input_{step}"], device=device))
        _close(out, ARRAYS[f"{name}/train_output_{step}"])
        state = layer.state_dict()
        recorded = {key.split("/", 3)[-1] for key in ARRAYS.files
                    if key.startswith(f"{name}/state_{step}/")}
        assert set(state) == recorded
        for key, value in state.items():
            _close(value, ARRAYS[f"{name}/state_{step}/{key}"])
    layer.eval()
    _close(layer(tg.tensor(ARRAYS[f"{name}/eval_input"], device=device)), ARRAYS[f"{name}/eval_output"])


def _params_with_grads(name: str, count: int, device: str) -> list[tg.Tensor]:
    params = []
    for i in range(count):
        grad = ARRAYS[f"{name}/grad_{i}"]
        p = tg.zeros(grad.shape, dtype=tg.float64, device=device, requires_grad=True)
        p.grad = tg.tensor(grad, device=device)
        params.append(p)
    return params


@pytest.mark.parametrize("device", DEVICES, indirect=True)
@pytest.mark.parametrize("name", _names("clip_grad_norm_"))
def test_clip_grad_norm_matches_pytorch(name, device):
    case = CASES[name]
    params = _params_with_grads(name, case["grads"], device)
    options = dict(case["options"])
    norm_type = options.pop("norm_type")
    total = nn.utils.clip_grad_norm_(params, norm_type=float(norm_type), **options)
    assert total.device == tg.device("cuda:0" if device == "cuda" else device)
    _close(total, ARRAYS[f"{name}/total"])
    for i, p in enumerate(params):
        _close(p.grad, ARRAYS[f"{name}/clipped_{i}"])


@pytest.mark.parametrize("device", DEVICES, indirect=True)
def test_clip_grad_value_matches_pytorch(device):
    case = CASES["clip_grad_value"]
    params = _params_with_grads("clip_grad_value", case["grads"], device)
    assert nn.utils.clip_grad_value_(params, **case["options"]) is None
    for i, p in enumerate(params):
        _close(p.grad, ARRAYS[f"clip_grad_value/clipped_{i}"])


def test_the_fixture_covers_every_layer():
    assert {case["fn"] for case in CASES.values()} == {
        "conv2d", "max_pool2d", "avg_pool2d", "layer_norm", "batch_norm", "embedding",
        "bn_module", "clip_grad_norm_", "clip_grad_value_"}

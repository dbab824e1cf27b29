"""RNN, LSTM, GRU, their cells and pad_sequence against PyTorch's own numbers: outputs, final
states and the gradients of the inputs, initial states and every parameter, recorded by
scripts/record_torch_recurrent.py into tests/fixtures (torch is not imported)."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import json
import os

import numpy as np
import pytest

from teachgrad import nn
from test_layers_torch import device  # noqa: F401  (the fixture: cpu, cpu-numba, cuda)

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
with open(os.path.join(FIXTURES, "torch_recurrent.json")) as _f:
    RECORDED = json.load(_f)
CASES = {case["name"]: case for case in RECORDED["cases"]}
ARRAYS = np.load(os.path.join(FIXTURES, "torch_recurrent.npz"), allow_pickle=False)
SIZES = RECORDED["sizes"]
# the simulator runs one OS thread per CUDA thread: a few cases of each kind there
CUDA_CASES = ["LSTM/num_layers=2-bidirectional=True-batch_first=False/states=True",
              "GRU/num_layers=1-bidirectional=True-batch_first=False/states=False",
              "RNN/nonlinearity=relu-num_layers=2-bidirectional=False-batch_first=True/states=True",
              "LSTMCell/{}/batched=True/states=True/bias=True",
              "GRUCell/{}/batched=False/states=True/bias=True",
              "pad_sequence/batch_first=True/left/-2.5"]


def _close(actual: tg.Tensor, expected: np.ndarray) -> None:
    assert tuple(actual.shape) == expected.shape
    np.testing.assert_allclose(actual.detach().cpu().numpy(), expected, rtol=1e-9, atol=1e-11)


def _module(case: dict, device: str) -> nn.Module:
    """The layer or cell of ``case``, holding the recorded weights (loaded by PyTorch's names)."""
    kind, options = case["kind"], dict(case["options"])
    sizes = (SIZES["input"], SIZES["hidden"])
    module = getattr(nn, kind)(*sizes, **options).to(device=device, dtype=tg.float64)
    state = {name: tg.tensor(ARRAYS[f"{case['name']}/param/{name}"], device=device)
             for name in case["parameters"]}
    module.load_state_dict(state)
    return module


def _outputs(case: dict, module, t: dict) -> tuple:
    """Run the case; its outputs as one flat tuple, in the recorded order."""
    if case["kind"] == "pad_sequence":
        sequences = [t[name] for name in case["inputs"]]
        return (nn.utils.rnn.pad_sequence(sequences, **case["options"]),)
    hx = None
    if "h0" in t:
        hx = (t["h0"], t["c0"]) if "c0" in t else t["h0"]
    out = module(t["input"], hx)
    if case["kind"].endswith("Cell"):
        return out if isinstance(out, tuple) else (out,)
    output, states = out
    return (output, *states) if isinstance(states, tuple) else (output, states)


def _check(name: str, device: str) -> None:
    case = CASES[name]
    tensors = {k: tg.tensor(ARRAYS[f"{name}/{k}"], device=device, requires_grad=True)
               for k in case["inputs"]}
    module = None if case["kind"] == "pad_sequence" else _module(case, device)
    outputs = _outputs(case, module, tensors)
    assert len(outputs) == case["outputs"]
    total = None
    for k, out in enumerate(outputs):
        assert out.device == tg.device("cuda:0" if device == "cuda" else device)
        _close(out, ARRAYS[f"{name}/output{k}"])
        term = (out * tg.tensor(ARRAYS[f"{name}/upstream{k}"], device=device)).sum()
        total = term if total is None else total + term
    total.backward()
    for k, t in tensors.items():
        _close(t.grad, ARRAYS[f"{name}/grad_{k}"])
    if module is not None:
        for pname, p in module.named_parameters():
            _close(p.grad, ARRAYS[f"{name}/grad_param/{pname}"])


@pytest.mark.parametrize("device", ["cpu", "cpu-numba"], indirect=True)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch(name, device):
    _check(name, device)


@pytest.mark.parametrize("device", ["cuda"], indirect=True)
@pytest.mark.parametrize("name", CUDA_CASES)
def test_matches_pytorch_on_cuda(name, device):
    assert name in CASES
    _check(name, device)


def test_the_fixtures_cover_every_layer_and_option():
    """The product the recording promises: each layer with each option both ways."""
    layers = [c for c in CASES.values() if c["kind"] in ("RNN", "LSTM", "GRU")]
    for kind in ("RNN", "LSTM", "GRU"):
        for option in ("bidirectional", "batch_first"):
            seen = {(c["options"].get(option, False), "h0" in c["inputs"])
                    for c in layers if c["kind"] == kind and "unbatched" not in c["name"]}
            assert seen == {(False, False), (False, True), (True, False), (True, True)}
        assert {c["options"].get("num_layers") for c in layers if c["kind"] == kind} == {1, 2}
    assert {c["options"].get("nonlinearity") for c in layers if c["kind"] == "RNN"} == {"tanh", "relu"}

"""scaled_dot_product_attention, MultiheadAttention, TransformerEncoderLayer and
TransformerEncoder against PyTorch's own numbers: outputs (and attention weights) and the
gradients of every input and parameter, recorded by scripts/record_attention.py into
tests/fixtures (torch is not imported). PyTorch's parameters reach teachgrad through
load_state_dict, by PyTorch's names and shapes."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import json
import os
import warnings

import numpy as np
import pytest

from teachgrad import nn
from teachgrad.nn import functional as F
from recorded_gradients import compare_with_recording
from test_layers_torch import device  # noqa: F401  (the fixture: cpu, cpu-numba, cuda)

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
with open(os.path.join(FIXTURES, "attention.json")) as _f:
    RECORDED = json.load(_f)
CASES = {case["name"]: case for case in RECORDED["cases"]}
ARRAYS = np.load(os.path.join(FIXTURES, "attention.npz"), allow_pickle=False)
# the simulator runs one OS thread per CUDA thread: a few cases of each kind there
CUDA_CASES = ["sdpa/float_mask", "sdpa/row_without_keys", "sdpa/gqa_causal",
              "mha/attn_mask_float_3d_and_padding", "mha/kdim_vdim_no_weights",
              "mha/is_causal_no_weights", "encoder_layer/mask_and_padding",
              "encoder/two_layers_norm_causal_detected"]


def _close(actual: tg.Tensor, expected: np.ndarray) -> None:
    assert tuple(actual.shape) == expected.shape
    np.testing.assert_allclose(actual.detach().cpu().numpy(), expected, rtol=1e-9, atol=1e-11)


def _module(case: dict, device: str) -> nn.Module:
    """The case's module on ``device`` in float64, holding PyTorch's recorded parameters."""
    options = dict(case["options"])
    if case["kind"] == "mha":
        module = nn.MultiheadAttention(**options)
    elif case["kind"] == "encoder_layer":
        module = nn.TransformerEncoderLayer(**options)
    else:
        norm = nn.LayerNorm(options["layer"]["d_model"]) if options["norm"] else None
        module = nn.TransformerEncoder(nn.TransformerEncoderLayer(**options["layer"]),
                                       options["num_layers"], norm=norm)
    module = module.to(device=device, dtype=tg.float64)
    module.load_state_dict({name: tg.tensor(ARRAYS[f"{case['name']}/param/{name}"], device=device)
                            for name in case["parameters"]})
    if case["kind"] != "encoder":
        module.train(options.get("dropout", 0.0) == 0.0)  # with dropout: recorded in eval mode
    return module


def _outputs(case: dict, module, t: dict, masks: dict) -> tuple:
    call = case["call"]
    if case["kind"] == "sdpa":
        return (F.scaled_dot_product_attention(t["query"], t["key"], t["value"], **masks, **call),)
    if case["kind"] == "mha":
        q = t["query"]
        k, v = (q, q) if case["self_attention"] else (t["key"], t["value"])
        out, weights = module(q, k, v, **masks, **call)
        return (out,) if weights is None else (out, weights)
    return (module(t["src"], **masks, **call),)


def _check(name: str, device: str) -> None:
    case = CASES[name]
    tensors = {k: tg.tensor(ARRAYS[f"{name}/{k}"], device=device, requires_grad=True)
               for k in case["inputs"]}
    masks = {k: tg.tensor(ARRAYS[f"{name}/{k}"], device=device) for k in case["masks"]}
    module = None if case["kind"] == "sdpa" else _module(case, device)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Support for mismatched")
        outputs = _outputs(case, module, tensors, masks)
    assert len(outputs) == case["outputs"]
    if module is not None:
        assert [n for n, _ in module.named_parameters()] == case["parameters"]
    compare_with_recording(ARRAYS, name, device, outputs, tensors, module, _close)


@pytest.mark.parametrize("device", ["cpu", "cpu-numba"], indirect=True)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch(name, device):
    _check(name, device)


@pytest.mark.parametrize("device", ["cuda"], indirect=True)
@pytest.mark.parametrize("name", CUDA_CASES)
def test_matches_pytorch_on_cuda(name, device):
    assert name in CASES
    _check(name, device)


def test_the_fixtures_cover_the_options():
    """Masks of both kinds, causal, batch_first, kdim/vdim, need_weights and averaging both
    ways, unbatched input and evaluation mode are all among the recorded cases."""
    mha = [c for c in CASES.values() if c["kind"] == "mha"]
    assert {c["call"].get("need_weights", True) for c in mha} == {True, False}
    assert {c["call"].get("average_attn_weights", True) for c in mha} == {True, False}
    assert {c["options"].get("batch_first", False) for c in mha} == {True, False}
    assert any("kdim" in c["options"] for c in mha) and any("dropout" in c["options"] for c in mha)
    mask_kinds = {(k, ARRAYS[f"{c['name']}/{k}"].dtype.kind) for c in mha for k in c["masks"]}
    assert mask_kinds == {("attn_mask", "b"), ("attn_mask", "f"),
                          ("key_padding_mask", "b"), ("key_padding_mask", "f")}
    sdpa = [c for c in CASES.values() if c["kind"] == "sdpa"]
    assert {ARRAYS[f"{c['name']}/attn_mask"].dtype.kind for c in sdpa if c["masks"]} == {"b", "f"}
    assert any(c["call"].get("is_causal") for c in sdpa) and any("scale" in c["call"] for c in sdpa)
    layers = [c for c in CASES.values() if c["kind"] == "encoder_layer"]
    assert {c["options"].get("norm_first", False) for c in layers} == {True, False}
    assert {c["options"].get("activation", "relu") for c in layers} == {"relu", "gelu"}

"""tg.onnx.export of attention: nn.MultiheadAttention and nn.TransformerEncoderLayer
(batch_first, with and without masks) and the whole GPT, with batch and sequence length
dynamic. Every file runs in onnxruntime and is compared with eager teachgrad at the
example size and at other sizes; and the constants a model makes from a size (a fill, the
positions 0..n-1, a causal triangle) follow the dynamic axes."""
from __future__ import annotations

import io

import numpy as np
import onnxruntime as ort
import pytest

import teachgrad as tg
from teachgrad import gpt, nn
from teachgrad.onnx import UnsupportedOperatorError
from teachgrad.onnx.constants import _triangle

E, HEADS = 8, 2
rng = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _no_warnings_but_the_baked_attention_branch(recwarn):
    yield
    others = [w for w in recwarn if not issubclass(w.category, tg.jit.TracerWarning)]
    assert not others, [str(w.message) for w in others]  # e.g. no "may only run at one size"


def session_of(model, inputs, names, out_names, dynamic):
    buffer = io.BytesIO()
    proto = tg.onnx.export(model, tuple(inputs), buffer, input_names=names,
                           output_names=out_names, dynamic_axes=dynamic)
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    session.op_types = {n.op_type for n in proto.graph.node}
    return session


def agree(model, session, names, examples):
    """onnxruntime's outputs are eager teachgrad's on every example."""
    for inputs in examples:
        with tg.no_grad():
            want = model(*inputs)
        want = want if isinstance(want, tuple) else (want,)
        got = session.run(None, {n: t.numpy() for n, t in zip(names, inputs)})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape)
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)


def tokens(batch, length):
    return tg.tensor(rng.standard_normal((batch, length, E)).astype(np.float32))


def causal(length, kind):
    """A causal attn_mask: boolean (True = take part) or float (-inf = hidden)."""
    visible = np.tril(np.ones((length, length), dtype=bool))
    if kind == "bool":
        return tg.tensor(visible)
    return tg.tensor(np.where(visible, 0.0, -np.inf).astype(np.float32))


def padding(batch, length, hide_all_of_last=False):
    """A key_padding_mask (True = a padding key): the last sequence ends two keys early."""
    pad = np.zeros((batch, length), dtype=bool)
    pad[-1, -2:] = True
    if hide_all_of_last:
        pad[-1] = True  # every key hidden: the engine gives zero weights and a zero output
    return tg.tensor(pad)


class SelfAttention(nn.Module):
    """``nn.MultiheadAttention(batch_first=True)`` on one sequence, with the masks given."""

    def __init__(self, masks: str, need_weights: bool = True, average: bool = True) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(E, HEADS, batch_first=True)
        self.masks, self.need_weights, self.average = masks, need_weights, average

    def forward(self, x, *masks):
        given = dict(zip(self.masks.split("+"), masks)) if self.masks else {}
        out, weights = self.attn(x, x, x, attn_mask=given.get("attn"),
                                 key_padding_mask=given.get("padding"),
                                 need_weights=self.need_weights, average_attn_weights=self.average)
        return out if weights is None else (out, weights)


MHA_CASES = {  # name: (masks, need_weights, average_attn_weights, mask kind)
    "no mask": ("", True, True, None),
    "no mask, no weights": ("", False, True, None),
    "weights per head": ("", True, False, None),
    "bool attn_mask": ("attn", True, True, "bool"),
    "float attn_mask": ("attn", True, True, "float"),
    "key_padding_mask": ("padding", True, True, None),
    "both masks": ("attn+padding", False, True, "bool"),
}


def mask_inputs(masks: str, kind: str | None, batch: int, length: int, hide_all=False) -> list:
    inputs = []
    for name in filter(None, masks.split("+")):
        inputs.append(causal(length, kind) if name == "attn" else padding(batch, length, hide_all))
    return inputs


@pytest.mark.parametrize("case", list(MHA_CASES))
def test_multihead_attention_exports_with_batch_and_length_dynamic(case):
    masks, need_weights, average, kind = MHA_CASES[case]
    tg.manual_seed(0)
    model = SelfAttention(masks, need_weights, average).eval()
    mask_names = [f"mask{i}" for i in range(len(mask_inputs(masks, kind, 1, 1)))]
    names = ["x", *mask_names]
    out_names = ["out", "weights"] if need_weights else ["out"]
    dynamic = {"x": [0, 1], "out": [0, 1]}
    dynamic.update({n: [0, 1] for n in mask_names})  # (batch, keys) or (queries, keys)
    if need_weights:
        dynamic["weights"] = [0, 1, 2] if average else [0, 2, 3]
    session = session_of(model, [tokens(2, 5), *mask_inputs(masks, kind, 2, 5)], names,
                         out_names, dynamic)
    agree(model, session, names, [[tokens(b, t), *mask_inputs(masks, kind, b, t)]
                                  for b, t in ((2, 5), (3, 7), (1, 2))])


def test_a_row_that_sees_no_key_gives_zeros_in_onnxruntime_too():
    tg.manual_seed(0)
    model = SelfAttention("padding").eval()
    session = session_of(model, [tokens(2, 4), padding(2, 4)], ["x", "pad"], ["out", "weights"],
                         {"x": [0, 1], "pad": [0, 1], "out": [0, 1], "weights": [0, 1, 2]})
    x, pad = tokens(2, 6), padding(2, 6, hide_all_of_last=True)
    agree(model, session, ["x", "pad"], [[x, pad]])
    out, weights = session.run(None, {"x": x.numpy(), "pad": pad.numpy()})
    assert not np.isnan(out).any() and np.all(weights[-1] == 0)


class Encoder(nn.Module):
    """``nn.TransformerEncoderLayer(batch_first=True)`` with the masks given."""

    def __init__(self, masks: str, **options) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(E, HEADS, dim_feedforward=16, dropout=0.0,
                                                batch_first=True, **options)
        self.masks = masks

    def forward(self, x, *masks):
        given = dict(zip(self.masks.split("+"), masks)) if self.masks else {}
        return self.layer(x, src_mask=given.get("attn"), src_key_padding_mask=given.get("padding"),
                          is_causal="causal" in self.masks)


ENCODER_CASES = {  # name: (masks, mask kind, layer options)
    "no mask": ("", None, {}),
    "norm_first, gelu": ("", None, dict(norm_first=True, activation="gelu")),
    "bool src_mask": ("attn", "bool", {}),
    "float src_mask": ("attn", "float", {}),
    "is_causal": ("attn+causal", "float", {}),
    "src_key_padding_mask": ("padding", None, dict(norm_first=True)),
}


@pytest.mark.parametrize("case", list(ENCODER_CASES))
def test_transformer_encoder_layer_exports_with_batch_and_length_dynamic(case):
    masks, kind, options = ENCODER_CASES[case]
    tg.manual_seed(1)
    model = Encoder(masks, **options).eval()
    given = masks.replace("+causal", "")

    def inputs(b, t):
        return [tokens(b, t), *mask_inputs(given, kind, b, t)]
    names = ["x", *[f"mask{i}" for i in range(len(inputs(1, 1)) - 1)]]
    dynamic = {n: [0, 1] for n in names} | {"out": [0, 1]}
    session = session_of(model, inputs(2, 5), names, ["out"], dynamic)
    agree(model, session, names, [inputs(b, t) for b, t in ((2, 5), (3, 7), (1, 1))])


@pytest.mark.parametrize("tie_weights", [False, True])
def test_whole_gpt_exports_with_batch_and_length_dynamic(tie_weights):
    tg.manual_seed(0)
    model = gpt.GPT(gpt.GPTConfig(vocab_size=13, block_size=12, n_layer=2, n_head=2, n_embd=16,
                                  tie_weights=tie_weights)).eval()
    # (the exporter traces again at 2 and 3 times the example's sizes: within block_size)
    session = session_of(model, [tg.tensor(rng.integers(0, 13, (2, 4)))], ["idx"], ["logits"],
                         {"idx": [0, 1], "logits": [0, 1]})
    # the positions and the causal mask are made at run time, at the input's length (on the
    # CPU the attention is one node, whose mask compares two Ranges)
    assert {"Range", "GreaterOrEqual"} <= session.op_types
    agree(model, session, ["idx"], [[tg.tensor(rng.integers(0, 13, shape))]
                                    for shape in ((2, 7), (3, 12), (1, 1), (4, 5))])


def test_constants_made_from_a_size_follow_the_dynamic_axis():
    def model(x):  # a fill, the positions and triangles (float, boolean), all of x's length
        n = x.shape[-1]
        lower = tg.tensor(np.where(np.tril(np.ones((n, n))), 1.0, -2.0).astype(np.float32))
        above = tg.tensor(np.triu(np.ones((n, n), dtype=bool), 1))  # False on the lower part
        mixed = (x + tg.ones(x.shape)) * tg.arange(n, dtype=tg.float32) + lower
        return mixed.masked_fill(above, 7.0)

    buffer = io.BytesIO()
    tg.onnx.export(model, (tg.randn(4),), buffer, input_names=["x"], dynamic_axes={"x": [0]})
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    for n in (4, 1, 9):
        x = tg.randn(n)
        (got,) = session.run(None, {"x": x.numpy()})
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-6)


def test_a_constant_of_other_values_that_follows_a_dynamic_axis_is_refused():
    with pytest.raises(UnsupportedOperatorError, match=r"has a size that follows a dynamic axis"
                                                       r".*neither|none of one value repeated"):
        tg.onnx.export(lambda x: x + tg.randn(x.shape), (tg.randn(3),), io.BytesIO(),
                       dynamic_axes={"x": [0]})


@pytest.mark.parametrize("shape", [(5, 5), (3, 7), (7, 3), (1, 4), (4, 1)])
def test_triangles_are_recognised_with_their_diagonal(shape):
    for k in range(-shape[0] - 1, shape[1] + 2):
        for upper in (False, True):
            band = (np.triu if upper else np.tril)(np.ones(shape, dtype=bool), k)
            found = _triangle(np.where(band, 2.5, -1.0))
            if band.all() or not band.any():
                assert found is None  # one value: a fill, not a triangle
                continue
            was_upper, diagonal, inside, outside = found
            again = (np.triu if was_upper else np.tril)(np.ones(shape, dtype=bool), diagonal)
            np.testing.assert_array_equal(np.where(again, inside, outside), np.where(band, 2.5, -1.0))
    assert _triangle(np.arange(12.0).reshape(3, 4)) is None

"""The tiny GPT exported with tg.onnx.export: onnxruntime's next-token logits are the engine's,
and sampling from them writes the same text; the slicing, tril and masked_fill translations
that causal attention needs, each against eager teachgrad."""
from __future__ import annotations

import io

import numpy as np
import onnxruntime as ort
import pytest

import teachgrad as tg
from teachgrad import gpt


def session_of(model, example, output_names=("logits",), **options):
    buffer = io.BytesIO()
    tg.onnx.export(model, (example,), buffer, input_names=["idx"], output_names=list(output_names),
                   **options)
    return ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("tie_weights", [False, True])
def test_exported_gpt_gives_the_engines_next_token_logits(tie_weights):
    tg.manual_seed(0)
    config = gpt.GPTConfig(vocab_size=17, block_size=12, n_layer=2, n_head=4, n_embd=24,
                           tie_weights=tie_weights)
    model = gpt.GPT(config).eval()
    rng = np.random.default_rng(1)
    session = session_of(model, tg.tensor(rng.integers(0, 17, (1, 12))),
                         dynamic_axes={"idx": [0], "logits": [0]})
    for batch in (1, 3):
        ids = rng.integers(0, 17, (batch, 12))
        (got,) = session.run(None, {"idx": ids})
        want = model(tg.tensor(ids)).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got[:, -1], gpt.next_token_logits(model, tg.tensor(ids)).detach().numpy(),
                                   rtol=1e-4, atol=1e-5)


def test_sampling_in_onnxruntime_writes_the_engines_text():
    tg.manual_seed(3)
    model = gpt.GPT(gpt.GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16)).eval()
    session = session_of(model, tg.zeros((1, 8), dtype=tg.int64), dynamic_axes={"idx": [0]})
    run = gpt.padded_logits_fn(lambda ids: session.run(None, {"idx": ids})[0], block_size=8)
    start = tg.tensor([[1, 2]])  # shorter than the block: padded on the right, read at its end
    ours = gpt.generate(model, start, 15, top_k=4, generator=tg.Generator().manual_seed(5))
    theirs = gpt.generate(model, start, 15, top_k=4, generator=tg.Generator().manual_seed(5),
                          logits_fn=run)
    assert tg.equal(ours, theirs)


class Pieces(tg.nn.Module):
    def forward(self, x):
        a, b = x.split(3, dim=-1)
        scores = (a @ b.transpose(-2, -1)).masked_fill(~tg.ones(4, 4, dtype=tg.bool).tril(), -1e9)
        return scores[:, 1:3], x[0, :, 2:5:2], x[..., 1], x.triu(1)


def test_slices_tril_triu_and_masked_fill_export():
    x = tg.randn(2, 4, 6)
    session = session_of(Pieces(), x, output_names=["cut", "strided", "picked", "upper"])
    names = [o.name for o in session.get_outputs()]
    got = session.run(None, {"idx": x.numpy()})
    for name, g, w in zip(names, got, Pieces()(x)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, err_msg=name)


def test_indexing_with_a_tensor_is_refused_by_name():
    class Gather(tg.nn.Module):
        def forward(self, x):
            return x[tg.tensor([0, 0])]
    with pytest.raises(tg.onnx.UnsupportedOperatorError, match="indexing with a ndarray"):
        session_of(Gather(), tg.randn(3, 2))

"""The tiny GPT (teachgrad.gpt): forward and backward against PyTorch's recorded GPT on the
same weights, learning on the shipped text, reproducible sampling, tg.compile against eager."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import teachgrad as tg
from teachgrad import gpt

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_gpt.npz"


@pytest.fixture(scope="module")
def recorded():
    arrays = np.load(FIXTURE)
    return arrays, json.loads(str(arrays["__index__"]))


def model_from_recording(arrays, name: str, fields: dict, device: str = "cpu") -> gpt.GPT:
    """The GPT of ``fields`` with the recorded weights (the first blocks' only, when
    ``fields`` has fewer layers than the recording)."""
    model = gpt.GPT(gpt.GPTConfig(**fields)).double().to(device)
    params = dict(model.named_parameters())
    recorded_names = {k.split("/param/", 1)[1] for k in arrays.files if k.startswith(f"{name}/param/")}
    assert set(params) <= recorded_names  # nanoGPT's names
    layers = fields["n_layer"]
    assert {n for n in recorded_names - set(params)
            if not any(n.startswith(f"transformer.h.{i}.") for i in range(layers, 99))} == set()
    with tg.no_grad():
        for pname, p in params.items():
            p.copy_(tg.tensor(arrays[f"{name}/param/{pname}"], device=device))
    return model


@pytest.mark.parametrize("name", ["untied", "tied_no_bias"])
def test_forward_and_backward_match_pytorch(recorded, name):
    arrays, meta = recorded
    model = model_from_recording(arrays, name, meta["cases"][name])
    idx, targets = tg.tensor(arrays[f"{name}/idx"]), tg.tensor(arrays[f"{name}/targets"])
    np.testing.assert_allclose(model(idx).detach().numpy(), arrays[f"{name}/logits"], rtol=1e-10, atol=1e-12)
    loss = model.loss(idx, targets)
    np.testing.assert_allclose(loss.item(), arrays[f"{name}/loss"], rtol=1e-12)
    loss.backward()
    for pname, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), arrays[f"{name}/grad/{pname}"], rtol=1e-8,
                                   atol=1e-11, err_msg=pname)


def test_on_cuda_the_tiled_kernel_runs_inside_and_matches_pytorch(recorded):
    """On cuda the attention takes the tiled kernel (float64): same logits and gradients."""
    arrays, meta = recorded
    name = "tied_no_bias"
    fields = dict(meta["cases"][name], n_layer=1)  # one block: the simulator is slow
    cpu = model_from_recording(arrays, name, fields)
    model = model_from_recording(arrays, name, fields, device="cuda")
    idx, targets = arrays[f"{name}/idx"][:1, :5], arrays[f"{name}/targets"][:1, :5]
    with tg.profiler.profile() as prof:
        logits = model(tg.tensor(idx, device="cuda"))
    assert any("FlashAttention" in e.name for e in prof.events())
    np.testing.assert_allclose(logits.detach().cpu().numpy(), cpu(tg.tensor(idx)).detach().numpy(),
                               rtol=1e-10, atol=1e-12)
    model.loss(tg.tensor(idx, device="cuda"), tg.tensor(targets, device="cuda")).backward()
    cpu.loss(tg.tensor(idx), tg.tensor(targets)).backward()
    for (pname, p), q in zip(model.named_parameters(), cpu.parameters()):
        np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.numpy(), rtol=1e-8, atol=1e-11,
                                   err_msg=pname)


def small_model(vocab_size: int = 13, **fields) -> gpt.GPT:
    tg.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=vocab_size, **{**dict(block_size=16, n_layer=1,
                                 n_head=2, n_embd=16), **fields}))


def test_the_loss_falls_on_the_shipped_text():
    text = gpt.load_text()[:20_000]
    vocab = gpt.CharVocabulary.from_text(text)
    ids = vocab.encode(text)
    model = small_model(vocab.size, block_size=32, n_embd=32)
    optimizer = tg.optim.AdamW(model.parameters(), lr=3e-3)
    batches = [gpt.random_batch(ids, 16, 32, generator=i) for i in range(30)]
    with tg.no_grad():
        before = np.mean([model.loss(x, y).item() for x, y in batches[:4]])
    assert abs(before - np.log(vocab.size)) < 0.1  # a fresh model guesses uniformly
    for x, y in batches:
        optimizer.zero_grad()
        model.loss(x, y).backward()
        optimizer.step()
    with tg.no_grad():
        after = np.mean([model.loss(x, y).item() for x, y in batches[:4]])
    assert after < before - 0.5


def test_sampling_is_reproducible_with_a_seed_and_greedy_with_top_k_one():
    model = small_model()
    start = tg.tensor([[1, 2, 3]])
    runs = [gpt.generate(model, start, 20, temperature=0.8, top_k=5,
                         generator=tg.Generator().manual_seed(seed)) for seed in (7, 7, 8)]
    assert tg.equal(runs[0], runs[1]) and not tg.equal(runs[0], runs[2])
    assert runs[0].shape == (1, 23) and tg.equal(runs[0][:, :3], start)
    greedy = gpt.generate(model, start, 20, top_k=1)  # the most likely token, every time
    idx = start
    for _ in range(20):
        idx = tg.cat([idx, gpt.next_token_logits(model, idx).argmax(-1, keepdim=True)], dim=1)
    assert tg.equal(greedy, idx)
    assert model.training  # generate restored the mode


def test_top_k_never_draws_outside_the_k_largest():
    logits = tg.tensor(np.random.default_rng(0).standard_normal((4, 30)))
    allowed = logits.topk(3).indices.numpy()
    gen = tg.Generator().manual_seed(0)
    for _ in range(50):
        drawn = gpt.sample_next(logits, temperature=5.0, top_k=3, generator=gen).numpy()
        assert all(d in row for d, row in zip(drawn[:, 0], allowed))


def test_longer_contexts_are_cropped_to_the_block():
    model = small_model(block_size=4)
    out = gpt.generate(model, tg.tensor([[1, 2, 3, 4, 5, 6]]), 3, generator=0)
    assert out.shape == (1, 9)
    with pytest.raises(ValueError, match="longer than block_size 4"):
        model(tg.tensor([[1, 2, 3, 4, 5]]))


@pytest.mark.parametrize("bad, match", [
    (dict(temperature=0.0), "temperature must be a positive"),
    (dict(top_k=0), "top_k must be None or a positive int"),
    (dict(max_new_tokens=-1), "max_new_tokens must be an int"),
])
def test_generate_refuses_bad_arguments(bad, match):
    with pytest.raises(ValueError, match=match):
        gpt.generate(small_model(), tg.tensor([[1]]), **{"max_new_tokens": 2, **bad})


def test_generate_refuses_float_contexts_and_config_checks_sizes():
    with pytest.raises(ValueError, match="idx must be an int64 tensor"):
        gpt.generate(small_model(), tg.tensor([[1.0]]), 2)
    with pytest.raises(ValueError, match="n_embd .* must be a multiple of n_head"):
        gpt.GPTConfig(n_embd=10, n_head=4)
    with pytest.raises(ValueError, match="vocab_size must be a positive int"):
        gpt.GPTConfig(vocab_size=0)
    with pytest.raises(TypeError, match="GPT needs a GPTConfig"):
        gpt.GPT({"vocab_size": 3})


def test_tied_head_reuses_the_embedding_table():
    tied, untied = small_model(tie_weights=True), small_model()
    assert untied.num_parameters() - tied.num_parameters() == 13 * 16
    assert not hasattr(tied, "lm_head")


def test_compiled_forward_matches_eager_and_recompiles_for_a_new_length():
    model = small_model().eval()
    compiled = tg.compile(model.blocks_to_logits)
    for shape in ((2, 16), (2, 16), (3, 9)):
        x = model.embed(tg.tensor(np.random.default_rng(shape[1]).integers(0, 13, shape)))
        np.testing.assert_allclose(compiled(x).detach().numpy(),
                                   model.blocks_to_logits(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    # and gradients flow through the compiled graph as through eager's
    ids = tg.tensor([[1, 2, 3, 4]])
    (compiled(model.embed(ids)) ** 2).sum().backward()
    compiled_grads = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    (model(ids) ** 2).sum().backward()
    for got, want in zip(compiled_grads, (p.grad.numpy() for p in model.parameters())):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_checkpointed_blocks_give_the_same_gradients():
    model = small_model(n_layer=2)
    ids, targets = tg.tensor([[1, 2, 3, 4, 5]]), tg.tensor([[2, 3, 4, 5, 6]])
    model.loss(ids, targets).backward()
    plain = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    model.checkpoint_blocks = True
    model.loss(ids, targets).backward()
    for got, want in zip((p.grad.numpy() for p in model.parameters()), plain):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)

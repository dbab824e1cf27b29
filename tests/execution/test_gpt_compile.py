"""``tg.compile`` of the whole tiny GPT: ids to logits as one graph, the loss for training,
and the embedding's range check kept in the graph (the same IndexError as eager's)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import teachgrad as tg
from teachgrad import gpt, nn
from teachgrad.ops.embedding import EmbeddingLookup

VOCAB = 13


@pytest.fixture(autouse=True)
def _attention_branch_is_baked_knowingly():
    # attention checks for fully masked rows with a Python branch: with is_causal no row is,
    # so the branch the trace bakes in is right for every input (chapter 17 says so)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.jit.TracerWarning)
        yield


def small_model(**fields) -> gpt.GPT:
    tg.manual_seed(0)
    sizes = dict(vocab_size=VOCAB, block_size=16, n_layer=2, n_head=2, n_embd=16)
    return gpt.GPT(gpt.GPTConfig(**{**sizes, **fields}))


def ids(shape, seed=0) -> tg.Tensor:
    return tg.tensor(np.random.default_rng(seed).integers(0, VOCAB, shape))


def out_of_range_message(model: gpt.GPT, bad: tg.Tensor) -> str:
    with pytest.raises(IndexError) as eager:
        model(bad)
    return str(eager.value)


@pytest.mark.parametrize("tie_weights", [False, True])
def test_compiled_gpt_is_one_graph_from_ids_to_logits_and_matches_eager(tie_weights):
    model = small_model(tie_weights=tie_weights).eval()
    compiled = tg.compile(model)
    with tg.no_grad():
        for shape, seed in (((2, 16), 0), ((2, 16), 1), ((3, 9), 2), ((2, 16), 3)):
            x = ids(shape, seed)
            np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
    graph = compiled.graph
    assert [n.name for n in graph.placeholders] == ["idx"]  # the ids are the graph's input
    lookups = [n for n in graph.operations() if n.target is EmbeddingLookup]
    assert len(lookups) == 2  # token and position tables, inside the one graph
    # new ids of a shape seen before reuse its graph; a new length compiles once more
    assert compiled.cache_info()["compiles"] == 2 and compiled.cache_info()["hits"] == 2
    assert compiled.recompiles[0].startswith("new input signature")


@pytest.mark.parametrize("grad", [False, True], ids=["generated_no_grad", "through_autograd"])
@pytest.mark.parametrize("bad_id", [VOCAB, -1, 1000])
def test_compiled_gpt_refuses_out_of_range_ids_with_eagers_error(grad, bad_id):
    model = small_model()
    compiled = tg.compile(model)
    good = ids((2, 8))
    bad = good.clone()
    bad[1, 5] = bad_id
    message = out_of_range_message(model, bad)
    assert message.startswith("index out of range in self")
    with tg.set_grad_enabled(grad):
        compiled(good)  # compiled on in-range ids first: the graph must check every call
        with pytest.raises(IndexError) as error:
            compiled(bad)
        assert str(error.value) == message
        np.testing.assert_allclose(compiled(good).detach().numpy(), model(good).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert compiled.cache_info()["compiles"] == 1  # refusing is not a reason to recompile


def test_compiled_gpt_refuses_a_context_longer_than_the_block_like_eager():
    model = small_model(block_size=8)
    compiled = tg.compile(model)
    compiled(ids((1, 8)))
    with pytest.raises(ValueError, match="longer than block_size 8"):
        compiled(ids((1, 9)))


def test_traced_gpt_keeps_the_range_check():
    model = small_model().eval()
    traced = tg.jit.trace(model, ids((1, 6)))
    bad = tg.tensor([[1, 2, VOCAB + 3, 4, 5, 6]])
    with pytest.raises(IndexError, match=f"index {VOCAB + 3} is not a row"):
        traced(bad)


def test_compiled_loss_trains_like_eager():
    models = [small_model(), small_model()]
    losses: list[list[float]] = [[], []]
    x, y = ids((2, 12)), ids((2, 12), seed=1)  # one batch, learnt step by step
    for which, model in enumerate(models):
        loss_fn = model.loss if which == 0 else tg.compile(model.loss)
        optimizer = tg.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        for _ in range(4):
            optimizer.zero_grad()
            loss = loss_fn(x, y)
            loss.backward()
            optimizer.step()
            losses[which].append(loss.item())
        if which == 1:
            assert loss_fn.cache_info()["compiles"] == 1  # AdamW's in-place steps need none
            assert any(n.target is EmbeddingLookup for n in loss_fn.graph.operations())
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    assert losses[0][-1] < losses[0][0]
    for (name, got), want in zip(models[1].named_parameters(), models[0].parameters()):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=name)


def test_compiled_loss_refuses_out_of_range_ids():
    model = small_model()
    loss_fn = tg.compile(model.loss)
    x, y = ids((2, 6)), ids((2, 6), seed=1)
    loss_fn(x, y).backward()
    x[0, 0] = VOCAB
    with pytest.raises(IndexError, match=f"index {VOCAB} is not a row of an embedding table "
                                         f"with {VOCAB} rows"):
        loss_fn(x, y)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_compiled_embedding_checks_ids_in_its_generated_code(device):
    tg.manual_seed(0)
    table = nn.Embedding(5, 3).to(device)
    compiled = tg.compile(table)
    good, bad = tg.tensor([[0, 4, 2]], device=device), tg.tensor([[0, 5, 2]], device=device)
    with tg.no_grad():
        np.testing.assert_array_equal(compiled(good).cpu().numpy(), table(good).cpu().numpy())
        assert "EmbeddingLookup._apply" in compiled.code  # the lookup, check included, runs
        with pytest.raises(IndexError, match="index 5 is not a row of an embedding table with 5"):
            compiled(bad)
        empty = compiled(tg.zeros((0, 2), dtype=tg.int64, device=device))
    assert tuple(empty.shape) == (0, 2, 3)  # no ids: nothing to check, an empty lookup


@pytest.mark.parametrize("shape", [(2, 5, 4), (3, 4), (4,), (2, 1, 3, 4)])
def test_compiled_linear_folds_leading_dimensions_into_rows_as_eager_does(shape):
    tg.manual_seed(0)
    layer = nn.Linear(4, 6)
    compiled = tg.compile(layer)
    x = tg.randn(*shape)
    with tg.no_grad():
        # the same bits as eager: one product over all rows, not one per leading index
        np.testing.assert_array_equal(compiled(x).numpy(), layer(x).numpy())
    assert ("cpu.reshape(v0, (-1, 4))" in compiled.code) == (len(shape) != 2)


def test_the_lookup_itself_refuses_ids_out_of_range_before_reading():
    weight = tg.randn(4, 2)
    with pytest.raises(IndexError, match="index -2 is not a row"):
        EmbeddingLookup.apply(weight, tg.tensor([0, -2]), None)
    with pytest.raises(IndexError, match="index 4 is not a row .* 4 rows \\(0 to 3\\)"):
        EmbeddingLookup.apply(weight, tg.tensor([[4], [0]]), None)

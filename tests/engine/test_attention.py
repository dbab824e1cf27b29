"""Attention: float64 gradchecks (SDPA with every kind of mask, MultiheadAttention, an encoder
layer), dropout against the documented reference (the same draws give the same numbers;
on average it changes nothing), PyTorch's parameter names and starting values, and bad
input refused before any work with PyTorch's errors."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import math
import warnings

import numpy as np
import pytest

from teachgrad import nn
from teachgrad.autograd import gradcheck
from teachgrad.nn import functional as F
from teachgrad.nn.attention import attention_weights
from test_recurrent import gradcheck_module

rng = np.random.default_rng(17)


def T(*shape, device="cpu", grad=True):
    return tg.tensor(rng.standard_normal(shape), dtype=tg.float64, device=device, requires_grad=grad)


def keep(*shape):
    mask = rng.random(shape) < 0.6
    mask[..., 0] = True
    return tg.tensor(mask)


def reference_attention(q, k, v, mask=None, causal=False, scale=None):
    """The documented reference, in numpy: softmax(q k^T * scale + bias) v."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        mask = np.tril(np.ones(scores.shape[-2:], dtype=bool))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True) @ v


# -- values against numpy and gradchecks ------------------------------------------
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_sdpa_matches_the_documented_reference(device):
    q, k, v = T(2, 4, 3), T(2, 5, 3), T(2, 5, 2)
    mask = keep(4, 5)
    for kwargs, ref in (({}, {}), ({"attn_mask": mask.to(device)}, {"mask": mask.numpy()}),
                        ({"is_causal": True, "scale": 0.7}, {"causal": True, "scale": 0.7})):
        out = F.scaled_dot_product_attention(q.to(device), k.to(device), v.to(device), **kwargs)
        expected = reference_attention(q.detach().numpy(), k.detach().numpy(), v.detach().numpy(), **ref)
        np.testing.assert_allclose(out.detach().cpu().numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("case", ["plain", "bool", "float", "causal", "gqa", "broadcast", "dead_row"])
def test_sdpa_gradcheck(case):
    q, k, v = T(2, 2, 3, 4), T(2, 2, 5, 4), T(2, 2, 5, 3)
    extra = {}
    if case == "bool":
        extra["attn_mask"] = keep(2, 1, 3, 5)
    elif case == "causal":
        extra["is_causal"], extra["scale"] = True, 0.4
    elif case == "gqa":
        q, extra["enable_gqa"] = T(2, 4, 3, 4), True
    elif case == "broadcast":
        k, v = T(1, 2, 5, 4), T(2, 1, 5, 3)
    elif case == "dead_row":
        mask = keep(3, 5).numpy()
        mask[1] = False
        extra["attn_mask"] = tg.tensor(mask)
    if case == "float":  # the float mask is differentiable too
        mask = T(3, 5)
        assert gradcheck(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                         (q, k, v, mask))
        return
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **extra), (q, k, v))


def test_a_query_that_sees_no_key_gets_zeros_not_nan():
    q, k, v = T(3, 4), T(5, 4), T(5, 2)
    mask = np.ones((3, 5), dtype=bool)
    mask[1] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=tg.tensor(mask))
    out.sum().backward()
    assert np.all(out.detach().numpy()[1] == 0) and np.isfinite(q.grad.numpy()).all()
    assert np.all(q.grad.numpy()[1] == 0)


@pytest.mark.parametrize("options, call, masks", [
    ({}, {}, {"attn_mask": ~keep(3, 4), "key_padding_mask": ~keep(2, 4)}),
    ({"kdim": 2, "vdim": 5, "batch_first": True}, {"need_weights": False, "is_causal": False}, {}),
    ({"add_bias_kv": True, "add_zero_attn": True, "bias": False}, {"average_attn_weights": False},
     {"key_padding_mask": ~keep(2, 4)}),
])
def test_multihead_attention_gradcheck(options, call, masks):
    first = options.get("batch_first", False)
    shape = (lambda n: (2, n, None)) if first else (lambda n: (n, 2, None))
    q = T(*shape(3)[:2], 4)
    k, v = T(*shape(4)[:2], options.get("kdim", 4)), T(*shape(4)[:2], options.get("vdim", 4))
    module = nn.MultiheadAttention(4, 2, **options)

    def run(m, q, k, v):
        out, weights = m(q, k, v, **masks, **call)
        return out if weights is None else (out, weights)
    gradcheck_module(module, (q, k, v), run)


@pytest.mark.parametrize("norm_first, activation", [(False, "relu"), (True, "gelu")])
def test_encoder_layer_gradcheck(norm_first, activation):
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0, norm_first=norm_first,
                                       activation=activation)
    causal = nn.transformer.generate_square_subsequent_mask(3, dtype=tg.float64)
    gradcheck_module(layer, (T(3, 2, 4),), lambda m, x: m(x, src_mask=causal, is_causal=True))


# -- dropout --------------------------------------------------------------------------
def test_sdpa_dropout_is_the_reference_with_the_same_draws():
    """PyTorch's reference: dropout(softmax(...), p, train=True) @ value; the same seed gives
    the same draws, so the same numbers."""
    q, k, v = T(2, 3, 4), T(2, 5, 4), T(2, 5, 3)
    tg.manual_seed(5)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    tg.manual_seed(5)
    expected = F.dropout(attention_weights(q, k), 0.4, training=True) @ v
    np.testing.assert_array_equal(out.detach().numpy(), expected.detach().numpy())
    plain = F.scaled_dot_product_attention(q, k, v)
    assert not np.allclose(out.detach().numpy(), plain.detach().numpy())


def test_sdpa_dropout_keeps_the_expected_value():
    q, k, v = T(1, 2, 3, grad=False), T(1, 6, 3, grad=False), T(1, 6, 2, grad=False)
    tg.manual_seed(0)
    draws = np.mean([F.scaled_dot_product_attention(q, k, v, dropout_p=0.3).numpy()
                     for _ in range(3000)], axis=0)
    np.testing.assert_allclose(draws, F.scaled_dot_product_attention(q, k, v).numpy(), atol=0.05)


def test_multihead_dropout_only_while_training():
    module = nn.MultiheadAttention(4, 2, dropout=0.5).double()
    x = T(3, 2, 4, grad=False)
    with tg.no_grad():
        tg.manual_seed(1)
        out, weights = module(x, x, x, average_attn_weights=False)
        assert (weights.numpy() == 0).any()  # the returned weights are dropped out too
        module.eval()
        out_eval, weights_eval = module(x, x, x, average_attn_weights=False)
        np.testing.assert_allclose(weights_eval.numpy().sum(-1), 1.0)
        assert not np.allclose(out.numpy(), out_eval.numpy())
        module.train()
        tg.manual_seed(1)
        again, _ = module(x, x, x, average_attn_weights=False)
    np.testing.assert_array_equal(again.numpy(), out.numpy())


# -- parameters: PyTorch's names, shapes and start --------------------------------------
def test_multihead_parameters_are_pytorchs():
    packed = nn.MultiheadAttention(6, 3)
    assert [(n, tuple(p.shape)) for n, p in packed.named_parameters()] == [
        ("in_proj_weight", (18, 6)), ("in_proj_bias", (18,)),
        ("out_proj.weight", (6, 6)), ("out_proj.bias", (6,))]
    assert np.all(packed.in_proj_bias.detach().numpy() == 0)
    assert np.all(packed.out_proj.bias.detach().numpy() == 0)
    bound = math.sqrt(6 / (6 + 18))  # xavier_uniform_ of the (18, 6) stacked weight
    assert np.abs(packed.in_proj_weight.detach().numpy()).max() <= bound
    separate = nn.MultiheadAttention(6, 2, kdim=4, vdim=5, add_bias_kv=True, bias=False)
    assert [(n, tuple(p.shape)) for n, p in separate.named_parameters()] == [
        ("q_proj_weight", (6, 6)), ("k_proj_weight", (6, 4)), ("v_proj_weight", (6, 5)),
        ("bias_k", (1, 1, 6)), ("bias_v", (1, 1, 6)), ("out_proj.weight", (6, 6))]
    assert separate.in_proj_weight is None and separate.in_proj_bias is None


def test_encoder_layers_are_independent_copies():
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=6)
    encoder = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(4))
    weights = [m.linear1.weight for m in encoder.layers]
    assert len({id(w) for w in weights}) == 3 and all(w is not layer.linear1.weight for w in weights)
    assert "layers.2.self_attn.out_proj.weight" in encoder.state_dict()
    assert "norm.weight" in encoder.state_dict()


def test_encoder_detects_a_causal_mask():
    """With is_causal left as None, a causal mask is recognised, as in PyTorch: the numbers are
    those of the mask either way."""
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0), 2).double()
    x = T(3, 2, 4, grad=False)
    causal = nn.transformer.generate_square_subsequent_mask(3, dtype=tg.float64)
    with tg.no_grad():
        np.testing.assert_allclose(encoder(x, mask=causal).numpy(),
                                   encoder(x, mask=causal, is_causal=False).numpy(), rtol=1e-12)
    assert nn.transformer.is_causal_mask(causal)
    assert not nn.transformer.is_causal_mask(tg.zeros(3, 3))


# -- bad input, refused before any work --------------------------------------------------
Q, K, V = T(2, 3, 4, grad=False), T(2, 5, 4, grad=False), T(2, 5, 6, grad=False)


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.scaled_dot_product_attention(Q, K, V, attn_mask=keep(3, 5), is_causal=True),
     RuntimeError, "Explicit attn_mask should not be set when is_causal=True"),
    (lambda: F.scaled_dot_product_attention(Q[0, 0], K[0, 0], V[0, 0]),
     RuntimeError, "at least 2 dimensional"),
    (lambda: F.scaled_dot_product_attention(Q, K.float(), V),
     RuntimeError, "Expected query, key, and value to have the same dtype"),
    (lambda: F.scaled_dot_product_attention(Q, K, V, attn_mask=tg.ones(3, 5, dtype=tg.int64)),
     RuntimeError, "Expected attn_mask dtype to be bool or float"),
    (lambda: F.scaled_dot_product_attention(Q, K, V, attn_mask=keep(4, 5)),
     RuntimeError, "does not broadcast to the scores' shape (2, 3, 5)"),
    (lambda: F.scaled_dot_product_attention(Q, K, V, attn_mask=keep(1, 2, 3, 5)),
     RuntimeError, "does not broadcast"),
    (lambda: F.scaled_dot_product_attention(Q, K, V, dropout_p=1.5),
     RuntimeError, "dropout probability has to be between 0 and 1, but got 1.5"),
    (lambda: F.scaled_dot_product_attention(Q, K[..., :3], V),
     RuntimeError, "query's last dimension (4) must equal key's (3)"),
    (lambda: F.scaled_dot_product_attention(Q, K, V[:, :4]),
     RuntimeError, "key and value must have the same sequence length"),
    (lambda: F.scaled_dot_product_attention(Q, T(3, 5, 4, grad=False), T(3, 5, 6, grad=False)),
     RuntimeError, "do not broadcast"),
    (lambda: F.scaled_dot_product_attention(T(1, 3, 2, 4), T(1, 2, 5, 4), T(1, 2, 5, 4), enable_gqa=True),
     RuntimeError, "Number of heads in key and value must divide the number of heads in query"),
    (lambda: F.scaled_dot_product_attention(Q.long(), K.long(), V.long()),
     RuntimeError, "expected floating-point"),
    (lambda: F.scaled_dot_product_attention(Q, K, V.to("cuda")), RuntimeError, "one device"),
    (lambda: F.scaled_dot_product_attention(Q, K, [1.0]), TypeError, "argument 'value' must be Tensor"),
])
def test_sdpa_refuses_bad_input(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)


def _mha(**options):
    return nn.MultiheadAttention(4, 2, **options).double()


X = T(3, 2, 4, grad=False)


@pytest.mark.parametrize("call, error, message", [
    (lambda: nn.MultiheadAttention(5, 2), AssertionError, "embed_dim must be divisible by num_heads"),
    (lambda: nn.MultiheadAttention(0, 2), ValueError, "embed_dim and num_heads must be greater than 0"),
    (lambda: nn.MultiheadAttention(4, 2, dropout=2.0), ValueError, "dropout probability"),
    (lambda: _mha()(X[0, 0], X[0, 0], X[0, 0]), AssertionError,
     "query should be unbatched 2D or batched 3D tensor but received 1-D query tensor"),
    (lambda: _mha()(X, X[0], X), AssertionError,
     "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found 2-D and 3-D"),
    (lambda: _mha()(X, X, X, key_padding_mask=tg.zeros(2, 3, 1, dtype=tg.bool)), AssertionError,
     "expected `key_padding_mask` to be `None` or 2-D"),
    (lambda: _mha()(X, X, X, key_padding_mask=tg.zeros(3, 2, dtype=tg.bool)), AssertionError,
     "Expected key_padding_mask of shape (2, 3)"),
    (lambda: _mha()(X, X, X, attn_mask=tg.zeros(3, 4, dtype=tg.bool)), RuntimeError,
     "The shape of the 2D attn_mask is (3, 4), but should be (3, 3)."),
    (lambda: _mha()(X, X, X, attn_mask=tg.zeros(2, 3, 3, dtype=tg.bool)), RuntimeError,
     "The shape of the 3D attn_mask is (2, 3, 3), but should be (4, 3, 3)."),
    (lambda: _mha()(X, X, X, attn_mask=tg.zeros(3, 3, dtype=tg.int64)), AssertionError,
     "only bool and floating types of attn_mask are supported"),
    (lambda: _mha()(X, X, X, is_causal=True), RuntimeError, "Need attn_mask if specifying the is_causal hint"),
    (lambda: _mha()(X, X, T(3, 2, 5, grad=False)), AssertionError,
     "was expecting embedding dimension of 4 for value, but got 5"),
    (lambda: _mha()(X, X, T(4, 2, 4, grad=False)), AssertionError, "do not match value's"),
    (lambda: _mha()(X, T(3, 1, 4, grad=False), T(3, 1, 4, grad=False)), AssertionError,
     "query has batch size 2 but key 1"),
    (lambda: _mha()(X, X.float(), X.float()), RuntimeError, "key is teachgrad.float32"),
    (lambda: nn.TransformerEncoderLayer(4, 2, activation="tanh"), RuntimeError,
     "activation should be relu/gelu, not tanh"),
    (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2), -1), ValueError, "num_layers"),
    (lambda: nn.TransformerEncoderLayer(4, 2, norm_first=True)(T(3, 2, 5, grad=False)),
     RuntimeError, "expects src of shape (S, N, 4)"),
    (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2), 2)(T(4, grad=False)),
     RuntimeError, "got (4,)"),
])
def test_multihead_refuses_bad_input(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)


def test_mismatched_mask_kinds_warn_as_pytorch_does():
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask"):
        _mha()(X, X, X, key_padding_mask=tg.zeros(2, 3, dtype=tg.bool), attn_mask=tg.zeros(3, 3))


def test_unbatched_input_gives_unbatched_output():
    module = _mha(batch_first=True)
    x = T(3, 4, grad=False)
    with tg.no_grad():
        out, weights = module(x, x, x, key_padding_mask=tg.tensor([False, False, True]))
        batched, _ = module(x.unsqueeze(0), x.unsqueeze(0), x.unsqueeze(0),
                            key_padding_mask=tg.tensor([[False, False, True]]))
    assert tuple(out.shape) == (3, 4) and tuple(weights.shape) == (3, 3)
    np.testing.assert_allclose(out.numpy(), batched.numpy()[0], rtol=1e-12)
    assert np.all(weights.numpy()[:, 2] == 0)

"""F.scaled_dot_product_attention on cuda takes the tiled kernel when it can (no mask besides
is_causal, no dropout, float32/float64, values as wide as queries) and the readable
composition otherwise; both give the same values and gradients."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.nn import functional as F
from teachgrad.nn.attention import causal_mask

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def cuda_inputs(rng, shapes, dtype):
    return [tg.tensor(rng.standard_normal(s), dtype=dtype, device="cuda", requires_grad=True)
            for s in shapes]


def values_and_grads(out, inputs, upstream):
    grads = tg.autograd.grad(out, inputs, upstream)
    return [out.detach().cpu().numpy()] + [g.cpu().numpy() for g in grads]


@pytest.mark.parametrize("dtype, tol", [(tg.float32, 2e-5), (tg.float64, 1e-12)])
@pytest.mark.parametrize("L, S, causal", [(11, 11, True), (5, 13, False), (9, 3, True)])
def test_the_tiled_path_and_the_composition_agree(dtype, tol, L, S, causal):
    rng = np.random.default_rng(L * S)
    q, k, v = cuda_inputs(rng, [(2, L, 4), (2, S, 4), (2, S, 4)], dtype)
    upstream = tg.tensor(rng.standard_normal((2, L, 4)), dtype=dtype, device="cuda")
    tiled = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.7)
    assert "FlashAttention" in repr(tiled.grad_fn)
    mask = causal_mask(L, S, "cuda") if causal else tg.ones((L, S), dtype=tg.bool, device="cuda")
    composed = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.7)
    assert "FlashAttention" not in repr(composed.grad_fn)
    for a, b in zip(values_and_grads(tiled, [q, k, v], upstream),
                    values_and_grads(composed, [q, k, v], upstream)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", ["mask", "dropout", "wider values", "broadcast batch", "float16"])
def test_other_calls_keep_the_readable_path(case):
    rng = np.random.default_rng(0)
    dtype = tg.float16 if case == "float16" else tg.float32
    q, k, v = (tg.tensor(rng.standard_normal(s), dtype=dtype, device="cuda")
               for s in [(2, 3, 4), (1 if case == "broadcast batch" else 2, 3, 4),
                         (2, 3, 6 if case == "wider values" else 4)])
    options = {"mask": dict(attn_mask=tg.ones((3, 3), dtype=tg.bool, device="cuda")),
               "dropout": dict(dropout_p=0.5)}.get(case, {})
    out = F.scaled_dot_product_attention(q.requires_grad_(), k, v, **options)
    assert "FlashAttention" not in repr(out.grad_fn)


def test_a_plugged_attention_still_runs_instead_of_the_kernel():
    calls = []

    def mine(q, k, v, attn_mask, is_causal, scale):
        calls.append(is_causal)
        return tg.nn.attention.ATTENTION.engine(q, k, v, attn_mask, is_causal, scale)
    q = tg.randn(1, 3, 4, device="cuda")
    tg.exercises.plug("nn.scaled_dot_product_attention", mine)
    try:
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
    finally:
        tg.exercises.unplug("nn.scaled_dot_product_attention")
    assert calls == [True]

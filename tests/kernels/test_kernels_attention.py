"""The tiled attention kernel against naive attention (numpy): ragged sizes, causal masks,
several heads; its recorded online softmax; its global traffic against the naive kernels'."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import teachgrad as tg
from teachgrad.kernels import attention, attention_naive
from teachgrad.kernels.attention_record import (attention_traffic_formulas,
                                                count_attention_traffic, record_online_softmax)
from teachgrad.kernels.transfer import to_device, to_host

rng = np.random.default_rng(5)


def inputs(heads, T, S, D, spread=1.0):
    return tuple((spread * rng.standard_normal((heads, n, D))).astype(np.float32) for n in (T, S, S))


def run_flash(q, k, v, **options):
    heads, T, D = q.shape
    O = to_device(np.full((heads, T, D), np.nan, np.float32))
    L = to_device(np.full((heads, T), np.nan, np.float32))
    attention.flash_forward(to_device(q), to_device(k), to_device(v), O, L, **options)
    return to_host(O), to_host(L)


def logsumexp(q, k, causal, scale):
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    top = s.max(-1, keepdims=True)
    return (top + np.log(np.exp(s - top).sum(-1, keepdims=True)))[..., 0]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads,T,S,D,block_q,block_k", [
    (3, 11, 13, 5, 4, 4),    # neither length a multiple of a tile
    (2, 13, 9, 1, 4, 2),     # head_dim 1, more queries than keys
    (1, 5, 17, 16, 8, 4),    # one partial query block, more keys than queries
    (2, 17, 17, 64, 8, 8),   # head_dim 64
    (4, 1, 1, 3, 4, 4),      # one query, one key
    (2, 9, 6, 7, 3, 5),      # tiles that are not powers of two
])
def test_matches_naive_attention(heads, T, S, D, block_q, block_k, causal):
    q, k, v = inputs(heads, T, S, D, spread=2.0)
    out, lse = run_flash(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    np.testing.assert_allclose(out, attention.naive_attention(q, k, v, causal), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lse, logsumexp(q, k, causal, 1 / math.sqrt(D)), rtol=1e-5, atol=1e-5)


def test_default_tiles_and_an_explicit_scale():
    q, k, v = inputs(2, 19, 23, 6)
    out, _ = run_flash(q, k, v, causal=True, scale=0.7)
    np.testing.assert_allclose(out, attention.naive_attention(q, k, v, True, scale=0.7), rtol=1e-5,
                               atol=1e-5)


def test_large_scores_do_not_overflow():
    """Scores near 100: exp would overflow float32 without the running max."""
    q, k, v = inputs(1, 7, 10, 4)
    out, _ = run_flash(q * 30, k * 30, v, block_q=4, block_k=3)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, attention.naive_attention(q * 30, k * 30, v), rtol=1e-4, atol=1e-4)


@settings(max_examples=12)
@given(st.integers(1, 3), st.integers(1, 12), st.integers(1, 12), st.integers(1, 9),
       st.integers(1, 5), st.integers(1, 5), st.booleans())
def test_any_shape_and_tiling(heads, T, S, D, block_q, block_k, causal):
    q, k, v = inputs(heads, T, S, D)
    out, _ = run_flash(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    np.testing.assert_allclose(out, attention.naive_attention(q, k, v, causal), rtol=1e-5, atol=1e-5)


def test_naive_kernels_match_and_write_the_score_matrix():
    q, k, v = inputs(2, 7, 9, 3)
    O = to_device(np.zeros((2, 7, 3), np.float32))
    scores, probabilities = attention_naive.naive_forward(to_device(q), to_device(k), to_device(v),
                                                          O, causal=True)
    np.testing.assert_allclose(to_host(O), attention.naive_attention(q, k, v, True), rtol=1e-5, atol=1e-6)
    p = to_host(probabilities)
    np.testing.assert_allclose(p.sum(-1), 1, rtol=1e-6)
    assert (p[:, np.triu_indices(7, 1, 9)[0], np.triu_indices(7, 1, 9)[1]] == 0).all()
    assert np.isneginf(to_host(scores)[0, 0, 1:]).all()


# -- the tensor-level entry point -------------------------------------------------------------

def test_tensor_entry_point_keeps_leading_dimensions():
    q, k, v = (tg.tensor(rng.standard_normal((2, 3, n, 4)).astype(np.float32), device="cuda")
               for n in (5, 6, 6))
    out = tg.kernels.flash_attention(q, k, v, causal=True)
    assert out.device.type == "cuda" and tuple(out.shape) == (2, 3, 5, 4) and out.grad_fn is None
    want = attention.naive_attention(q.cpu().numpy(), k.cpu().numpy(), v.cpu().numpy(), True)
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_tensor_entry_point_gradcheck_in_float64(causal):
    """Gradients through both backward kernels, against central differences (float64)."""
    q, k, v = (tg.tensor(rng.standard_normal((1, 2, n, 3)), device="cuda", requires_grad=True)
               for n in (5, 4, 4))
    assert tg.autograd.gradcheck(lambda a, b, c: tg.kernels.flash_attention(a, b, c, causal=causal),
                                 (q, k, v))


def test_tensor_entry_point_backward_in_float32_and_a_transposed_input():
    q, k, v = (rng.standard_normal((2, n, 3)).astype(np.float32) for n in (6, 7, 7))
    grad_out = rng.standard_normal((2, 6, 3)).astype(np.float32)
    tq = tg.tensor(q, device="cuda", requires_grad=True)
    tk = tg.tensor(np.swapaxes(k, 1, 2).copy(), device="cuda", requires_grad=True)
    tv = tg.tensor(v, device="cuda", requires_grad=True)
    out = tg.kernels.flash_attention(tq, tk.transpose(1, 2), tv, scale=0.6)  # a strided view
    out.backward(tg.tensor(grad_out, device="cuda"))
    dq, dk, dv = reference_gradients(q, k, v, grad_out, False, scale=0.6)
    np.testing.assert_allclose(tq.grad.cpu().numpy(), dq, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tk.grad.cpu().numpy(), np.swapaxes(dk, 1, 2), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tv.grad.cpu().numpy(), dv, rtol=1e-4, atol=1e-5)


def test_tensor_entry_point_refuses_bad_input():
    x = tg.ones(2, 3, 4, device="cuda")
    with pytest.raises(ValueError, match=r"on cpu.*\.cuda\(\)"):
        tg.kernels.flash_attention(tg.ones(2, 3, 4), x, x)
    with pytest.raises(TypeError, match="not a tensor"):
        tg.kernels.flash_attention(np.ones((2, 3, 4)), x, x)
    with pytest.raises(ValueError, match="same leading dimensions"):
        tg.kernels.flash_attention(x, tg.ones(3, 3, 4, device="cuda"), x)
    with pytest.raises(ValueError, match="float32"):
        tg.kernels.flash_attention(x.double(), x, x)
    with pytest.raises(ValueError, match="float32"):
        tg.kernels.flash_attention(x.long(), x.long(), x.long())


def test_kernel_level_refuses_bad_shapes_and_tiles_before_launching():
    Q, K = to_device(np.zeros((1, 4, 3), np.float32)), to_device(np.zeros((1, 5, 2), np.float32))
    O, L = to_device(np.zeros((1, 4, 3), np.float32)), to_device(np.zeros((1, 4), np.float32))
    with pytest.raises(ValueError, match="do not fit"):
        attention.flash_forward(Q, K, K, O, L)
    with pytest.raises(ValueError, match="block_q must be a positive int"):
        attention.flash_forward(Q, Q, Q, O, L, block_q=0)
    with pytest.raises(ValueError, match="threads per block"):
        attention.flash_forward(Q, Q, Q, O, L, block_q=2048)
    with pytest.raises(ValueError, match="shared memory"):
        big = to_device(np.zeros((1, 4, 128), np.float32))
        attention.flash_forward(big, big, big, to_device(np.zeros((1, 4, 128), np.float32)), L,
                                block_k=64)
    with pytest.raises(TypeError, match="float32 or float64, all arrays alike"):
        attention.flash_forward(*(to_device(np.zeros((1, 4, 3))) for _ in "qkv"),
                                to_device(np.zeros((1, 4, 3), np.float32)), to_device(np.zeros((1, 4))))


def test_default_tiles_fit_a_gpus_shared_memory(monkeypatch):
    """With the GPU's tiles (64 query rows, 32 keys), the tiles chosen when none are given
    are the largest whose shared memory fits the 48 KiB a block has: float64 with a large
    head dimension would need 64 KiB (forward) or 129 KiB (dK/dV) at full size."""
    from teachgrad.kernels import attention_backward

    monkeypatch.setattr(attention, "BLOCK_Q", 64)
    monkeypatch.setattr(attention, "BLOCK_K", 32)
    monkeypatch.setattr(attention_backward, "BLOCK_Q", 64)
    limit = 48 * 1024
    for dtype in (np.float32, np.float64):
        for D in (1, 16, 32, 47, 48, 64, 95, 96, 97, 128):
            keys, rows = attention.key_tile(D, dtype), attention_backward.query_tile(D, dtype)
            forward = attention.flash_attention_kernel(D, 64, keys, False, dtype=np.dtype(dtype))
            dq = attention_backward.dq_kernel(D, 64, keys, False, np.dtype(dtype))
            dkdv = attention_backward.dkdv_kernel(D, rows, keys, False, np.dtype(dtype))
            assert max(forward.shared_bytes, dq.shared_bytes, dkdv.shared_bytes) <= limit
            # ... and the largest that fit: twice the tile would not
            wider = attention.flash_attention_kernel(D, 64, 2 * keys, False, dtype=np.dtype(dtype))
            assert keys == 32 or wider.shared_bytes > limit
            taller = attention_backward.dkdv_kernel(D, 2 * rows, keys, False, np.dtype(dtype))
            assert rows == 64 or taller.shared_bytes > limit
    assert [attention.key_tile(D, np.float64) for D in (64, 96, 97, 128)] == [32, 32, 16, 16]
    assert attention.key_tile(128, np.float32) == 32
    assert [attention_backward.query_tile(D, np.float32) for D in (95, 96, 128)] == [64, 32, 32]
    assert [attention_backward.query_tile(D, np.float64) for D in (47, 48, 95, 96)] == [64, 32,
                                                                                      32, 16]


def test_default_tiles_shrink_to_the_devices_limit_and_stay_correct(monkeypatch):
    """Under a 2 KiB limit the simulator's 8-key tiles no longer fit a head dimension of 32
    in float64: the launches without sizes shrink them (4 keys; 2 query rows for dK/dV) and
    the results and gradients are still attention's; a size given explicitly is refused."""
    from teachgrad.kernels import launch as launching
    from teachgrad.kernels.attention_backward import flash_backward

    small = launching.DeviceLimits(max_shared_bytes_per_block=2048)
    monkeypatch.setattr(launching, "device_limits", lambda: small)
    monkeypatch.setattr(attention, "device_limits", lambda: small)
    assert attention.key_tile(32, np.float64) == min(4, attention.BLOCK_K)
    q, k, v = (rng.standard_normal((2, n, 32)) for n in (7, 9, 9))
    grad_out = rng.standard_normal((2, 7, 32))
    for causal in (False, True):
        Q, K, V = to_device(q), to_device(k), to_device(v)
        O, L = to_device(np.full((2, 7, 32), np.nan)), to_device(np.full((2, 7), np.nan))
        attention.flash_forward(Q, K, V, O, L, causal=causal)
        np.testing.assert_allclose(to_host(O), attention.naive_attention(q, k, v, causal),
                                   rtol=1e-10, atol=1e-12)
        grads = [to_device(np.full(a.shape, np.nan)) for a in (q, k, v)]
        flash_backward(Q, K, V, O, L, to_device(grad_out), *grads, causal=causal)
        for name, got, want in zip(("dQ", "dK", "dV"), grads,
                                   reference_gradients(q, k, v, grad_out, causal)):
            np.testing.assert_allclose(to_host(got), want, rtol=1e-9, atol=1e-11, err_msg=name)
    with pytest.raises(ValueError, match="shared memory per block is over the limit of 2048"):
        attention.flash_forward(Q, K, V, O, L, block_k=8)


# -- the recorded online softmax ---------------------------------------------------------------

def test_recorded_row_follows_the_online_softmax():
    record = record_online_softmax(T=13, S=21, head_dim=4, block_q=4, block_k=4, row=6, seed=1)
    assert record.visited == record.tiles == 6
    m_before, m, l, rescale = record.state.T
    scores = record.scores.astype(np.float64)
    for t in range(record.visited):  # m and l are the max and sum of the keys seen so far
        seen = scores[:record.keys_of(t).stop]
        assert m[t] == pytest.approx(seen.max(), rel=1e-6)
        assert l[t] == pytest.approx(np.exp(seen - seen.max()).sum(), rel=1e-5)
        assert rescale[t] == pytest.approx(math.exp(m_before[t] - m[t]), rel=1e-6)
    assert np.isneginf(m_before[0]) and (np.diff(m) >= 0).all() and (rescale[1:] < 1).any()
    np.testing.assert_allclose(record.partial_out[-1], record.reference, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(record.weights_after(record.visited - 1), record.final_weights(),
                               rtol=1e-5, atol=1e-7)
    assert len(record.steps) == record.visited and "rose" in " ".join(record.steps)


def test_recorded_causal_row_skips_the_tiles_right_of_the_diagonal():
    record = record_online_softmax(T=13, S=21, block_q=4, block_k=4, causal=True, row=5)
    assert record.tiles == 6 and record.visited == 2  # rows 4..7 reach keys 0..7
    assert np.isneginf(record.scores[6:8]).all() and np.isnan(record.scores[8:]).all()
    assert "causal skips them" in record.steps[-1]
    with pytest.raises(ValueError, match="outside the 13 query rows"):
        record_online_softmax(T=13, row=13)


# -- memory traffic -----------------------------------------------------------------------------

@pytest.mark.parametrize("case", [
    dict(T=7, S=9, head_dim=3, heads=1, block_q=4, block_k=4, causal=False),
    dict(T=7, S=9, head_dim=3, heads=2, block_q=4, block_k=4, causal=True),
    dict(T=10, S=6, head_dim=2, heads=1, block_q=4, block_k=2, causal=True),
    dict(T=5, S=11, head_dim=2, heads=1, block_q=2, block_k=4, causal=False),
])
def test_counted_traffic_matches_the_formulas(case):
    counted = count_attention_traffic(**case)
    formulas = attention_traffic_formulas(**case)
    for version in ("flash", "naive"):
        for what in ("global_reads", "global_writes", "intermediate_elements"):
            assert counted[version][what] == formulas[version][what], (version, what)
    assert counted["flash"]["global_reads"] < counted["naive"]["global_reads"] / 3
    assert counted["naive"]["shared_accesses"] == 0 < counted["flash"]["shared_accesses"]


def test_traffic_formulas_by_hand():
    """T = S = 8, D = 2, tiles of 4: naive reads 2*2*64 + 3*64 + 2*8*2*8, the tiled kernel
    reads q once (16) and K, V once per query block (2 blocks x 8 keys x 2 x 2)."""
    f = attention_traffic_formulas(8, 8, 2, block_q=4, block_k=4)
    assert f["naive"] == {"global_reads": 256 + 192 + 256, "global_writes": 64 + 64 + 16,
                          "intermediate_elements": 128}
    assert f["flash"] == {"global_reads": 16 + 64, "global_writes": 16 + 8,
                          "intermediate_elements": 0}
    causal = attention_traffic_formulas(8, 8, 2, block_q=4, block_k=4, causal=True)
    assert causal["flash"]["global_reads"] == 16 + 2 * (4 + 8) * 2  # block 0 skips keys 4..7
    assert causal["naive"]["global_reads"] == 2 * 2 * 36 + 192 + 256


# -- the backward pass ----------------------------------------------------------------------------

def reference_gradients(q, k, v, grad_out, causal, scale=None):
    """dQ, dK, dV of naive attention (float64), from the softmax's backward."""
    q, k, v, grad_out = (a.astype(np.float64) for a in (q, k, v, grad_out))
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ds = p * (grad_out @ np.swapaxes(v, -1, -2) - (grad_out * (p @ v)).sum(-1, keepdims=True))
    return ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, np.swapaxes(p, -1, -2) @ grad_out


@pytest.mark.parametrize("heads,T,S,D,block_q,block_k,causal", [
    (2, 11, 13, 5, 4, 4, False), (2, 11, 13, 5, 4, 3, True), (1, 9, 5, 3, 2, 4, True),
    (3, 7, 7, 1, 8, 2, False), (1, 5, 12, 4, 2, 3, True),  # keys past the last query: no gradient
])
def test_backward_matches_the_gradients_of_naive_attention(heads, T, S, D, block_q, block_k, causal):
    from teachgrad.kernels.attention_backward import flash_backward

    q, k, v = inputs(heads, T, S, D, spread=1.5)
    grad_out = rng.standard_normal((heads, T, D)).astype(np.float32)
    Q, K, V = to_device(q), to_device(k), to_device(v)
    O, L = to_device(np.zeros((heads, T, D), np.float32)), to_device(np.zeros((heads, T), np.float32))
    attention.flash_forward(Q, K, V, O, L, causal=causal, block_q=block_q, block_k=block_k)
    grads = [to_device(np.full(a.shape, np.nan, np.float32)) for a in (q, k, v)]
    flash_backward(Q, K, V, O, L, to_device(grad_out), *grads, causal=causal, block_q=block_q,
                   block_k=block_k)
    for name, got, want in zip(("dQ", "dK", "dV"), grads, reference_gradients(q, k, v, grad_out, causal)):
        np.testing.assert_allclose(to_host(got), want, rtol=1e-4, atol=1e-5, err_msg=name)
    if causal and S > T:
        assert not to_host(grads[1])[:, T:].any() and not to_host(grads[2])[:, T:].any()


def test_backward_refuses_gradients_of_the_wrong_shape():
    from teachgrad.kernels.attention_backward import flash_backward

    x = to_device(np.zeros((1, 4, 3), np.float32))
    L = to_device(np.zeros((1, 4), np.float32))
    with pytest.raises(ValueError, match=r"dK must be float32 of shape \(1, 4, 3\)"):
        flash_backward(x, x, x, x, L, x, x, to_device(np.zeros((1, 4, 2), np.float32)), x)

"""The CPU's one-node attention (``teachgrad.ops.attention`` with the compiled loops of
``teachgrad.backends.attention_loops``) against the readable composition it stands in for:
same values and gradients within rounding, the calls it must leave to the composition,
a float64 gradcheck, NaN rows, the backward on tensors (a tool watching), ONNX export."""
from __future__ import annotations

import io

import numpy as np
import onnxruntime as ort
import pytest

import teachgrad as tg
from teachgrad.autograd import parts
from teachgrad.nn import attention
from teachgrad.ops.attention import ScaledDotProductAttention

F = tg.nn.functional

CASES = [  # leading dims, L, S, E, Ev, is_causal, scale
    ((2, 3), 5, 7, 4, 6, True, None),
    ((2,), 7, 5, 3, 3, True, 0.3),  # more queries than keys: causal rows still see key 0
    ((4,), 6, 6, 8, 8, False, None),
    ((), 1, 1, 2, 2, True, -0.5),  # a negative scale: the row maximum is of the scaled scores
    ((3, 1), 9, 13, 5, 2, False, 2.0),
]


def run(fused: bool, arrays, grad, is_causal, scale):
    q, k, v = (tg.tensor(a, requires_grad=True) for a in arrays)
    if fused:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
        assert out.grad_fn.function is ScaledDotProductAttention
    else:
        out = attention._engine_attention(q, k, v, None, is_causal, scale)
        assert out.grad_fn.function is not ScaledDotProductAttention
    out.backward(tg.tensor(grad))
    return [out.detach().numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy()]


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float64, 1e-14)])
@pytest.mark.parametrize("lead,L,S,E,Ev,is_causal,scale", CASES)
def test_one_node_attention_equals_the_composition(dtype, tol, lead, L, S, E, Ev, is_causal, scale):
    rng = np.random.default_rng(L * 100 + S)
    arrays = [rng.standard_normal(lead + shape).astype(dtype) for shape in ((L, E), (S, E), (S, Ev))]
    grad = rng.standard_normal(lead + (L, Ev)).astype(dtype)
    fused, readable = run(True, arrays, grad, is_causal, scale), run(False, arrays, grad, is_causal, scale)
    for got, want in zip(fused, readable):
        assert got.dtype == want.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_causal_rows_see_only_their_past():
    # a query's output cannot change when a later key or value changes
    rng = np.random.default_rng(0)
    q, k, v = (tg.tensor(rng.standard_normal((2, 6, 4)).astype(np.float32)) for _ in range(3))
    before = F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy()
    k2, v2 = k.clone(), v.clone()
    k2[:, 4:] = 100.0
    v2[:, 4:] = -100.0
    after = F.scaled_dot_product_attention(q, k2, v2, is_causal=True).numpy()
    np.testing.assert_array_equal(after[:, :4], before[:, :4])
    assert not np.allclose(after[:, 4:], before[:, 4:])


def test_float64_gradcheck():
    gen = tg.Generator().manual_seed(2)
    inputs = [tg.randn(2, n, 3, dtype=tg.float64, generator=gen, requires_grad=True)
              for n in (4, 5, 5)]
    for is_causal in (True, False):
        assert tg.autograd.gradcheck(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=is_causal), inputs)


def test_a_row_with_nan_is_nan_as_in_the_composition():
    q = tg.ones(1, 3, 2)
    k = tg.tensor([[[1.0, 0.0], [float("nan"), 1.0], [0.5, 0.5]]])
    v = tg.randn(1, 3, 2)
    for is_causal in (True, False):
        got = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal).numpy()
        want = attention._engine_attention(q, k, v, None, is_causal, None).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-6)


def fused_ran(q, k, v, **kwargs) -> bool:
    return F.scaled_dot_product_attention(q, k, v, **kwargs).grad_fn.function is ScaledDotProductAttention


def test_calls_the_loops_do_not_take_run_the_composition():
    q = tg.randn(2, 4, 3, requires_grad=True)
    k, v = tg.randn(2, 5, 3), tg.randn(2, 5, 3)
    assert fused_ran(q, k, v) and fused_ran(q, k, v, is_causal=True)
    assert not fused_ran(q, k, v, attn_mask=tg.ones(4, 5, dtype=tg.bool))
    assert not fused_ran(q, k, v, dropout_p=0.5)
    assert not fused_ran(q, k[0], v[0])  # leading dimensions that broadcast
    with tg.autocast("cpu", dtype=tg.bfloat16):
        assert not fused_ran(q, k, v)
    # no keys at all: the composition's zero weights
    empty = F.scaled_dot_product_attention(q, tg.randn(2, 0, 3), tg.randn(2, 0, 3))
    assert empty.shape == (2, 4, 3) and not empty.detach().numpy().any()  # (PyTorch's too)
    empty.sum().backward()
    assert q.grad.shape == (2, 4, 3) and not q.grad.numpy().any()


def test_a_plugged_attention_takes_precedence():
    calls = []

    def mine(query, key, value, attn_mask, is_causal, scale):
        calls.append(is_causal)
        return attention._engine_attention(query, key, value, attn_mask, is_causal, scale)

    q = tg.randn(1, 3, 2, requires_grad=True)
    with parts.plugged(attention.ATTENTION.name, mine):
        out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert calls == [True] and out.grad_fn.function is not ScaledDotProductAttention


def test_backward_on_tensors_when_a_tool_watches_every_operation():
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((2, 5, 3)).astype(np.float32) for _ in range(3)]
    grad = rng.standard_normal((2, 5, 3)).astype(np.float32)
    plain = run(True, arrays, grad, True, None)
    with tg.profiler.profile():  # (it observes each operation: backward formulas get tensors)
        watched = run(True, arrays, grad, True, None)
    for a, b in zip(plain, watched):
        np.testing.assert_array_equal(a, b)


class Attend(tg.nn.Module):
    def __init__(self, is_causal):
        super().__init__()
        self.is_causal = is_causal

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.is_causal, scale=0.7)


@pytest.mark.parametrize("is_causal", [True, False])
def test_onnx_export_writes_the_operations_out(is_causal):
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, 3, n, 4)).astype(np.float32) for n in (5, 6, 6))
    buffer = io.BytesIO()
    tg.onnx.export(Attend(is_causal), tuple(tg.tensor(a) for a in (q, k, v)), buffer,
                   input_names=["q", "k", "v"], output_names=["out"])
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"q": q, "k": k, "v": v})
    want = F.scaled_dot_product_attention(*(tg.tensor(a) for a in (q, k, v)),
                                          is_causal=is_causal, scale=0.7).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_onnx_causal_mask_follows_dynamic_lengths():
    rng = np.random.default_rng(8)
    example = tuple(tg.tensor(rng.standard_normal((1, 2, 4, 3)).astype(np.float32)) for _ in range(3))
    buffer = io.BytesIO()
    tg.onnx.export(Attend(True), example, buffer, input_names=["q", "k", "v"],
                   output_names=["out"], dynamic_axes={n: [2] for n in ("q", "k", "v", "out")})
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    for length in (1, 7):
        q, k, v = (rng.standard_normal((1, 2, length, 3)).astype(np.float32) for _ in range(3))
        (got,) = session.run(None, {"q": q, "k": k, "v": v})
        want = F.scaled_dot_product_attention(*(tg.tensor(a) for a in (q, k, v)), is_causal=True,
                                              scale=0.7).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

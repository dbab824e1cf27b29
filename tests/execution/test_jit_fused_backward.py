"""The generated backward of a fused region: eager's gradients, one loop, only what it needs kept.

float64 gradients are checked by finite differences (gradcheck) through compiled
functions; float32 gradients against eager's within float32 rounding: rtol 1e-5 and
atol 4e-6. The fused loop adds a value's gradient contributions in its own order (each
addition may round differently: a few ulps, within rtol), and float32 ``tanh`` is a
rational function within 4e-7 of numpy's, so its slope ``1 - t²`` may differ by up to
8e-7, times the chain rule's other factors (up to about 4 in these functions): atol.
"""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg

F32_GRADIENTS = dict(rtol=1e-5, atol=4e-6)


def chain(x, y):
    """The benchmark's chain: six elementwise operations with a tanh."""
    a = x * 2.0 + y
    b = a.tanh() * 0.5 - 1.0
    return (b * a).relu()


REGIONS = {
    "chain": chain,
    "repeated input": lambda x, y: x * x + (x * y).sin() * y,
    "division and pow": lambda x, y: (x / (y * y + 1.0)) ** 2.0 + (y * y + 0.5) ** (x * 0.5),
    "exp, log, sqrt": lambda x, y: ((x * x + 1.0).log() + (y * 0.5).exp()).sqrt() - y.cos(),
    "abs, neg, sigmoid": lambda x, y: -(x - y).abs() * (x * 3.0).sigmoid(),
    "two outputs": lambda x, y: ((x * y).tanh(), (x * y).tanh() * 2.0 + x),
}


def total(out):
    return sum(o.sum() for o in out) if isinstance(out, tuple) else out.sum()


@pytest.mark.parametrize("name", list(REGIONS))
def test_gradcheck_through_compiled_regions_cpu(name):
    fn = REGIONS[name]
    x = tg.tensor(np.linspace(-1.5, 1.7, 7), dtype=tg.float64, requires_grad=True)
    y = tg.tensor(np.linspace(0.3, 2.1, 7), dtype=tg.float64, requires_grad=True)
    compiled = tg.compile(fn)
    assert tg.autograd.gradcheck(compiled, (x, y))
    assert compiled.kernels, "the function should have fused regions"


@pytest.mark.parametrize("name", ["chain", "division and pow", "two outputs"])
def test_gradcheck_through_compiled_regions_cuda(name):
    fn = REGIONS[name]
    x = tg.tensor(np.linspace(-1.5, 1.7, 5), dtype=tg.float64, device="cuda", requires_grad=True)
    y = tg.tensor(np.linspace(0.3, 2.1, 5), dtype=tg.float64, device="cuda", requires_grad=True)
    compiled = tg.compile(fn)
    assert tg.autograd.gradcheck(compiled, (x, y))
    assert "@cuda.jit" in compiled.kernels[0].backward_source


def eager_and_compiled_gradients(fn, arrays, device="cpu"):
    grads = []
    for run in (fn, tg.compile(fn)):
        xs = [tg.tensor(a, device=device, requires_grad=True) for a in arrays]
        total(run(*xs)).backward()
        grads.append([x.grad.cpu().numpy() for x in xs])
    return grads


@pytest.mark.parametrize("name", list(REGIONS))
def test_float32_gradients_match_eager(name):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(1000).astype(np.float32), rng.uniform(0.2, 2, 1000).astype(np.float32)]
    eager, compiled = eager_and_compiled_gradients(REGIONS[name], arrays)
    for e, c in zip(eager, compiled):
        assert c.dtype == np.float32
        np.testing.assert_allclose(c, e, **F32_GRADIENTS)


def test_float32_gradients_match_eager_on_cuda():
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(40).astype(np.float32) for _ in range(2)]
    eager, compiled = eager_and_compiled_gradients(chain, arrays, device="cuda")
    for e, c in zip(eager, compiled):
        np.testing.assert_allclose(c, e, **F32_GRADIENTS)


def test_backward_source_is_one_loop_that_reads_the_output_when_its_slope_needs_only_that():
    compiled = tg.compile(lambda x, y: (x + y).tanh())
    x, y = tg.randn(5, requires_grad=True), tg.randn(5, requires_grad=True)
    out = compiled(x, y)
    kernel = compiled.kernels[0]
    source = kernel.backward_source
    assert "def fused_add_tanh_backward(saved_out0, grad_out0, grad_in0, grad_in1):" in source
    assert "in0" not in source.replace("grad_in0", "")  # tanh's slope 1 - t² needs t alone
    assert "g_v1 * (one - v1 * v1)" in source
    assert out.grad_fn.ctx._saved == ()  # so the forward kept no input
    out.sum().backward()
    t = np.tanh(x.detach().numpy() + y.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), 1 - t * t, **F32_GRADIENTS)


def test_backward_recomputes_values_in_registers_instead_of_keeping_them():
    compiled = tg.compile(chain)
    out = compiled(tg.randn(5, requires_grad=True), tg.randn(5, requires_grad=True))
    source = compiled.kernels[0].backward_source
    assert "saved_out0" not in source  # relu's slope reads its input, recomputed from x and y
    assert "v2 = tanh_f32(v1)" in source and len(out.grad_fn.ctx._saved) == 2


def test_only_the_gradients_asked_for_are_computed():
    compiled = tg.compile(chain)
    x, y = tg.randn(6, requires_grad=True), tg.randn(6)
    compiled(x, y).sum().backward()
    assert y.grad is None
    x2 = x.detach().requires_grad_()
    chain(x2, y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), **F32_GRADIENTS)


def test_backward_kernels_are_compiled_once_per_set_of_inputs_needing_gradients():
    compiled = tg.compile(lambda x, y: (x * y).exp() + y)
    x, y = tg.randn(4, requires_grad=True), tg.randn(4, requires_grad=True)
    compiled(x, y).sum().backward()
    before = tg.jit.cache_info()
    compiled(x, y).sum().backward(retain_graph=True)
    assert tg.jit.cache_info()["misses"] == before["misses"]


def test_retain_graph_runs_the_same_backward_twice():
    compiled = tg.compile(chain)
    x, y = tg.randn(6, requires_grad=True), tg.randn(6, requires_grad=True)
    out = compiled(x, y).sum()
    out.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    out.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-6)


def test_changing_a_kept_output_or_input_in_place_is_an_error():
    compiled = tg.compile(lambda x, y: (x + y).tanh())
    out = compiled(tg.randn(3, requires_grad=True), tg.randn(3, requires_grad=True))
    with tg.no_grad():
        out.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified in place"):
        out.sum().backward()
    compiled = tg.compile(chain)
    x, y = tg.randn(3, requires_grad=True), tg.randn(3)
    out = compiled(x, y)
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified in place"):
        out.sum().backward()


def test_values_used_outside_the_region_get_both_gradients():
    def f(x):
        a = x.exp() * 2.0  # read by the sum (not fusible) and inside the region
        return a.tanh() + a.sum(dim=1, keepdim=True)
    x = tg.randn(3, 4, dtype=tg.float64, requires_grad=True)
    compiled = tg.compile(f)
    assert tg.autograd.gradcheck(compiled, (x,))
    assert len(compiled.kernels) >= 1

"""GELU, SiLU, LeakyReLU, ELU, Softplus and erf/log1p/expm1: float64 gradchecks on every
device, values against the formulas (math's erf), the layers' arguments, reprs and in-place
rules, and the refusals. (PyTorch's own numbers: scripts/differential_nn_layers.py.)"""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import math

import numpy as np
import pytest

import teachgrad.nn.functional as F
from teachgrad import nn
from teachgrad.autograd import gradcheck

rng = np.random.default_rng(11)
# away from the kinks at 0 and from softplus's threshold (1 below), where finite
# differences straddle two formulas
AWAY = np.concatenate([-rng.uniform(0.2, 3.0, 6), rng.uniform(0.2, 0.8, 3), rng.uniform(1.2, 3, 3)])

FUNCTIONS = {
    "gelu": lambda x: F.gelu(x),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.3),
    "elu": lambda x: F.elu(x, alpha=0.7),
    "softplus": lambda x: F.softplus(x),
    "softplus_threshold": lambda x: F.softplus(x, beta=1.0, threshold=1.0),
    "softplus_beta": lambda x: F.softplus(x, beta=2.5, threshold=30.0),
    "erf": tg.erf,
    "log1p": lambda x: (x.abs() - 0.1).log1p(),
    "expm1": tg.expm1,
}



@pytest.mark.parametrize("name", FUNCTIONS)
def test_backward_matches_finite_differences_in_float64(name, device):
    values = AWAY[:4] if device == "cuda" else AWAY  # (the simulator is slow: few elements)
    x = tg.tensor(values, dtype=tg.float64, device=device, requires_grad=True)
    assert gradcheck(FUNCTIONS[name], (x,))


def _normal_cdf(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
def test_values_follow_the_definitions(dtype):
    xs = np.array([-40.0, -6.0, -1.5, -0.25, 0.0, 0.3, 2.0, 8.0, 50.0])
    x = tg.tensor(xs, dtype=dtype)
    tol = dict(rtol=1e-6, atol=1e-7) if dtype == tg.float32 else dict(rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(F.gelu(x).numpy(), [v * _normal_cdf(v) for v in xs], **tol)
    tanh_form = 0.5 * xs * (1 + np.tanh(math.sqrt(2 / math.pi) * (xs + 0.044715 * xs ** 3)))
    np.testing.assert_allclose(F.gelu(x, approximate="tanh").numpy(), tanh_form, **tol)
    np.testing.assert_allclose(F.silu(x).numpy(), xs / (1 + np.exp(-xs)), **tol)
    np.testing.assert_allclose(F.elu(x, 0.5).numpy(), np.where(xs > 0, xs, 0.5 * np.expm1(xs)), **tol)
    np.testing.assert_allclose(F.leaky_relu(x, 0.1).numpy(), np.where(xs > 0, xs, 0.1 * xs), **tol)
    np.testing.assert_allclose(F.softplus(x, beta=2).numpy(),
                               np.where(2 * xs > 20, xs, np.log1p(np.exp(2 * xs)) / 2), **tol)
    np.testing.assert_allclose(tg.erf(x).numpy(), [math.erf(v) for v in xs], **tol)


def test_log1p_and_expm1_keep_the_digits_that_log_and_exp_lose():
    tiny = tg.tensor([1e-10, -3e-9], dtype=tg.float32)
    assert (tiny + 1).log().tolist() == [0.0, 0.0]  # 1 + 1e-10 rounds to 1 in float32
    np.testing.assert_allclose(tiny.log1p().numpy(), [1e-10, -3e-9], rtol=1e-6)
    np.testing.assert_allclose(tiny.expm1().numpy(), [1e-10, -3e-9], rtol=1e-6)


def test_gradients_at_the_kinks_are_pytorch_s():
    x = tg.tensor([0.0, 0.0, 0.0], requires_grad=True)
    F.leaky_relu(x, 0.2).sum().backward()
    assert x.grad.tolist() == pytest.approx([0.2] * 3)  # x > 0 is false at 0
    x.grad = None
    F.elu(x, alpha=1.5).sum().backward()
    assert x.grad.tolist() == pytest.approx([1.5] * 3)  # alpha * e^0


def test_softplus_far_past_the_threshold_neither_overflows_nor_warns():
    x = tg.tensor([1e4, 200.0, -1e4], requires_grad=True)
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # unused side: no overflow
        y = F.softplus(x)
        y.sum().backward()
    assert y.tolist() == [1e4, 200.0, 0.0] and x.grad.tolist() == [1.0, 1.0, 0.0]


def test_layers_hold_their_arguments_and_print_them_as_pytorch():
    assert repr(nn.GELU()) == "GELU(approximate='none')"
    assert repr(nn.GELU("tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.SiLU()) == "SiLU()" and repr(nn.SiLU(True)) == "SiLU(inplace=True)"
    assert repr(nn.LeakyReLU()) == "LeakyReLU(negative_slope=0.01)"
    assert repr(nn.LeakyReLU(0.2, True)) == "LeakyReLU(negative_slope=0.2, inplace=True)"
    assert repr(nn.ELU()) == "ELU(alpha=1.0)" and repr(nn.ELU(0.5, True)) == "ELU(alpha=0.5, inplace=True)"
    assert repr(nn.Softplus()) == "Softplus(beta=1.0, threshold=20.0)"
    for layer in (nn.GELU(), nn.SiLU(), nn.LeakyReLU(), nn.ELU(), nn.Softplus()):
        assert layer.state_dict() == {} and list(layer.parameters()) == []


def test_inplace_writes_over_a_tensor_outside_the_graph():
    x = tg.tensor([-2.0, 3.0])
    out = nn.LeakyReLU(0.5, inplace=True)(x)
    assert out is x and x.tolist() == [-1.0, 3.0]
    F.elu_(x)
    assert x.tolist() == pytest.approx([math.expm1(-1.0), 3.0])
    F.silu(x, inplace=True)
    assert x[1].item() == pytest.approx(3.0 / (1 + math.exp(-3.0)))


def test_inplace_on_a_leaf_that_requires_grad_is_refused_before_anything_changes():
    x = tg.tensor([-2.0, 3.0], requires_grad=True)
    for call in (lambda: F.leaky_relu_(x), lambda: F.elu(x, inplace=True), lambda: nn.SiLU(True)(x)):
        with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
            call()
    assert x.tolist() == [-2.0, 3.0]


@pytest.mark.parametrize("call, error, message", [
    (lambda x: F.gelu(x, approximate="exact"), RuntimeError, "either none or tanh"),
    (lambda x: nn.GELU("erf"), RuntimeError, "either none or tanh"),
    (lambda x: F.gelu(tg.tensor([1, 2])), NotImplementedError, '"gelu" not implemented for teachgrad.int64'),
    (lambda x: F.softplus(tg.tensor([True])), NotImplementedError, "input.float()"),
    (lambda x: F.elu([1.0]), TypeError, "must be Tensor, not list"),
    (lambda x: F.leaky_relu(x, "0.1"), TypeError, "'negative_slope' must be a number"),
    (lambda x: nn.ELU(alpha=None), TypeError, "'alpha' must be a number"),
    (lambda x: F.softplus(x, threshold=True), TypeError, "'threshold' must be a number"),
])
def test_bad_arguments_are_refused_with_the_fix(call, error, message):
    with pytest.raises(error, match=message):
        call(tg.tensor([1.0, -1.0]))


@pytest.mark.parametrize("dtype, tol", [(tg.float32, 2e-6), (tg.float64, 1e-13)])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_one_pass_gelu_loops_give_the_composed_formula_s_numbers(dtype, tol, approximate):
    # large arrays take the CPU backends' compiled loops (backends/activation_loops.py);
    # pieces of 1000 elements take the primitives: values and gradients must agree, with
    # the pieces in float64 (float32's composed tanh GELU loses up to 3e-6 in its gradient
    # to 1 - tanh^2 near tanh = ±1, which the loop computes from exp(-2|u|) without loss)
    values = np.concatenate([rng.standard_normal(40_000) * 3, [0.0, -0.0, 6.0, -6.0, 1e4, -1e4]])
    weights = rng.standard_normal(values.size)
    whole = tg.tensor(values, dtype=dtype, requires_grad=True)
    fused = F.gelu(whole, approximate=approximate)
    (fused * tg.tensor(weights, dtype=dtype)).sum().backward()
    for start in range(0, values.size, 1000):
        piece = tg.tensor(values[start:start + 1000], dtype=tg.float64, requires_grad=True)
        y = F.gelu(piece, approximate=approximate)
        (y * tg.tensor(weights[start:start + 1000], dtype=tg.float64)).sum().backward()
        np.testing.assert_allclose(y.detach().numpy(), fused[start:start + 1000].detach().numpy(),
                                   rtol=tol, atol=tol)
        np.testing.assert_allclose(piece.grad.numpy(), whole.grad[start:start + 1000].numpy(),
                                   rtol=tol, atol=tol)


EDGES = [np.inf, -np.inf, np.nan, -0.0, 0.0, 5.6, -5.6, 9.0, -9.0, 13.5, -13.5, 40.0, -40.0,
         1e4, -1e4]  # (|x| > 13.2: exp(-x^2 / 2) underflows to 0 in float32, 38.6 in float64)


def _gelu_and_slope(v: float, approximate: str) -> tuple[float, float]:
    """GELU and its derivative at ``v``, in float64 by the formulas (math's erf and tanh)."""
    if approximate == "tanh":
        scale, cubic = math.sqrt(2 / math.pi), 0.044715
        t = math.tanh(scale * (v + cubic * v ** 3))
        slope = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * scale * (1 + 3 * cubic * v * v)
        return 0.5 * v * (1 + t), slope
    cdf = 0.5 * (1 + math.erf(v / math.sqrt(2)))
    return v * cdf, cdf + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi)


@pytest.mark.parametrize("dtype, tol", [(tg.float32, 2e-6), (tg.float64, 1e-13)])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_one_pass_gelu_loops_at_infinities_nan_zeros_and_underflow(dtype, tol, approximate, monkeypatch):
    # each way through the loops (padded to a size that takes them), against float64's
    # formulas: inf -> inf, -inf -> NaN (-inf * 0), NaN -> NaN; the gradient NaN at both
    # infinities (inf * 0) and GELU's own limits (0 and 1) where the density is 0
    from teachgrad.backends import activation_loops

    names = []
    real = activation_loops.run
    monkeypatch.setattr(activation_loops, "run", lambda name, x, grad: names.append(name) or real(name, x, grad))
    values = np.concatenate([EDGES, np.zeros(1 << 15)])
    x = tg.tensor(values, dtype=dtype, requires_grad=True)
    y = F.gelu(x, approximate=approximate)
    y.backward(tg.ones_like(y))
    assert names == ["gelu" if approximate == "none" else "gelu_tanh"] * 2
    with np.errstate(invalid="ignore"):
        expected = np.array([_gelu_and_slope(v, approximate) for v in EDGES])
    got_values, got_slopes = y.detach().numpy()[:len(EDGES)], x.grad.numpy()[:len(EDGES)]
    np.testing.assert_allclose(got_values, expected[:, 0], rtol=tol, atol=tol)
    np.testing.assert_allclose(got_slopes, expected[:, 1], rtol=tol, atol=tol)
    assert np.signbit(got_values[3]) and not np.signbit(got_values[4])  # -0.0 stays -0.0


def test_only_large_contiguous_arrays_take_the_one_pass_loops():
    backend = tg.tensor([1.0])._backend
    small, large = np.ones(100, np.float32), np.ones(1 << 15, np.float32)
    assert backend.fused_activation("gelu", small) is None
    assert backend.fused_activation("gelu", large[::2]) is None  # strided
    assert backend.fused_activation("gelu", large) is not None


@pytest.mark.parametrize("dtype, tol", [(tg.float32, 1e-6), (tg.float64, 1e-14)])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_one_pass_softmax_over_the_last_dim_gives_the_composed_numbers(name, dtype, tol):
    # (the same loops file: softmax and log_softmax over the last dimension of a large
    # array take it)
    values = rng.standard_normal((400, 50)) * 4
    values[3, :10] = -np.inf  # a causal mask's entries
    weights = rng.standard_normal(values.shape)
    whole = tg.tensor(values, dtype=dtype, requires_grad=True)
    out = getattr(whole, name)(-1)
    (out * tg.tensor(weights, dtype=dtype)).sum().backward()
    for start in range(0, 400, 20):  # 20 rows: below the one-pass size, so composed
        piece = tg.tensor(values[start:start + 20], dtype=dtype, requires_grad=True)
        y = getattr(piece, name)(-1)
        (y * tg.tensor(weights[start:start + 20], dtype=dtype)).sum().backward()
        np.testing.assert_allclose(out[start:start + 20].detach().numpy(), y.detach().numpy(),
                                   rtol=tol, atol=tol)
        np.testing.assert_allclose(whole.grad[start:start + 20].numpy(), piece.grad.numpy(),
                                   rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_one_pass_softmax_loops_run_for_large_rows_and_keep_nan_rows(name, monkeypatch):
    # the loops ran (not the composed path), and a row that is all -inf (every position
    # masked) or holds a NaN comes out NaN, as from the composed formula and PyTorch
    from teachgrad.backends import activation_loops

    calls = []
    real = getattr(activation_loops, name)
    monkeypatch.setattr(activation_loops, name, lambda x, grad: calls.append(grad is None) or real(x, grad))
    values = rng.standard_normal((300, 64)).astype(np.float32)
    values[5] = -np.inf
    values[7, 3] = np.nan
    x = tg.tensor(values, requires_grad=True)
    y = getattr(F, name)(x, dim=-1)
    y.backward(tg.ones_like(y))
    assert calls == [True, False]  # forward, then backward
    out = y.detach().numpy()
    assert np.isnan(out[5]).all() and np.isnan(out[7]).all()
    assert np.isfinite(np.delete(out, [5, 7], axis=0)).all()

"""Hardtanh, ReLU6, SELU, Mish, Hardswish, Hardsigmoid, BCELoss, BCEWithLogitsLoss and
Conv1d: float64 gradchecks on every device, values against the formulas, the layers'
arguments, buffers and in-place rules, numerical stability, and refusals before any work.
(PyTorch's own numbers, errors and reprs: test_coverage_torch.py.)"""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import math

import numpy as np
import pytest

import teachgrad.nn.functional as F
from teachgrad import nn
from teachgrad.autograd import gradcheck

rng = np.random.default_rng(23)
# away from every kink (±1, ±3, 0, 6), where finite differences straddle two pieces
AWAY = np.array([-4.1, -2.5, -1.7, -0.6, -0.2, 0.4, 0.8, 1.6, 2.7, 4.2, 6.5, 21.5])

ACTIVATIONS = {
    "hardtanh": lambda x: F.hardtanh(x),
    "hardtanh_bounds": lambda x: F.hardtanh(x, -2.0, 5.0),
    "relu6": F.relu6,
    "selu": F.selu,
    "mish": F.mish,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "logsigmoid": F.logsigmoid,
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activations_backward_matches_finite_differences_in_float64(name, device):
    values = AWAY[::3] if device == "cuda" else AWAY  # (the simulator is slow: few elements)
    x = tg.tensor(values, dtype=tg.float64, device=device, requires_grad=True)
    assert gradcheck(ACTIVATIONS[name], (x,))


def _probabilities_and_targets(device, shape=(2, 3)):
    p = tg.tensor(rng.uniform(0.1, 0.9, shape), dtype=tg.float64, device=device, requires_grad=True)
    y = tg.tensor(rng.uniform(0, 1, shape), dtype=tg.float64, device=device, requires_grad=True)
    return p, y


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_gradients_in_float64(reduction, device):
    p, y = _probabilities_and_targets(device)
    w = tg.tensor(rng.uniform(0.5, 2, (3,)), dtype=tg.float64, device=device)
    assert gradcheck(lambda p, y: F.binary_cross_entropy(p, y, w, reduction=reduction), (p, y))
    logits = tg.tensor(rng.standard_normal((2, 3)) * 3, dtype=tg.float64, device=device,
                       requires_grad=True)
    pos = tg.tensor([0.5, 1.0, 3.0], dtype=tg.float64, device=device)
    assert gradcheck(lambda x, y: F.binary_cross_entropy_with_logits(
        x, y, w, reduction=reduction, pos_weight=pos), (logits, y))


@pytest.mark.parametrize("options", [
    {}, {"stride": 2, "padding": 1}, {"padding": "same", "dilation": 2}, {"groups": 2},
])
def test_conv1d_gradients_in_float64(options, device):
    length = 5 if device == "cuda" else 7
    x = tg.tensor(rng.standard_normal((1, 4, length)), dtype=tg.float64, device=device,
                  requires_grad=True)
    w = tg.tensor(rng.standard_normal((2, 4 // options.get("groups", 1), 3)), dtype=tg.float64,
                  device=device, requires_grad=True)
    b = tg.tensor(rng.standard_normal(2), dtype=tg.float64, device=device, requires_grad=True)
    assert gradcheck(lambda x, w, b: F.conv1d(x, w, b, **options), (x, w, b))


def test_activation_values_follow_the_definitions():
    xs = np.array([-40.0, -6.0, -3.0, -1.5, -0.25, 0.0, 0.3, 2.0, 3.0, 6.0, 8.0, 50.0])
    x = tg.tensor(xs, dtype=tg.float64)
    softplus = np.log1p(np.exp(xs))
    np.testing.assert_allclose(F.mish(x).numpy(), xs * np.tanh(softplus), rtol=1e-14)
    np.testing.assert_array_equal(F.hardtanh(x, -2.0, 5.0).numpy(), np.clip(xs, -2, 5))
    np.testing.assert_array_equal(F.relu6(x).numpy(), np.clip(xs, 0, 6))
    np.testing.assert_allclose(F.hardsigmoid(x).numpy(), np.clip(xs + 3, 0, 6) / 6, rtol=1e-15)
    np.testing.assert_allclose(F.hardswish(x).numpy(), xs * np.clip(xs + 3, 0, 6) / 6, rtol=1e-15)
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    np.testing.assert_allclose(F.selu(x).numpy(), scale * np.where(xs > 0, xs, alpha * np.expm1(xs)),
                               rtol=1e-15)
    np.testing.assert_allclose(F.logsigmoid(x).numpy(), -np.logaddexp(0, -xs), rtol=1e-15)


def test_mish_far_out_neither_overflows_nor_warns():
    x = tg.tensor([1e4, 800.0, -1e4, -800.0], requires_grad=True)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y = F.mish(x)
        y.sum().backward()
    assert y.tolist() == [1e4, 800.0, -0.0, -0.0] and x.grad.tolist() == [1.0, 1.0, 0.0, 0.0]


def test_hardtanh_keeps_integer_tensors_integer():
    out = F.hardtanh(tg.tensor([-5, 1, 2, 7]))
    assert out.dtype == tg.int64 and out.tolist() == [-1, 1, 1, 1]
    assert F.relu6(tg.tensor([-5, 1, 2, 7])).tolist() == [0, 1, 2, 6]


@pytest.mark.parametrize("name", ["selu", "mish", "hardswish", "hardsigmoid", "logsigmoid"])
def test_the_smooth_and_hard_ones_refuse_integer_tensors(name):
    with pytest.raises(NotImplementedError, match=f'"{name}" not implemented for teachgrad.int64'):
        getattr(F, name)(tg.tensor([1, 2]))


def test_binary_cross_entropy_clamps_the_log_at_minus_100():
    p = tg.tensor([0.0, 1.0, 0.0, 1.0])
    y = tg.tensor([1.0, 0.0, 0.0, 1.0])
    assert F.binary_cross_entropy(p, y, reduction="none").tolist() == [100.0, 100.0, 0.0, 0.0]


def test_with_logits_stays_finite_where_the_sigmoid_rounds_to_0_or_1():
    logits = tg.tensor([100.0, -120.0, 30.0], requires_grad=True)  # float32: sigmoid is 1, 0, 1
    target = tg.tensor([0.0, 1.0, 1.0])
    loss = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), [100.0, 120.0, math.exp(-30.0)], rtol=1e-6)
    loss.sum().backward()
    np.testing.assert_allclose(logits.grad.numpy(), [1.0, -1.0, -math.exp(-30.0)], rtol=1e-6)
    naive = F.binary_cross_entropy(logits.detach().sigmoid(), target, reduction="none")
    assert naive.tolist() == [100.0, 100.0, 0.0]  # the probabilities' form: clamped, or lost


def test_pos_weight_scales_the_positive_term_per_class():
    logits, target = tg.tensor([[0.3, -1.2]]), tg.tensor([[1.0, 1.0]])
    plain = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    weighted = F.binary_cross_entropy_with_logits(logits, target, reduction="none",
                                                  pos_weight=tg.tensor([2.0, 0.5]))
    np.testing.assert_allclose(weighted.numpy(), plain.numpy() * [[2.0, 0.5]], rtol=1e-6)


def test_loss_modules_hold_weights_as_buffers_and_match_the_functions():
    weight, pos = tg.tensor([1.0, 2.0, 0.5]), tg.tensor([3.0, 1.0, 1.0])
    bce, logits_loss = nn.BCELoss(weight, "sum"), nn.BCEWithLogitsLoss(weight, pos_weight=pos)
    assert set(bce.state_dict()) == {"weight"} and set(logits_loss.state_dict()) == {"weight", "pos_weight"}
    assert list(bce.parameters()) == [] and repr(bce) == "BCELoss()"
    x, y = tg.tensor([[0.2, -0.7, 1.5]]), tg.tensor([[1.0, 0.0, 1.0]])
    assert bce(x.sigmoid(), y).item() == F.binary_cross_entropy(x.sigmoid(), y, weight, "sum").item()
    assert logits_loss(x, y).item() == F.binary_cross_entropy_with_logits(x, y, weight,
                                                                          pos_weight=pos).item()


def test_activation_layers_hold_their_arguments():
    layer = nn.Hardtanh(-2.0, 3.0)
    assert (layer.min_val, layer.max_val, layer.inplace) == (-2.0, 3.0, False)
    assert (nn.ReLU6().min_val, nn.ReLU6().max_val) == (0.0, 6.0)
    x = tg.tensor([-4.0, -1.0, 0.5, 7.0])
    for layer, function in [(nn.Hardtanh(-2.0, 3.0), lambda x: F.hardtanh(x, -2.0, 3.0)),
                            (nn.ReLU6(), F.relu6), (nn.SELU(), F.selu), (nn.Mish(), F.mish),
                            (nn.Hardswish(), F.hardswish), (nn.Hardsigmoid(), F.hardsigmoid)]:
        assert layer(x).tolist() == function(x).tolist()
        assert layer.state_dict() == {} and list(layer.parameters()) == []


@pytest.mark.parametrize("make", [
    lambda: nn.Hardtanh(inplace=True), lambda: nn.ReLU6(True), lambda: nn.SELU(True),
    lambda: nn.Mish(True), lambda: nn.Hardswish(True), lambda: nn.Hardsigmoid(True),
])
def test_inplace_layers_write_over_a_tensor_outside_the_graph(make):
    x = tg.tensor([-4.0, -0.5, 0.5, 7.0])
    expected = make().__class__()(x.clone()).tolist()
    assert make()(x) is x and x.tolist() == expected


def test_inplace_functions_refuse_a_leaf_that_requires_grad_before_anything_changes():
    x = tg.tensor([-2.0, 3.0], requires_grad=True)
    for call in (lambda: F.hardtanh_(x), lambda: F.selu_(x), lambda: F.relu6(x, inplace=True),
                 lambda: nn.Mish(True)(x)):
        with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
            call()
    assert x.tolist() == [-2.0, 3.0]


def test_inplace_inside_the_graph_gives_pytorch_s_gradient():
    x = tg.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    F.hardswish(x * 1.0, inplace=True).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [-1 / 3 + 0.5, 0.5 / 3 + 0.5, 2 / 3 + 0.5], rtol=1e-6)


def test_conv1d_is_conv2d_one_pixel_high():
    x, w, b = tg.randn(2, 4, 11), tg.randn(6, 2, 3), tg.randn(6)
    one_d = F.conv1d(x, w, b, stride=2, padding=2, dilation=2, groups=2)
    two_d = F.conv2d(x.unsqueeze(2), w.unsqueeze(2), b, (1, 2), (0, 2), (1, 2), 2).squeeze(2)
    np.testing.assert_array_equal(one_d.numpy(), two_d.numpy())
    assert F.conv1d(x[0], w, b, groups=2).shape == (6, 9)  # unbatched


def test_conv1d_layer_is_initialised_and_shaped_as_pytorch_s():
    tg.manual_seed(0)
    layer = nn.Conv1d(4, 6, 3, groups=2, padding="same")
    assert tuple(layer.weight.shape) == (6, 2, 3) and tuple(layer.bias.shape) == (6,)
    bound = 1 / math.sqrt(2 * 3)  # fan_in = in_channels / groups * kernel_size
    assert layer.weight.abs().max().item() <= bound and layer.bias.abs().max().item() <= bound
    assert set(layer.state_dict()) == {"weight", "bias"}
    assert tuple(layer(tg.randn(5, 4, 10)).shape) == (5, 6, 10)
    assert nn.Conv1d(4, 6, (3,), bias=False).bias is None


@pytest.mark.parametrize("call, error, message", [
    (lambda: nn.Conv1d(4, 6, (3, 3)), TypeError, "kernel_size must be an int or a tuple of one int"),
    (lambda: nn.Conv1d(4, 6, 3, stride=0), ValueError, "stride must be positive"),
    (lambda: nn.Conv1d(4, 6, 3, padding_mode="reflect"), NotImplementedError, "padding_mode='zeros'"),
    (lambda: F.conv1d(tg.zeros(1, 4, 5), tg.zeros(2, 4, 3), padding=-1), ValueError,
     "padding must be non-negative"),
    (lambda: F.conv1d(tg.zeros(1, 4, 5), tg.zeros(2, 4, 3, dtype=tg.float64)), RuntimeError,
     "should be the same"),
    (lambda: F.binary_cross_entropy(tg.tensor([0.5]), tg.tensor([1])), RuntimeError,
     "Found dtype teachgrad.int64 but expected teachgrad.float32"),
    (lambda: F.binary_cross_entropy(tg.tensor([1, 0]), tg.tensor([1, 0])), NotImplementedError,
     '"binary_cross_entropy" not implemented for teachgrad.int64'),
    (lambda: F.binary_cross_entropy(tg.tensor([0.5, 0.1]), tg.tensor([1.0, 0.0]),
                                    weight=tg.ones(3)), RuntimeError, "does not broadcast"),
    (lambda: F.binary_cross_entropy_with_logits(tg.zeros(2, 2), tg.zeros(2, 2),
                                                pos_weight=tg.ones(3)), RuntimeError, "does not broadcast"),
    (lambda: F.binary_cross_entropy(tg.tensor([0.5]), tg.tensor([1.0]), reduction="avg"),
     ValueError, "reduction must be"),
    (lambda: F.binary_cross_entropy(tg.tensor([0.5]), tg.tensor([1.0]), size_average=True),
     TypeError, "deprecated"),
    (lambda: F.binary_cross_entropy(tg.tensor([float("nan")]), tg.tensor([1.0])), RuntimeError,
     "between 0 and 1"),
    (lambda: nn.BCELoss(reduction="avg"), ValueError, "reduction must be"),
    (lambda: F.hardtanh(tg.zeros(2), "0", 1.0), TypeError, "'min_val' must be a number"),
])
def test_bad_arguments_are_refused_with_the_fix(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_refused_loss_leaves_no_graph_behind():
    p = tg.tensor([0.5, 1.5], requires_grad=True)
    with pytest.raises(RuntimeError):
        F.binary_cross_entropy(p, tg.tensor([1.0, 0.0]))
    assert p.grad is None and p.grad_fn is None


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
def test_singular_value_norms_gradients_in_float64(ord, device):
    shape = (2, 3) if device == "cuda" else (2, 3, 4)
    A = tg.tensor(rng.standard_normal(shape), dtype=tg.float64, device=device, requires_grad=True)
    assert gradcheck(lambda A: tg.linalg.matrix_norm(A, ord), (A,))
    assert gradcheck(lambda A: tg.linalg.matrix_norm(A, ord, dim=(-1, 0), keepdim=True), (A,))


def test_singular_value_norms_follow_numpy():
    A = rng.standard_normal((3, 5, 4))
    for ord in ("nuc", 2, -2):
        np.testing.assert_allclose(tg.linalg.matrix_norm(tg.tensor(A), ord).numpy(),
                                   np.linalg.norm(A, ord, axis=(1, 2)), rtol=1e-12)
    assert tg.linalg.matrix_norm(tg.zeros(0, 3), 2).item() == 0.0  # no singular values
    assert tg.tensor(A[0]).norm(p="nuc").item() == pytest.approx(np.linalg.norm(A[0], "nuc"))
    assert tg.linalg.norm(tg.tensor(A[0]), -2).item() == pytest.approx(np.linalg.norm(A[0], -2))
    np.testing.assert_allclose(tg.linalg.svdvals(tg.tensor(A)).numpy(),
                               np.linalg.svd(A, compute_uv=False), rtol=1e-12)


def test_svdvals_gradient_in_float64_and_its_refusals():
    A = tg.tensor(rng.standard_normal((2, 4, 3)), dtype=tg.float64, requires_grad=True)
    assert gradcheck(tg.linalg.svdvals, (A,))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        tg.linalg.svdvals(tg.ones(3))
    with pytest.raises(RuntimeError, match="Low precision dtypes not supported"):
        tg.linalg.svdvals(tg.ones(2, 2, dtype=tg.bfloat16))
    with pytest.raises(TypeError, match="must be Tensor, not list"):
        tg.linalg.svdvals([[1.0]])


def test_a_saved_graph_may_use_the_new_functions(tmp_path):
    tg.manual_seed(1)
    model = nn.Sequential(nn.Conv1d(3, 4, 3), nn.Hardswish(), nn.Flatten(), nn.Linear(24, 4),
                          nn.Mish(), nn.Hardsigmoid(), nn.SELU(), nn.ReLU6(), nn.Hardtanh())

    def step(x, target):
        out = model(x)
        return (F.binary_cross_entropy(out.sigmoid(), target)
                + F.binary_cross_entropy_with_logits(out, target)
                + tg.linalg.matrix_norm(out, "nuc"))

    x, target = tg.randn(2, 3, 8), tg.rand(2, 4)
    tg.jit.save(tg.jit.trace(step, (x, target)), tmp_path / "step.tgjit")
    loaded = tg.jit.load(tmp_path / "step.tgjit")
    x2 = tg.randn(2, 3, 8)
    assert loaded(x2, target).item() == pytest.approx(step(x2, target).item(), rel=1e-6)


@pytest.mark.parametrize("name", ACTIVATIONS)
@pytest.mark.parametrize("dtype", [tg.float16, tg.bfloat16])
def test_low_precision_activations_compute_in_float32_and_round_once(name, dtype):
    grid = tg.tensor(np.linspace(-7, 7, 3001)).to(dtype)
    once = ACTIVATIONS[name](grid.float()).to(dtype)
    assert ACTIVATIONS[name](grid).dtype == dtype
    np.testing.assert_array_equal(ACTIVATIONS[name](grid).float().numpy(), once.float().numpy())


def test_binary_cross_entropy_is_refused_under_cuda_autocast_as_in_pytorch():
    p, y = tg.tensor([0.25, 0.75]), tg.tensor([0.0, 1.0])
    with tg.autocast("cuda"), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(p.to("cuda"), y.to("cuda"))
    with tg.autocast("cuda"):  # the logits form is safe: computed in float32
        loss = F.binary_cross_entropy_with_logits(p.to("cuda"), y.to("cuda"))
    assert loss.dtype == tg.float32
    with tg.autocast("cpu", dtype=tg.bfloat16):  # on the CPU: float32, as PyTorch's CPU list
        assert F.binary_cross_entropy(p.bfloat16(), y.bfloat16()).dtype == tg.float32

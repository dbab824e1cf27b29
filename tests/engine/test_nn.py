"""teachgrad.nn: Module bookkeeping, layers, printing, saving/loading, and training."""
from __future__ import annotations

import copy
import math
from collections import OrderedDict

import numpy as np
import pytest

import teachgrad as tg
from teachgrad import nn
from teachgrad.nn import functional as F


def numerical_grad(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar function ``f`` at ``x`` (float64)."""
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        up = f(x)
        x[i] = old - eps
        down = f(x)
        x[i] = old
        grad[i] = (up - down) / (2 * eps)
    return grad


class TwoLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(tg.ones(1))
        self.body = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
        self.head = nn.Linear(3, 1, bias=False)
        self.not_a_parameter = tg.zeros(2, requires_grad=True)

    def forward(self, x):
        return self.head(self.body(x)) * self.scale


# -- Module bookkeeping ---------------------------------------------------------
def test_named_parameters_use_dotted_names_in_registration_order():
    names = [name for name, _ in TwoLayer().named_parameters()]
    assert names == ["scale", "body.0.weight", "body.0.bias", "head.weight"]


def test_plain_tensor_attributes_are_not_parameters():
    model = TwoLayer()
    assert all(p is not model.not_a_parameter for p in model.parameters())
    assert len(list(model.parameters(recurse=False))) == 1


def test_children_and_modules():
    model = TwoLayer()
    assert [name for name, _ in model.named_children()] == ["body", "head"]
    assert list(model.children()) == [model.body, model.head]
    assert [name for name, _ in model.named_modules()] == ["", "body", "body.0", "body.1", "head"]
    assert len(list(model.modules())) == 5


def test_shared_parameter_is_listed_once():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model[1].weight = model[0].weight
    assert len(list(model.parameters())) == 3
    assert list(model.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_parameter_count_of_mlp():
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    assert sum(p.numel() for p in model.parameters()) == 784 * 256 + 256 + 256 * 10 + 10


def test_assigning_before_init_names_the_fix():
    class Forgetful(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(1, 1)

    with pytest.raises(AttributeError, match=r"cannot assign module before Module.__init__\(\) call\. "
                       r"Fix: call super\(\).__init__\(\) first in Forgetful.__init__"):
        Forgetful()


def test_parameter_slot_accepts_only_parameters_or_none():
    layer = nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"cannot assign Tensor as parameter 'bias' \(teachgrad.nn.Parameter or None expected\)"):
        layer.bias = tg.zeros(2)
    layer.bias = None
    assert [name for name, _ in layer.named_parameters()] == ["weight"]
    del layer.weight
    assert list(layer.parameters()) == []
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'missing'"):
        _ = layer.missing


def test_train_eval_reach_every_descendant():
    model = TwoLayer()
    assert model.eval() is model
    assert not any(m.training for m in model.modules())
    model.train()
    assert all(m.training for m in model.modules())


def test_zero_grad_to_none_or_zeros():
    model = TwoLayer()
    model(tg.ones(4, 2)).sum().backward()
    model.zero_grad(set_to_none=False)
    assert all(np.array_equal(p.grad.numpy(), np.zeros(p.shape)) for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_to_dtype_keeps_parameter_identity():
    model = TwoLayer()
    before = list(model.parameters())
    assert model.to(tg.float64) is model
    after = list(model.parameters())
    assert all(a is b for a, b in zip(before, after))
    assert all(p.dtype == tg.float64 and isinstance(p, nn.Parameter) for p in after)
    assert model(tg.ones(1, 2, dtype=tg.float64)).dtype == tg.float64


def test_missing_forward_is_named():
    with pytest.raises(NotImplementedError, match='Module \\[Module\\] is missing the required "forward" function'):
        nn.Module()(1)


# -- Parameter --------------------------------------------------------------------
def test_parameter_is_a_leaf_tensor_that_requires_grad():
    data = tg.tensor([1.0, 2.0])
    p = nn.Parameter(data)
    assert isinstance(p, tg.Tensor) and p.requires_grad and p.is_leaf
    assert not nn.Parameter(data, requires_grad=False).requires_grad
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert type(p * 2) is tg.Tensor
    with tg.no_grad():
        p.fill_(5.0)
    assert data.tolist() == [5.0, 5.0]  # shares storage with data, as in PyTorch


def test_deepcopy_makes_independent_parameters():
    model = nn.Linear(2, 2)
    clone = copy.deepcopy(model)
    with tg.no_grad():
        clone.weight.fill_(0.0)
    assert not np.allclose(model.weight.detach().numpy(), 0.0)
    assert isinstance(clone.weight, nn.Parameter)


# -- printing ---------------------------------------------------------------------------
def test_repr_matches_pytorch_format():
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU())
    assert repr(model) == (
        "Sequential(\n  (0): Linear(in_features=784, out_features=256, bias=True)\n  (1): ReLU()\n)"
    )


def test_repr_nested_and_extra():
    model = nn.Sequential(nn.Flatten(), nn.Sequential(nn.Tanh(), nn.Dropout(0.2)), nn.Sigmoid(),
                          nn.Linear(4, 2, bias=False))
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Flatten(start_dim=1, end_dim=-1)\n"
        "  (1): Sequential(\n"
        "    (0): Tanh()\n"
        "    (1): Dropout(p=0.2, inplace=False)\n"
        "  )\n"
        "  (2): Sigmoid()\n"
        "  (3): Linear(in_features=4, out_features=2, bias=False)\n"
        ")"
    )
    assert repr(TwoLayer()).startswith("TwoLayer(\n  (body): Sequential(\n")
    assert repr(nn.CrossEntropyLoss(reduction="sum")) == "CrossEntropyLoss()"


# -- Sequential -----------------------------------------------------------------------
def test_sequential_indexing_len_iteration_append():
    first, second = nn.Linear(2, 3), nn.Tanh()
    model = nn.Sequential(first, second)
    assert len(model) == 2 and model[0] is first and model[-1] is second
    assert list(model) == [first, second]
    tail = model[1:]
    assert isinstance(tail, nn.Sequential) and list(tail._modules) == ["1"]
    model.append(nn.Linear(3, 1))
    assert model(tg.ones(5, 2)).shape == (5, 1)
    with pytest.raises(IndexError, match="index 3 is out of range for a Sequential of length 3"):
        model[3]
    named = nn.Sequential(OrderedDict([("hidden", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert [name for name, _ in named.named_parameters()] == ["hidden.weight", "hidden.bias"]


# -- state_dict --------------------------------------------------------------------------
def test_state_dict_round_trip():
    tg.manual_seed(0)
    source, target = TwoLayer(), TwoLayer()
    state = source.state_dict()
    assert list(state) == ["scale", "body.0.weight", "body.0.bias", "head.weight"]
    assert all(not t.requires_grad for t in state.values())
    assert repr(target.load_state_dict(state)) == "<All keys matched successfully>"
    x = tg.randn(6, 2)
    np.testing.assert_array_equal(source(x).detach().numpy(), target(x).detach().numpy())
    # loading copies values: the two models stay independent
    with tg.no_grad():
        source.scale.fill_(3.0)
    assert target.scale.item() == 1.0


def test_load_state_dict_reports_every_problem_and_loads_nothing():
    layer = nn.Linear(2, 3)
    before = layer.weight.detach().numpy().copy()
    bad = {"weight": tg.zeros(2, 2), "extra": tg.zeros(1)}
    with pytest.raises(RuntimeError) as info:
        layer.load_state_dict(bad)
    assert str(info.value) == (
        "Error(s) in loading state_dict for Linear (nothing was loaded):\n"
        '\tMissing key(s) in state_dict: "bias". \n'
        '\tUnexpected key(s) in state_dict: "extra". \n'
        "\tsize mismatch for weight: copying a param with shape (2, 2) from checkpoint, "
        "the shape in current model is (3, 2)."
    )
    np.testing.assert_array_equal(layer.weight.detach().numpy(), before)


def test_load_state_dict_non_strict_returns_the_mismatched_keys():
    layer = nn.Linear(2, 3)
    result = layer.load_state_dict({"weight": tg.ones(3, 2), "extra": tg.zeros(1)}, strict=False)
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["extra"]
    np.testing.assert_array_equal(layer.weight.detach().numpy(), np.ones((3, 2)))


# -- Linear and init ----------------------------------------------------------------------
def test_linear_shapes_init_range_and_forward_vs_numpy():
    tg.manual_seed(1)
    layer = nn.Linear(400, 300)
    assert layer.weight.shape == (300, 400) and layer.bias.shape == (300,)
    bound = 1 / math.sqrt(400)
    w = layer.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(layer.bias.detach().numpy()).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound  # uniform on [-b, b]
    x = np.random.default_rng(0).normal(size=(7, 400)).astype(np.float32)
    expected = x @ w.T + layer.bias.detach().numpy()
    np.testing.assert_allclose(layer(tg.tensor(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-5)


def test_linear_dtype_keyword_and_shape_error():
    layer = nn.Linear(3, 2, dtype=tg.float64)
    assert layer.weight.dtype == tg.float64 and layer.bias.dtype == tg.float64
    with pytest.raises(RuntimeError, match=r"linear: input of shape \(4, 5\) has 5 features in its last "
                       r"dimension, but the weight of shape \(2, 3\) expects 3"):
        layer(tg.ones(4, 5, dtype=tg.float64))


def test_init_functions():
    assert nn.init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert nn.init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    w = nn.init.xavier_uniform_(tg.empty(200, 300))
    assert np.abs(w.numpy()).max() <= math.sqrt(6 / 500)
    assert nn.init.zeros_(tg.ones(3)).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="unsupported nonlinearity 'gelu'"):
        nn.init.calculate_gain("gelu")


# -- activations, Flatten, Dropout ------------------------------------------------------------
def test_activations_and_softmax_vs_numpy():
    x = np.random.default_rng(2).normal(size=(3, 4))
    t = tg.tensor(x)
    np.testing.assert_allclose(nn.ReLU()(t).numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(nn.Tanh()(t).numpy(), np.tanh(x))
    np.testing.assert_allclose(nn.Sigmoid()(t).numpy(), 1 / (1 + np.exp(-x)))
    softmax = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(F.softmax(t, dim=1).numpy(), softmax)
    np.testing.assert_allclose(nn.LogSoftmax(dim=1)(t).numpy(), np.log(softmax))


@pytest.mark.parametrize("start, end, shape", [
    (1, -1, (2, 60)), (0, -1, (120,)), (1, 2, (2, 12, 5)), (2, -1, (2, 3, 20)), (-3, -2, (2, 12, 5)),
])
def test_flatten_dims(start, end, shape):
    assert nn.Flatten(start, end)(tg.zeros(2, 3, 4, 5)).shape == shape


def test_dropout_eval_is_identity_and_train_scales_survivors():
    tg.manual_seed(3)
    x = tg.ones(100, 100, requires_grad=True)
    layer = nn.Dropout(p=0.3)
    out = layer(x)
    values = out.detach().numpy()
    kept = values != 0
    assert abs(1 - kept.mean() - 0.3) < 0.02
    np.testing.assert_allclose(values[kept], 1 / 0.7, rtol=1e-6)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.7, rtol=1e-6)  # gradient flows through kept only
    layer.eval()
    np.testing.assert_array_equal(layer(x).detach().numpy(), x.detach().numpy())
    assert F.dropout(x, p=1.0).detach().numpy().max() == 0.0
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)


# -- losses --------------------------------------------------------------------------------------
RNG = np.random.default_rng(4)
PRED, TARGET = RNG.normal(size=(5, 3)), RNG.normal(size=(5, 3))
LOGITS, CLASSES = RNG.normal(size=(6, 4)), np.array([0, 3, 1, 1, 2, 3])


def _log_softmax(x: np.ndarray, axis: int = 1) -> np.ndarray:
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


REDUCE = {"mean": np.mean, "sum": np.sum, "none": lambda a: a}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses_vs_numpy(reduction):
    pred, target = tg.tensor(PRED), tg.tensor(TARGET)
    mse = nn.MSELoss(reduction=reduction)(pred, target).numpy()
    l1 = nn.L1Loss(reduction=reduction)(pred, target).numpy()
    np.testing.assert_allclose(mse, REDUCE[reduction]((PRED - TARGET) ** 2))
    np.testing.assert_allclose(l1, REDUCE[reduction](np.abs(PRED - TARGET)))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_and_nll_vs_numpy(reduction):
    expected = REDUCE[reduction](-_log_softmax(LOGITS)[np.arange(6), CLASSES])
    logits, classes = tg.tensor(LOGITS), tg.tensor(CLASSES)
    np.testing.assert_allclose(nn.CrossEntropyLoss(reduction=reduction)(logits, classes).numpy(), expected)
    log_probs = F.log_softmax(logits, dim=1)
    np.testing.assert_allclose(nn.NLLLoss(reduction=reduction)(log_probs, classes).numpy(), expected)


def test_cross_entropy_with_extra_dims_and_single_sample():
    scores = RNG.normal(size=(2, 3, 4))  # (N, C, d1)
    labels = np.array([[0, 2, 1, 1], [2, 2, 0, 1]])
    picked = np.take_along_axis(_log_softmax(scores), labels[:, None, :], axis=1)[:, 0, :]
    out = F.cross_entropy(tg.tensor(scores), tg.tensor(labels), reduction="none")
    np.testing.assert_allclose(out.numpy(), -picked)
    single = F.cross_entropy(tg.tensor(LOGITS[0]), tg.tensor(CLASSES[0]))
    assert single.shape == () and single.item() == pytest.approx(-_log_softmax(LOGITS)[0, CLASSES[0]])


def test_cross_entropy_is_stable_for_huge_logits():
    loss = F.cross_entropy(tg.tensor([[1000.0, 0.0], [0.0, 1000.0]]), tg.tensor([0, 0]), reduction="none")
    np.testing.assert_allclose(loss.numpy(), [0.0, 1000.0])


def test_loss_argument_errors():
    logits = tg.tensor(LOGITS)
    with pytest.raises(RuntimeError, match=r"cross_entropy: target must hold integer class indices \(int64\), "
                       r"got teachgrad.float32.*Fix: convert it with target.long\(\)"):
        F.cross_entropy(logits, tg.tensor(CLASSES).float())
    with pytest.raises(RuntimeError, match=r"for input of shape \(6, 4\) \(classes in dimension 1\) target "
                       r"must have shape \(6,\), got \(6, 1\)"):
        F.cross_entropy(logits, tg.tensor(CLASSES).reshape(6, 1))
    with pytest.raises(IndexError, match=r"target 4 is out of bounds: class indices must lie in \[0, 3\] for 4 classes"):
        F.cross_entropy(logits, tg.tensor([0, 4, 1, 1, 2, 3]))
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none', got 'avg'"):
        nn.MSELoss(reduction="avg")
    with pytest.warns(UserWarning, match=r"input has shape \(5, 1\) but target has shape \(5,\)"):
        F.mse_loss(tg.zeros(5, 1), tg.zeros(5))


# -- gradients (central differences, float64) ---------------------------------------------------
@pytest.mark.parametrize("loss_fn", [F.mse_loss, F.l1_loss])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_regression_loss_gradients(loss_fn, reduction):
    pred = tg.tensor(PRED, requires_grad=True)
    loss_fn(pred, tg.tensor(TARGET), reduction=reduction).backward()
    def loss_at(values):
        return loss_fn(tg.tensor(values), tg.tensor(TARGET), reduction=reduction).item()

    numeric = numerical_grad(loss_at, PRED.copy())
    np.testing.assert_allclose(pred.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_gradient(reduction):
    logits = tg.tensor(LOGITS, requires_grad=True)
    F.cross_entropy(logits, tg.tensor(CLASSES), reduction=reduction).backward()
    def loss_at(values):
        return F.cross_entropy(tg.tensor(values), tg.tensor(CLASSES), reduction=reduction).item()

    numeric = numerical_grad(loss_at, LOGITS.copy())
    np.testing.assert_allclose(logits.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_mlp_parameter_gradients():
    tg.manual_seed(5)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3), nn.Sigmoid()).double()
    x, y = tg.randn(5, 3, dtype=tg.float64), tg.tensor([0, 2, 1, 1, 0])
    F.cross_entropy(model(x), y).backward()
    for name, param in model.named_parameters():
        def loss_at(values, param=param):
            with tg.no_grad():
                saved = param.detach().clone()
                param.copy_(tg.tensor(values))
                loss = F.cross_entropy(model(x), y).item()
                param.copy_(saved)
            return loss
        numeric = numerical_grad(loss_at, param.detach().numpy().copy())
        np.testing.assert_allclose(param.grad.numpy(), numeric, rtol=1e-5, atol=1e-8, err_msg=name)


# -- learning ----------------------------------------------------------------------------------------
def test_small_mlp_learns_moons():
    tg.manual_seed(0)
    X, y = tg.data.make_moons(200, noise=0.1, seed=0)
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(300):
        optimizer.zero_grad()
        loss = loss_fn(model(X), y)
        loss.backward()
        optimizer.step()
    with tg.no_grad():
        accuracy = (model(X).argmax(dim=1) == y).float().mean().item()
    assert accuracy > 0.9, f"accuracy {accuracy:.3f} after 300 steps (last loss {loss.item():.3f})"


def test_module_list_registers_its_modules_and_renumbers_like_pytorch():
    blocks = nn.ModuleList([nn.Linear(2, 3), nn.ReLU()])
    blocks.append(nn.Linear(3, 1))
    blocks.insert(0, nn.Identity())
    assert list(blocks.state_dict()) == ["1.weight", "1.bias", "3.weight", "3.bias"]
    del blocks[0]
    assert list(blocks._modules) == ["0", "1", "2"]
    assert isinstance(blocks[-1], nn.Linear) and blocks[-1].out_features == 1
    assert [type(m).__name__ for m in blocks[1:]] == ["ReLU", "Linear"]
    blocks += [nn.Tanh()]
    assert len(blocks) == 4 and isinstance(blocks.pop(), nn.Tanh) and len(blocks) == 3
    with pytest.raises(IndexError, match="out of range"):
        blocks[3]
    with pytest.raises(NotImplementedError, match=r"\[ModuleList\] is missing the required"):
        blocks(tg.randn(2))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x).relu()
            return x
    net = Net().double()
    assert len(list(net.parameters())) == 6
    assert all(p.dtype == tg.float64 for p in net.parameters())
    net(tg.randn(2, 4, dtype=tg.float64)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())


def test_module_dict_keeps_insertion_order_and_refuses_bad_entries():
    parts = nn.ModuleDict({"wte": nn.Embedding(5, 3), "ln_f": nn.LayerNorm(3)})
    parts["head"] = nn.Linear(3, 5, bias=False)
    assert list(parts) == ["wte", "ln_f", "head"] and "head" in parts
    assert list(parts.state_dict()) == ["wte.weight", "ln_f.weight", "ln_f.bias", "head.weight"]
    assert isinstance(parts.pop("ln_f"), nn.LayerNorm) and list(parts.keys()) == ["wte", "head"]
    parts.update([("drop", nn.Dropout(0.1))])
    assert [k for k, _ in parts.items()] == ["wte", "head", "drop"]
    with pytest.raises(KeyError, match="already exists"):
        nn.ModuleDict({"update": nn.ReLU()})
    with pytest.raises(ValueError, match="element #0 should be a"):
        nn.ModuleDict([nn.ReLU()])
    with pytest.raises(TypeError, match="is not a Module subclass"):
        parts["x"] = 3


def test_dropout2d_drops_whole_channels_and_scales_the_rest():
    tg.manual_seed(3)
    x = tg.ones(64, 8, 3, 3, requires_grad=True)
    layer = nn.Dropout2d(p=0.25)
    y = layer(x)
    maps = y.detach().numpy().reshape(64 * 8, 9)
    assert np.all(maps.min(1) == maps.max(1)), "a channel is dropped or kept whole"
    assert set(np.unique(maps).tolist()) <= {0.0, float(np.float32(1 / 0.75))}
    assert 0.15 < (maps[:, 0] == 0).mean() < 0.35
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())  # d(x*mask*s)/dx = mask*s
    layer.eval()
    assert layer(x) is x
    with pytest.warns(UserWarning, match="interpreted as shape \\(N, C, L\\)"):
        F.dropout2d(tg.ones(2, 3, 4))
    with pytest.raises(ValueError, match="4-D input"):
        F.dropout2d(tg.ones(2, 3))
    with pytest.raises(ValueError):
        nn.Dropout2d(p=1.5)
    assert repr(nn.Dropout2d(0.1)) == "Dropout2d(p=0.1, inplace=False)"


def test_is_tensor_like_torch():
    assert tg.is_tensor(tg.ones(2)) and tg.is_tensor(nn.Parameter(tg.ones(2)))
    assert not tg.is_tensor(np.ones(2)) and not tg.is_tensor(3.0)

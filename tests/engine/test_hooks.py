"""Module hooks: the same order, arguments and replacements as PyTorch's.

The expected logs were recorded from PyTorch by ``scripts/record_hook_fixture.py``
running ``tests/engine/hook_scenarios.py``; here the same scenarios run on teachgrad.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import teachgrad as tg
from hook_scenarios import SCENARIOS, as_data
from teachgrad import nn

FIXTURE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "hooks_torch.json").read_text())


def _same(got, expected, where: str) -> None:
    """Equal structure (kinds, names, None slots); numbers equal to float64 rounding."""
    if expected is None or isinstance(expected, str):
        assert got == expected, f"{where}: got {got!r}, PyTorch has {expected!r}"
    elif isinstance(expected, list) and expected and not isinstance(expected[0], (int, float)) \
            or isinstance(expected, list) and not expected:
        assert isinstance(got, list) and len(got) == len(expected), \
            f"{where}: got {got!r}, PyTorch has {expected!r}"
        for i, (g, e) in enumerate(zip(got, expected)):
            _same(g, e, f"{where}[{i}]")
    else:
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-12, atol=1e-12,
                                   err_msg=where)


def _sorted_param_grads(log: list) -> list:
    """The log with each run of consecutive parameter-gradient events sorted by name.

    Which of one layer's parameters gets its gradient first is an engine detail, not a
    hook rule: PyTorch records Linear as ``addmm(bias, x, weight.T)``, teachgrad as
    ``linear(x, weight, bias)``. Where those events fall among the module hooks is kept.
    """
    out, run = [], []
    for event in log + [["end"]]:
        if event[0] == "grad":
            run.append(event)
            continue
        out += sorted(run, key=lambda e: e[1]) + [event]
        run = []
    return out[:-1]


def _events(log: list) -> list:
    """The kind and module name of each event."""
    return [[e[0]] + [x for x in e[1:2] if isinstance(x, str)] for e in log]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_matches_recorded_pytorch(name: str) -> None:
    expected = _sorted_param_grads(FIXTURE["scenarios"][name])
    got = _sorted_param_grads(json.loads(json.dumps(SCENARIOS[name](tg))))
    assert _events(got) == _events(expected)  # the same events in the same order
    _same(got, expected, name)


def test_fixture_covers_every_scenario() -> None:
    assert sorted(FIXTURE["scenarios"]) == sorted(SCENARIOS)
    assert FIXTURE["torch_version"].startswith("2.")


def test_pre_hook_returning_one_value_wraps_it_in_a_tuple() -> None:
    seen = []
    layer = nn.Identity()
    layer.register_forward_pre_hook(lambda m, args: args[0] * 10)
    layer.register_forward_hook(lambda m, args, out: seen.append(args))
    out = layer(tg.tensor([1.0]))
    assert out.tolist() == [10.0]
    assert isinstance(seen[0], tuple) and seen[0][0].tolist() == [10.0]


def test_with_kwargs_hooks_see_and_replace_keyword_arguments() -> None:
    class Scale(nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    m = Scale()
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"factor": 3.0}), with_kwargs=True)
    seen = []
    m.register_forward_hook(lambda mod, args, kwargs, out: seen.append(kwargs), with_kwargs=True)
    assert m(tg.tensor([2.0]), factor=5.0).tolist() == [6.0]
    assert seen == [{"factor": 3.0}]


def test_backward_hook_changes_gradients_of_earlier_layers_only() -> None:
    model = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
    x = tg.randn(4, 2)
    model(x).sum().backward()
    before = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    model.zero_grad()
    model[1].register_full_backward_hook(lambda m, gi, go: (gi[0] * 0,))
    model(x).sum().backward()
    np.testing.assert_allclose(model[2].weight.grad.numpy(), before["2.weight"])
    assert np.all(model[0].weight.grad.numpy() == 0)


def test_no_hooks_left_after_remove_means_plain_call() -> None:
    layer = nn.Linear(2, 2)
    h = layer.register_full_backward_hook(lambda m, gi, go: None)
    h.remove()
    out = layer(tg.randn(1, 2, requires_grad=True))
    assert out.grad_fn.name() != "BackwardHookFunctionBackward"
    assert not layer._has_hooks()


def test_hook_that_raises_names_module_and_hook() -> None:
    def broken_logger(module, args, output):
        raise ValueError("no room left")

    layer = nn.Linear(2, 2)
    layer.register_forward_hook(broken_logger)
    with pytest.raises(RuntimeError, match=r"forward hook 'test_hook_that_raises_names_module_and_hook"
                       r"\.<locals>\.broken_logger' registered on module Linear raised ValueError: "
                       r"no room left") as info:
        layer(tg.randn(1, 2))
    assert isinstance(info.value.__cause__, ValueError)


def test_backward_hook_that_raises_names_module_and_hook() -> None:
    def bad(module, grad_input, grad_output):
        raise KeyError("oops")

    layer = nn.ReLU()
    layer.register_full_backward_hook(bad)
    x = tg.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="full backward hook '.*bad' registered on module ReLU "
                       "raised KeyError"):
        layer(x).sum().backward()


def test_backward_hook_returning_wrong_count_is_an_error() -> None:
    layer = nn.ReLU()
    layer.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        layer(tg.randn(3, requires_grad=True)).sum().backward()


def test_backward_hook_may_not_return_gradients_when_no_input_requires_grad() -> None:
    layer = nn.Linear(2, 2)
    layer.register_full_backward_hook(lambda m, gi, go: (go[0],))
    with pytest.raises(RuntimeError, match="no input of this module requires grad: return None"):
        layer(tg.randn(1, 2)).sum().backward()


@pytest.mark.parametrize("method", ["register_forward_pre_hook", "register_forward_hook",
                                    "register_full_backward_hook", "register_full_backward_pre_hook"])
def test_non_callable_hook_is_refused_before_registering(method: str) -> None:
    layer = nn.Linear(2, 2)
    with pytest.raises(TypeError, match=f"{method} expects a callable hook, got int"):
        getattr(layer, method)(3)
    assert not layer._has_hooks()


def test_old_backward_hook_points_to_the_full_one() -> None:
    with pytest.raises(RuntimeError, match="Fix: use register_full_backward_hook"):
        nn.Linear(1, 1).register_backward_hook(lambda *a: None)


def test_hooks_leave_gradients_unchanged_when_they_return_none() -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1)).double()
    x = tg.randn(4, 3, dtype=tg.float64, requires_grad=True)
    model(x).sum().backward()
    plain = [p.grad.numpy().copy() for p in model.parameters()] + [x.grad.numpy().copy()]
    model.zero_grad()
    x.grad = None
    for m in model.modules():
        m.register_full_backward_hook(lambda m, gi, go: None)
        m.register_forward_hook(lambda m, a, o: None)
    model(x).sum().backward()
    hooked = [p.grad.numpy() for p in model.parameters()] + [x.grad.numpy()]
    for a, b in zip(plain, hooked):
        np.testing.assert_array_equal(a, b)


def test_as_data_of_none_and_tuples() -> None:
    assert as_data((None, tg.tensor([1.0]))) == [None, [1.0]]

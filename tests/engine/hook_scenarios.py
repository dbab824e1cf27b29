"""Module-hook scenarios written once against the PyTorch API, run on a library ``lib``.

``scripts/record_hook_fixture.py`` runs them with ``lib = torch`` and stores what
happened in ``tests/fixtures/hooks_torch.json``; ``tests/engine/test_hooks.py`` runs them with
``lib = teachgrad`` and compares. Each scenario returns a log: a list of events
(``[kind, module name, values...]``), where a tensor is a nested list and a missing
gradient is ``None``.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

SEED = 1234


def as_data(value: Any) -> Any:
    """A tensor (or tuple of them, or None) as plain nested lists for JSON."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return [as_data(v) for v in value]
    if hasattr(value, "detach"):
        return value.detach().numpy().tolist()
    return value


def _model(lib: Any) -> Any:
    """A 3-4-2 MLP in float64 with the same fixed weights in every library."""
    rng = np.random.default_rng(SEED)
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2)).double()
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.normal(size=tuple(p.shape)), dtype=lib.float64))
    return model


def _input(lib: Any, requires_grad: bool) -> Any:
    rng = np.random.default_rng(SEED + 1)
    return lib.tensor(rng.normal(size=(5, 3)), dtype=lib.float64, requires_grad=requires_grad)


def _log_everything(model: Any, log: list) -> list:
    """Hooks of every kind on every module (the container too) and every parameter."""
    handles = []
    for name, module in model.named_modules():
        name = name or "model"
        handles.append(module.register_forward_pre_hook(
            lambda m, args, name=name: log.append(["forward_pre", name, as_data(args)])))
        handles.append(module.register_forward_hook(
            lambda m, args, out, name=name: log.append(["forward", name, as_data(out)])))
        handles.append(module.register_full_backward_pre_hook(
            lambda m, go, name=name: log.append(["backward_pre", name, as_data(go)])))
        handles.append(module.register_full_backward_hook(
            lambda m, gi, go, name=name: log.append(["backward", name, as_data(gi), as_data(go)])))
    for pname, p in model.named_parameters():
        handles.append(p.register_hook(lambda g, pname=pname: log.append(["grad", pname, as_data(g)])))
    return handles


def order(lib: Any) -> list:
    """Every hook on every module, input requiring grad: the order they fire in."""
    log: list = []
    model = _model(lib)
    _log_everything(model, log)
    model(_input(lib, True)).sum().backward()
    return log


def order_no_input_grad(lib: Any) -> list:
    """The same with a plain data input: the first layer's grad_input is (None,)."""
    log: list = []
    model = _model(lib)
    _log_everything(model, log)
    model(_input(lib, False)).sum().backward()
    return log


def replace(lib: Any) -> list:
    """Hooks that return values: new args, a new output, a new grad_input, a new grad_output."""
    model = _model(lib)
    x = _input(lib, True)
    model[0].register_forward_hook(lambda m, args, out: out * 2)
    model[2].register_forward_pre_hook(lambda m, args: args[0] + 1)  # one value, not a tuple
    model[1].register_full_backward_hook(lambda m, gi, go: (gi[0] * 0.5,))
    model[2].register_full_backward_pre_hook(lambda m, go: (go[0] * 3,))
    out = model(x)
    (out * out).sum().backward()
    grads = [[name, as_data(p.grad)] for name, p in model.named_parameters()]
    return [["output", as_data(out)], ["x.grad", as_data(x.grad)]] + grads


def remove_and_prepend(lib: Any) -> list:
    """Removed hooks stop firing; prepend=True runs first; a handle works as a context."""
    log: list = []
    layer = _model(lib)[0]
    x = _input(lib, False)
    a = layer.register_forward_hook(lambda m, args, out: log.append(["forward", "a"]))
    layer.register_forward_hook(lambda m, args, out: log.append(["forward", "b"]))
    layer.register_forward_hook(lambda m, args, out: log.append(["forward", "c"]), prepend=True)
    layer.register_forward_pre_hook(lambda m, args: log.append(["forward_pre", "d"]))
    layer.register_forward_pre_hook(lambda m, args: log.append(["forward_pre", "e"]), prepend=True)
    layer(x)
    a.remove()
    a.remove()  # removing twice is harmless
    layer(x)
    with layer.register_forward_hook(lambda m, args, out: log.append(["forward", "f"])):
        layer(x)
    layer(x)
    return log


def _two_way(lib: Any) -> Any:
    class TwoWay(lib.nn.Module):
        """forward(a, b, scale) -> (a * b * scale, a + b): two outputs, three inputs."""

        def forward(self, a: Any, b: Any, scale: float) -> tuple:
            return a * b * scale, a + b

    return TwoWay()


def many_inputs_and_outputs(lib: Any) -> list:
    """grad_input has one slot per positional argument: None for a non-tensor and for a
    tensor that does not require grad; grad_output one slot per output."""
    log: list = []
    module = _two_way(lib)
    module.register_full_backward_hook(
        lambda m, gi, go: log.append(["backward", "two_way", as_data(gi), as_data(go)]))
    rng = np.random.default_rng(SEED + 2)
    a = lib.tensor(rng.normal(size=(2, 3)), dtype=lib.float64, requires_grad=True)
    b = lib.tensor(rng.normal(size=(2, 3)), dtype=lib.float64)
    p, q = module(a, b, 2.0)
    (p.sum() + (q * q).sum()).backward()
    log.append(["a.grad", as_data(a.grad)])
    return log


def shared_module(lib: Any) -> list:
    """A module called twice in one forward: its backward hook fires once per call."""
    log: list = []
    layer = lib.nn.Linear(3, 3).double()
    with lib.no_grad():
        layer.weight.copy_(lib.tensor(np.eye(3) * 0.5 + 0.1, dtype=lib.float64))
        layer.bias.copy_(lib.tensor([0.1, -0.2, 0.3], dtype=lib.float64))
    calls = [0]

    def forward_hook(m: Any, args: Any, out: Any) -> None:
        calls[0] += 1
        log.append(["forward", f"call{calls[0]}", as_data(out)])

    layer.register_forward_hook(forward_hook)
    layer.register_full_backward_hook(
        lambda m, gi, go: log.append(["backward", "layer", as_data(gi), as_data(go)]))
    x = _input(lib, True)
    layer(layer(x)).sum().backward()
    log.append(["weight.grad", as_data(layer.weight.grad)])
    return log


def _scaled(lib: Any) -> Any:
    class Scaled(lib.nn.Module):
        """forward(x, scale=1.0) -> x * scale: a keyword argument for with_kwargs hooks."""

        def forward(self, x: Any, scale: float = 1.0) -> Any:
            return x * scale

    return Scaled()


def keyword_hooks(lib: Any) -> list:
    """with_kwargs=True hooks see (and may replace) keyword arguments; they run in
    registration order among the plain hooks."""
    log: list = []
    module = _scaled(lib)
    module.register_forward_pre_hook(lambda m, args: log.append(["forward_pre", "plain"]))
    module.register_forward_pre_hook(
        lambda m, args, kwargs: (log.append(["forward_pre", "kwargs", sorted(kwargs.items())]),
                                 ((args[0] + 1,), {"scale": kwargs["scale"] * 10}))[1],
        with_kwargs=True)
    module.register_forward_hook(
        lambda m, args, kwargs, out: log.append(["forward", "kwargs", sorted(kwargs.items()),
                                                 as_data(out)]), with_kwargs=True)
    module.register_forward_hook(lambda m, args, out: log.append(["forward", "plain", as_data(args)]))
    x = lib.tensor([1.0, 2.0], dtype=lib.float64)
    log.append(["output", as_data(module(x, scale=0.5))])
    return log


SCENARIOS: dict[str, Callable[[Any], list]] = {
    "order": order,
    "order_no_input_grad": order_no_input_grad,
    "replace": replace,
    "remove_and_prepend": remove_and_prepend,
    "many_inputs_and_outputs": many_inputs_and_outputs,
    "shared_module": shared_module,
    "keyword_hooks": keyword_hooks,
}

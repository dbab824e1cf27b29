"""Checkers for chapter 12, *Instrumentation*: a call-counting hook, a gradient-norm logger,
and finding dead ReLU units with hooks."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad import nn

from .core import Feedback, Mismatch, Test, check, expect_close, expect_true, to_numpy


def _random_mlp(rng: np.random.Generator, depth: int) -> nn.Sequential:
    """Linear/ReLU pairs of random widths, then a Linear to 2 outputs."""
    layers: list[nn.Module] = []
    width = 2
    for _ in range(depth):
        hidden = int(rng.integers(3, 9))
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    return nn.Sequential(*layers, nn.Linear(width, 2))


# --- 12.1 a hook that counts calls ---------------------------------------------------------------

def check_call_counter(CallCounter: type) -> Feedback:
    """Exercise 12.1: ``CallCounter(model)`` counts forward calls of every named module in
    ``counts`` (``""`` for the model itself) and ``remove()`` takes its hooks off."""

    def make(seed: int, depth: int, calls: int) -> Test:
        def run() -> None:
            rng = np.random.default_rng(seed)
            tg.manual_seed(seed)
            model = _random_mlp(rng, depth)
            counter = CallCounter(model)
            names = [name for name, _ in model.named_modules()]
            counts = getattr(counter, "counts", None)
            expect_true(isinstance(counts, dict),
                        "CallCounter has no dict attribute `counts`",
                        hint="self.counts = {name: 0 for name, _ in model.named_modules()}")
            x = tg.randn(int(rng.integers(1, 5)), 2)
            for _ in range(calls):
                model(x).sum().backward()
            expected = {name: calls for name in names}
            got = {name: counts.get(name) for name in names}
            if got != expected:
                hint = "register one forward hook on every module of model.named_modules()"
                if all(v == calls + 1 for v in got.values()):
                    hint = "start every count at 0: the hook adds one per call"
                elif got.get("") == calls and any(v != calls for v in got.values()):
                    hint = "hook every module (model.named_modules()), not just the model"
                elif all(v in (0, None) for v in got.values()):
                    hint = ("count in a forward hook (register_forward_hook), which runs on "
                            "every call; a backward hook runs only when gradients flow")
                raise Mismatch(f"wrong counts after {calls} forward calls", expected, got, hint)
            counter.remove()
            model(x)
            expect_true(dict(counts) == expected and not any(m._has_hooks() for m in model.modules()),
                        "after remove() the hooks still count calls (or are still registered)",
                        hint="keep the handles that register_forward_hook returns and call "
                             ".remove() on each")
        return Test(f"a random MLP with {depth} hidden layer(s) (seed {seed}), {calls} calls", run)

    seeds = np.random.default_rng().integers(100, 10_000, size=2)
    tests = [make(0, 2, 3)] + [make(int(s), 1 + int(s) % 3, 1 + int(s) % 4) for s in seeds]
    return check("12.1", tests, candidate=CallCounter,
                 solved="your hooks count every module's calls, and come off cleanly.")


# --- 12.2 a gradient-norm logger -----------------------------------------------------------------

class _RecordingWriter:
    """Stands in for a SummaryWriter: remembers every add_scalar call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, Any]] = []

    def add_scalar(self, tag: str, value: Any, global_step: Any = None, walltime: Any = None) -> None:
        self.calls.append((tag, value, global_step))


def check_log_grad_norms(log_grad_norms: Callable) -> Feedback:
    """Exercise 12.2: ``log_grad_norms(model, writer, step)`` logs, for every parameter with
    a gradient, its L2 norm as ``grad_norm/<name>`` at ``step``."""

    def make(seed: int, depth: int, step: int) -> Test:
        def run() -> None:
            rng = np.random.default_rng(seed)
            tg.manual_seed(seed)
            model = _random_mlp(rng, depth)
            model(tg.randn(5, 2)).pow(2).sum().backward()
            writer = _RecordingWriter()
            log_grad_norms(model, writer, step)
            expected = {f"grad_norm/{name}": float(np.linalg.norm(to_numpy(p.grad).astype(np.float64)))
                        for name, p in model.named_parameters()}
            got = {tag: value for tag, value, _ in writer.calls}
            expect_true(set(got) == set(expected),
                        f"logged tags {sorted(got)}, expected {sorted(expected)}",
                        hint="one writer.add_scalar(f'grad_norm/{name}', ...) per "
                             "model.named_parameters()")
            steps = {s for _, _, s in writer.calls}
            expect_true(steps == {step}, f"logged at step(s) {sorted(steps, key=str)}, expected {step}",
                        hint="pass the step as the third argument of add_scalar, unchanged")
            for tag, want in expected.items():
                value = got[tag]
                hint = "the L2 norm of the gradient: sqrt of the sum of its squares"
                if isinstance(value, (int, float)) and np.isclose(value, want**2, rtol=1e-4):
                    hint = "take the square root: that is the squared norm"
                param = dict(model.named_parameters())[tag.split("/", 1)[1]]
                if isinstance(value, (int, float)) and np.isclose(
                        value, np.linalg.norm(to_numpy(param.detach())), rtol=1e-4):
                    hint = "use the parameter's .grad, not the parameter itself"
                expect_close(value, want, what=f"value of {tag}", hint=hint)
        return Test(f"a random MLP with {depth} hidden layer(s) (seed {seed}), step {step}", run)

    seeds = np.random.default_rng().integers(100, 10_000, size=2)
    tests = [make(0, 1, 7)] + [make(int(s), 1 + int(s) % 3, int(s) % 50) for s in seeds]
    return check("12.2", tests, candidate=log_grad_norms,
                 solved="every parameter's gradient norm reaches the writer at the right step.")


# --- 12.3 which layer is dead? -------------------------------------------------------------------

def _dead_truth(model: nn.Sequential, X: tg.Tensor) -> dict[str, float]:
    """Reference: run the layers one by one and look at each ReLU's output."""
    out, fractions = X, {}
    with tg.no_grad():
        for name, layer in model.named_children():
            out = layer(out)
            if isinstance(layer, nn.ReLU):
                a = to_numpy(out)
                fractions[name] = float(np.mean(np.all(a <= 0, axis=0)))
    return fractions


def check_dead_fractions(dead_fractions: Callable) -> Feedback:
    """Exercise 12.3: ``dead_fractions(model, X)`` returns ``{relu_name: fraction}``: for each
    ReLU module, the fraction of its units that output 0 for *every* example of ``X``."""

    def make(seed: int, depth: int, kill: float) -> Test:
        def run() -> None:
            rng = np.random.default_rng(seed)
            tg.manual_seed(seed)
            model = _random_mlp(rng, depth)
            with tg.no_grad():  # push some units of some layers far below zero
                for layer in model.children():
                    if isinstance(layer, nn.Linear) and layer.out_features != 2:
                        mask = rng.random(layer.out_features) < kill
                        layer.bias.copy_(tg.tensor(np.where(mask, -50.0, 0.1), dtype=tg.float32))
            X = tg.randn(int(rng.integers(6, 20)), 2)
            expected = _dead_truth(model, X)
            got = dead_fractions(model, X)
            expect_true(isinstance(got, dict), f"dead_fractions returned a {type(got).__name__}, "
                        "not a dict", hint="return {name: fraction} for the ReLU modules")
            if set(got) != set(expected):
                hint = "use the names of the nn.ReLU modules (model.named_modules())"
                if {str(int(k) + 1) for k in got if str(k).isdigit()} == set(expected):
                    hint = "record the ReLU's output, keyed by the ReLU's own name, not the Linear's"
                raise Mismatch("wrong layers", sorted(expected), sorted(got), hint)
            for name, want in expected.items():
                hint = ("a unit is dead when it is 0 for every example: np.all(out <= 0, axis=0), "
                        "then the mean over units")
                expect_close(got[name], want, what=f"dead fraction of layer {name}", hint=hint)
            leftover = [m for m in model.modules() if m._has_hooks()]
            expect_true(not leftover, "hooks were left on the model after dead_fractions returned",
                        hint="remove every handle before returning")
        return Test(f"a random MLP with {depth} hidden layer(s), about {kill:.0%} of units "
                    f"killed (seed {seed})", run)

    seeds = np.random.default_rng().integers(100, 10_000, size=2)
    tests = [make(0, 2, 0.5)] + [make(int(s), 2 + int(s) % 2, 0.3 + (int(s) % 5) / 10) for s in seeds]
    return check("12.3", tests, candidate=dead_fractions,
                 solved="your hooks find the dead units: the diagnosis LayerStats draws.")

"""Checkers for chapter 12, *Instrumentation*: a call-counting hook, a gradient-norm logger,
and finding dead ReLU units with hooks.

The models are drawn afresh on every run and go beyond the chapter's ``Sequential``: nested
containers, a module called twice in one forward, two branches added together, and hooks of
their own that a learner's hooks must leave in place.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad import nn

from .core import Feedback, Mismatch, Test, check, expect_close, expect_true, to_numpy, unseen_rng

_HOOK_KINDS = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks")


def _hooks_on(model: nn.Module) -> dict[str, int]:
    """How many hooks of every kind each module holds, by module name."""
    return {name: sum(len(getattr(m, kind, {})) for kind in _HOOK_KINDS)
            for name, m in model.named_modules()}


def _random_mlp(rng: np.random.Generator, depth: int) -> nn.Sequential:
    """Linear/ReLU pairs of random widths, then a Linear to 2 outputs."""
    layers: list[nn.Module] = []
    width = 2
    for _ in range(depth):
        hidden = int(rng.integers(3, 9))
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    return nn.Sequential(*layers, nn.Linear(width, 2))


class _TwoBranches(nn.Module):
    """``relu(a(x)) + relu(b(x))``: not a chain, so running the children one after the other
    does not compute what the model computes."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.a = nn.Sequential(nn.Linear(width, hidden), nn.ReLU())
        self.b = nn.Linear(width, hidden)
        self.act = nn.ReLU()

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        return self.a(x) + self.act(self.b(x))


class _Twice(nn.Module):
    """Calls the same layer twice in one forward (a value used twice)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.shared = nn.Linear(width, width)

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        return self.shared(self.shared(x).relu())


def _nested_model(rng: np.random.Generator) -> nn.Sequential:
    """Containers inside containers, a shared layer called twice, two branches."""
    hidden = int(rng.integers(3, 8))
    return nn.Sequential(nn.Linear(2, hidden), nn.ReLU(),
                         nn.Sequential(_Twice(hidden), _TwoBranches(hidden, hidden)),
                         nn.Linear(hidden, 2))


def _add_own_hooks(model: nn.Module, rng: np.random.Generator) -> list[int]:
    """Hooks the model already had (a logger left on by someone else): they must survive."""
    fired = [0]

    def note(*_: Any) -> None:
        fired[0] += 1
    for _, module in list(model.named_modules())[1::2]:
        module.register_forward_hook(note)
        if rng.random() < 0.5:
            module.register_forward_pre_hook(note)
    return fired


def _forward_once(model: nn.Module, x: tg.Tensor, handles: list) -> None:
    """One forward without gradients for the checker's own hooks, then take them off."""
    try:
        with tg.no_grad():
            model(x)
    finally:
        for handle in handles:
            handle.remove()


def _calls_per_forward(model: nn.Module, x: tg.Tensor) -> dict[str, int]:
    """The truth, from the engine: how often each module's forward runs for one model(x)."""
    counts = {name: 0 for name, _ in model.named_modules()}
    handles = []
    for name, module in model.named_modules():
        def count(m: Any, args: Any, name: str = name) -> None:
            counts[name] += 1
        handles.append(module.register_forward_pre_hook(count))
    _forward_once(model, x, handles)
    return counts


def _count_differences(expected: dict, got: dict) -> str:
    wrong = [name for name in expected if got.get(name) != expected[name]]
    shown = "; ".join(f"{name or 'the model'!r}: counted {got.get(name, 'nothing')}, ran "
                      f"{expected[name]}" for name in wrong[:4])
    more = f" (and {len(wrong) - 4} more)" if len(wrong) > 4 else ""
    return f"{len(wrong)} of {len(expected)} modules have wrong counts: {shown}{more}"


def _count_hint(expected: dict, got: dict, calls: int) -> str:
    if all(got.get(n) == e + 1 for n, e in expected.items()):
        return "start every count at 0: the hook adds one per call"
    if any(got.get(n) is None for n in expected):
        return "count every module of model.named_modules(), nested ones included ('' is the model)"
    if got.get("") == expected[""] and all(got.get(n) in (0, None) for n in expected if n):
        return "hook every module (model.named_modules()), not just the model"
    if all(v in (0, None) for v in got.values()):
        return ("count in a forward hook (register_forward_hook), which runs on every call; a "
                "backward hook runs only when gradients flow")
    if all(got.get(n) == calls for n in expected):
        return "a module called twice in one forward runs its hooks twice: count every call"
    if any(got.get(n) == 2 * e for n, e in expected.items() if e):
        return "register one hook per module: two hooks on one module count each call twice"
    return "register one forward hook on every module of model.named_modules()"


def check_call_counter(CallCounter: type) -> Feedback:
    """Exercise 12.1: ``CallCounter(model)`` counts forward calls of every named module in
    ``counts`` (``""`` for the model itself) and ``remove()`` takes its hooks off."""
    rng = unseen_rng()

    def make(description: str, seed: int, build: Callable, calls: int, own_hooks: bool) -> Test:
        def run() -> None:
            tg.manual_seed(seed)
            model_rng = np.random.default_rng(seed)
            model = build(model_rng)
            fired = _add_own_hooks(model, model_rng) if own_hooks else [0]
            x = tg.randn(int(model_rng.integers(1, 5)), 2)
            per_call = _calls_per_forward(model, x)
            before, fired_before = _hooks_on(model), fired[0]
            counter = CallCounter(model)
            counts = getattr(counter, "counts", None)
            expect_true(isinstance(counts, dict), "CallCounter has no dict attribute `counts`",
                        hint="self.counts = {name: 0 for name, _ in model.named_modules()}")
            added = {n for n, k in _hooks_on(model).items() if k > before[n]}
            for _ in range(calls):
                model(x).sum().backward()
            expected = {name: calls * k for name, k in per_call.items()}
            got = {name: counts.get(name) for name in expected}
            if got != expected:
                raise Mismatch(_count_differences(expected, got), hint=_count_hint(
                    expected, got, calls), show_values=False)
            expect_true(added == set(expected), "the counts are right, but not every module got "
                        "a hook of yours", hint="count with hooks the modules call themselves: "
                        "module.register_forward_hook on every module")
            counter.remove()
            model(x)
            expect_true(got == {name: counts.get(name) for name in expected},
                        "after remove() your hooks still count calls",
                        hint="keep the handles that register_forward_hook returns and call "
                             ".remove() on each")
            expect_true(_hooks_on(model) == before,
                        "after remove() the model does not hold the hooks it had before you "
                        "came", hint="remove exactly your own handles: the hooks the model "
                        "already had must stay")
            expect_true(not own_hooks or fired[0] > fired_before,
                        "the model's own hooks stopped running", hint="add your hooks next to "
                        "the existing ones; never clear a module's hook dictionaries")
        return Test(description, run)

    seeds = [int(s) for s in rng.integers(100, 10_000, size=3)]
    tests = [make("the chapter's kind of MLP, 2 hidden layers (seed 0), 3 calls", 0,
                  lambda r: _random_mlp(r, 2), 3, False),
             make(f"a random MLP (seed {seeds[0]}), {1 + seeds[0] % 4} calls", seeds[0],
                  lambda r: _random_mlp(r, 1 + seeds[0] % 3), 1 + seeds[0] % 4, False),
             make(f"nested containers, a layer called twice per forward, two branches "
                  f"(seed {seeds[1]}), 2 calls", seeds[1], _nested_model, 2, False),
             make(f"the nested model with hooks of its own already on it (seed {seeds[2]}), "
                  "3 calls", seeds[2], _nested_model, 3, True)]
    return check("12.1", tests, candidate=CallCounter,
                 solved="your hooks count every module's calls, and come off cleanly.")


# --- 12.2 a gradient-norm logger -----------------------------------------------------------------

class _RecordingWriter:
    """Stands in for a SummaryWriter: remembers every add_scalar call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, Any]] = []

    def add_scalar(self, tag: str, scalar_value: Any, global_step: Any = None,
                   walltime: Any = None) -> None:
        value = scalar_value.item() if hasattr(scalar_value, "item") else scalar_value
        self.calls.append((tag, value, global_step))


def _norm_hint(value: Any, grad: np.ndarray, param: np.ndarray) -> str:
    if not isinstance(value, (int, float)):
        return f"log a number (a float), not a {type(value).__name__}"
    if np.isclose(value, np.sum(grad**2), rtol=1e-4):
        return "take the square root: that is the squared norm"
    if np.isclose(value, np.linalg.norm(param), rtol=1e-4):
        return "use the parameter's .grad, not the parameter itself"
    if np.isclose(value, np.abs(grad).sum(), rtol=1e-4):
        return "that is the L1 norm (sum of absolute values): use the square root of the sum of squares"
    if np.isclose(value, np.abs(grad).max(), rtol=1e-4):
        return "that is the largest entry: use the square root of the sum of squares"
    return "the L2 norm of the gradient: sqrt of the sum of its squares"


class _WithGaps(nn.Module):
    """A nested model with one frozen layer and one layer that forward never uses."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(2, 6), nn.ReLU(),
                                  nn.Sequential(nn.Linear(6, 5), nn.Tanh()), nn.Linear(5, 2))
        self.unused = nn.Linear(3, 3)        # registered, but no gradient reaches it
        for p in self.body[0].parameters():
            p.requires_grad_(False)          # frozen: .grad stays None

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        return self.body(x)


def check_log_grad_norms(log_grad_norms: Callable) -> Feedback:
    """Exercise 12.2: ``log_grad_norms(model, writer, step)`` logs, for every parameter with
    a gradient, its L2 norm as ``grad_norm/<name>`` at ``step``."""
    rng = unseen_rng()

    def make(description: str, seed: int, build: Callable, step: int) -> Test:
        def run() -> None:
            tg.manual_seed(seed)
            model = build(np.random.default_rng(seed))
            model(tg.randn(5, 2)).pow(2).sum().backward()
            grads_before = {n: to_numpy(p.grad).copy() for n, p in model.named_parameters()
                            if p.grad is not None}
            writer = _RecordingWriter()
            log_grad_norms(model, writer, step)
            expected = {f"grad_norm/{name}": float(np.linalg.norm(g.astype(np.float64)))
                        for name, g in grads_before.items()}
            got = {tag: value for tag, value, _ in writer.calls}
            missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
            if missing or extra:
                hint = "one writer.add_scalar(f'grad_norm/{name}', ...) per named parameter"
                if extra and all(tag.split("/", 1)[-1] in dict(model.named_parameters())
                                 for tag in extra):
                    hint = "skip the parameters whose .grad is None (frozen, or not used)"
                raise Mismatch(f"tags missing: {missing or 'none'}; tags that should not be "
                               f"there: {extra or 'none'}", hint=hint, show_values=False)
            expect_true(len(writer.calls) == len(expected),
                        f"{len(writer.calls)} add_scalar calls for {len(expected)} parameters",
                        hint="log each parameter once per call")
            steps = {s for _, _, s in writer.calls}
            expect_true(steps == {step}, f"logged at step(s) {sorted(steps, key=str)}, expected {step}",
                        hint="pass the step as the third argument of add_scalar, unchanged")
            params = dict(model.named_parameters())
            for tag, want in expected.items():
                name = tag.split("/", 1)[1]
                value = got[tag]
                hint = _norm_hint(value, grads_before[name], to_numpy(params[name].detach()))
                expect_close(value if isinstance(value, (int, float)) else np.nan, want,
                             what=f"value of {tag}", hint=hint)
            for name, g in grads_before.items():
                expect_true(np.array_equal(to_numpy(params[name].grad), g),
                            f"log_grad_norms changed the gradient of {name}",
                            hint="only read p.grad: an in-place op on it changes training")
        return Test(description, run)

    seeds = [int(s) for s in rng.integers(100, 10_000, size=2)]
    tests = [make("an MLP with 1 hidden layer (seed 0), step 7", 0, lambda r: _random_mlp(r, 1), 7),
             make(f"a random MLP (seed {seeds[0]}), step {seeds[0] % 50}", seeds[0],
                  lambda r: _random_mlp(r, 1 + seeds[0] % 3), seeds[0] % 50),
             make(f"a nested model with a frozen layer and an unused one (seed {seeds[1]}), "
                  f"step {seeds[1] % 1000}", seeds[1], lambda r: _WithGaps(), seeds[1] % 1000)]
    return check("12.2", tests, candidate=log_grad_norms,
                 solved="every parameter's gradient norm reaches the writer at the right step.")


# --- 12.3 which layer is dead? -------------------------------------------------------------------

def _dead_truth(model: nn.Module, X: tg.Tensor) -> dict[str, float]:
    """Reference: the checker's own forward hooks on the ReLU modules, one forward."""
    fractions, handles = {}, []
    for name, module in model.named_modules():
        if isinstance(module, nn.ReLU):
            def record(m: Any, args: Any, out: Any, name: str = name) -> None:
                fractions[name] = float(np.mean(np.all(to_numpy(out) <= 0, axis=0)))
            handles.append(module.register_forward_hook(record))
    _forward_once(model, X, handles)
    return fractions


def _kill_units(model: nn.Module, rng: np.random.Generator, kill: float) -> None:
    """Push some units of some layers far below zero; leave one unit alive for one example
    only (it is not dead: it passes gradient for that example)."""
    with tg.no_grad():
        for layer in model.modules():
            if isinstance(layer, nn.Linear) and layer.out_features != 2:
                mask = rng.random(layer.out_features) < kill
                layer.bias.copy_(tg.tensor(np.where(mask, -50.0, 0.1), dtype=tg.float32))


def _dead_hint(expected: dict, got: dict, name: str, model: nn.Module, X: tg.Tensor) -> str:
    value = got[name]
    out = _relu_output(model, X, name)
    if out is not None and np.isclose(value, np.mean(out <= 0), atol=1e-6):
        return ("that is the fraction of zero *entries*; a unit (a column) is dead when it is "
                "0 for every example: np.all(out <= 0, axis=0), then the mean over units")
    if out is not None and np.isclose(value, np.mean(np.any(out <= 0, axis=0)), atol=1e-6):
        return "a unit is dead when it is 0 for *every* example (all over rows), not for any"
    if np.isclose(value, 1 - expected[name], atol=1e-6):
        return "that is the fraction of live units: count the ones that are always 0"
    return ("a unit is dead when it is 0 for every example: np.all(out <= 0, axis=0), then the "
            "mean over units")


def _relu_output(model: nn.Module, X: tg.Tensor, name: str) -> np.ndarray | None:
    seen: list[np.ndarray] = []
    module = dict(model.named_modules())[name]
    with module.register_forward_hook(lambda m, a, out: seen.append(to_numpy(out))):
        with tg.no_grad():
            model(X)
    return seen[0] if seen else None


def check_dead_fractions(dead_fractions: Callable) -> Feedback:
    """Exercise 12.3: ``dead_fractions(model, X)`` returns ``{relu_name: fraction}``: for each
    ReLU module, the fraction of its units that output 0 for *every* example of ``X``."""
    rng = unseen_rng()

    def make(description: str, seed: int, build: Callable, kill: float, own_hooks: bool) -> Test:
        def run() -> None:
            tg.manual_seed(seed)
            model_rng = np.random.default_rng(seed)
            model = build(model_rng)
            _kill_units(model, model_rng, kill)
            if own_hooks:
                _add_own_hooks(model, model_rng)
            X = tg.randn(int(model_rng.integers(6, 20)), 2)
            expected = _dead_truth(model, X)
            before = _hooks_on(model)
            got = dead_fractions(model, X)
            expect_true(isinstance(got, dict), f"dead_fractions returned a {type(got).__name__}, "
                        "not a dict", hint="return {name: fraction} for the ReLU modules")
            if set(got) != set(expected):
                hint = "use the names of the nn.ReLU modules (model.named_modules())"
                if {str(int(k) + 1) for k in got if str(k).isdigit()} == set(expected):
                    hint = "record the ReLU's output, keyed by the ReLU's own name, not the Linear's"
                elif set(got) < set(expected):
                    hint = ("hook every nn.ReLU of model.named_modules(), the nested ones too "
                            "(named like '2.1.act')")
                raise Mismatch(f"wrong layers: missing {sorted(set(expected) - set(got))}, "
                               f"extra {sorted(set(got) - set(expected))}", sorted(expected),
                               sorted(got), hint)
            for name, want in expected.items():
                if not np.isclose(float(got[name]), want, atol=1e-6):
                    raise Mismatch(f"wrong dead fraction of layer {name!r}", want, got[name],
                                   _dead_hint(expected, got, name, model, X))
            expect_true(_hooks_on(model) == before,
                        "the model's hooks are not what they were before dead_fractions ran",
                        hint="remove every handle of yours before returning, and only yours")
        return Test(description, run)

    seeds = [int(s) for s in rng.integers(100, 10_000, size=3)]
    tests = [make("an MLP with 2 hidden layers, about 50% of units killed (seed 0)", 0,
                  lambda r: _random_mlp(r, 2), 0.5, False),
             make(f"a random MLP, about {0.3 + seeds[0] % 5 / 10:.0%} killed (seed {seeds[0]})",
                  seeds[0], lambda r: _random_mlp(r, 2 + seeds[0] % 2), 0.3 + seeds[0] % 5 / 10,
                  False),
             make(f"nested containers and two branches, ReLUs inside (seed {seeds[1]})", seeds[1],
                  _nested_model, 0.4, False),
             make(f"the nested model with hooks of its own already on it (seed {seeds[2]})",
                  seeds[2], _nested_model, 0.6, True),
             make("an MLP where nothing is killed (seed 1)", 1, lambda r: _random_mlp(r, 1), 0.0,
                  False)]
    return check("12.3", tests, candidate=dead_fractions,
                 solved="your hooks find the dead units: the diagnosis LayerStats draws.")

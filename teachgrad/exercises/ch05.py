"""Checkers for chapter 5, *Modules and optimizers*: a module, a training epoch, accuracy, and
the optimizers' own steps (SGD with momentum, Adam), plugged into tg.optim."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad import nn, optim
from teachgrad.data import DataLoader, TensorDataset, make_moons

from .building import plugged_workload, property_test, written_by_the_learner
from .core import (Feedback, Mismatch, Test, check, expect_close, expect_true, to_numpy,
                   unseen_rng)


def _parameters_by_shape(model: nn.Module) -> dict[tuple, np.ndarray]:
    return {tuple(p.shape): to_numpy(p).astype(np.float64) for p in model.parameters()}


def check_two_layer_net(TwoLayerNet: type) -> Feedback:
    """Exercise 5.1: ``TwoLayerNet(in, hidden, out)``: Linear -> ReLU -> Linear."""

    def make(n_in: int, hidden: int, n_out: int, batch: int) -> Test:
        def run() -> None:
            tg.manual_seed(5)
            model = TwoLayerNet(n_in, hidden, n_out)
            expect_true(isinstance(model, nn.Module), "TwoLayerNet should subclass nn.Module",
                        hint="class TwoLayerNet(nn.Module): ... and call super().__init__()")
            params = list(model.parameters())
            expected_count = n_in * hidden + hidden + hidden * n_out + n_out
            got_count = sum(p.numel() for p in params)
            expect_true(got_count == expected_count,
                        f"the model has {got_count} parameters, expected {expected_count} "
                        f"(weights {hidden}x{n_in} and {n_out}x{hidden}, "
                        f"biases {hidden} and {n_out})",
                        hint="create two nn.Linear layers in __init__ and assign them to "
                             "attributes (self.hidden = ...) so the module registers them")
            shapes = _parameters_by_shape(model)
            for shape in ((hidden, n_in), (hidden,), (n_out, hidden), (n_out,)):
                expect_true(shape in shapes, f"no parameter of shape {list(shape)}",
                            hint=f"nn.Linear({n_in}, {hidden}) then nn.Linear({hidden}, {n_out})")
            x = np.random.default_rng(n_in + batch).normal(size=(batch, n_in))
            W1, b1 = shapes[(hidden, n_in)], shapes[(hidden,)]
            W2, b2 = shapes[(n_out, hidden)], shapes[(n_out,)]
            expected = np.maximum(x @ W1.T + b1, 0) @ W2.T + b2
            got = model(tg.tensor(x, dtype=tg.float32))
            no_relu = (x @ W1.T + b1) @ W2.T + b2
            hint = "forward: hidden layer, then ReLU, then output layer"
            if got is not None and np.allclose(to_numpy(got), no_relu, rtol=1e-4, atol=1e-5):
                hint = "apply the ReLU between the two layers (tg.relu or nn.ReLU)"
            expect_close(got, expected, what="output", rtol=1e-4, atol=1e-5, hint=hint)
            got.sum().backward()
            missing = [name for name, p in model.named_parameters() if p.grad is None]
            expect_true(not missing, f"no gradient reached {', '.join(missing)}",
                        hint="use every layer in forward")
        return Test(f"TwoLayerNet({n_in}, {hidden}, {n_out}) on a batch of {batch}", run)

    rng = unseen_rng()  # distinct sizes: the test finds each parameter by its shape
    sizes = [(3, 5, 2, 4), (2, 8, 3, 1),
             (*(int(v) for v in rng.choice(np.arange(2, 10), size=3, replace=False)),
              int(rng.integers(1, 9)))]
    return check("5.1", [make(*size) for size in sizes], candidate=TwoLayerNet,
                 solved="your module registers its layers, computes Linear-ReLU-Linear, "
                        "and every parameter gets a gradient.")


def _tiny_problem(seed: int = 7) -> tuple[nn.Module, DataLoader]:
    X, y = make_moons(12, noise=0.1, seed=seed)
    tg.manual_seed(seed + 4)
    model = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 2))
    return model, DataLoader(TensorDataset(X, y), batch_size=4, shuffle=False)


def _reference_epoch(model: nn.Module, loader: DataLoader, loss_fn: Callable,
                     optimizer: Any, zero_grad: bool = True, step: bool = True) -> float:
    losses = []
    for inputs, targets in loader:
        if zero_grad:
            optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        if step:
            optimizer.step()
        losses.append(loss.item())
    return float(np.mean(losses))


def _trained(epoch_fn: Callable, epochs: int, seed: int = 7,
             **variant: bool) -> tuple[list, list[float]]:
    """Parameters and per-epoch losses after running ``epoch_fn`` on the tiny problem."""
    model, loader = _tiny_problem(seed)
    optimizer = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    losses = [epoch_fn(model, loader, loss_fn, optimizer, **variant) for _ in range(epochs)]
    return [to_numpy(p).astype(np.float64) for p in model.parameters()], losses


def check_train_epoch(train_epoch: Callable) -> Feedback:
    """Exercise 5.2: one epoch: zero_grad, forward, loss, backward, step; return the mean loss."""

    def make(epochs: int, seed: int = 7) -> Test:
        def run() -> None:
            expected_params, expected_losses = _trained(_reference_epoch, epochs, seed)
            got_params, got_losses = _trained(train_epoch, epochs, seed)
            for loss in got_losses:
                expect_true(isinstance(loss, (float, int)) and not isinstance(loss, bool),
                            f"train_epoch returned a {type(loss).__name__}, not a float",
                            hint="turn each batch loss into a number with loss.item()")
            same = all(np.allclose(g, e, rtol=1e-4, atol=1e-6)
                       for g, e in zip(got_params, expected_params))
            if not same:
                hint = "per batch: optimizer.zero_grad(), loss, loss.backward(), optimizer.step()"
                for variant, text in (({"zero_grad": False}, "call optimizer.zero_grad() before "
                                       "each backward: otherwise gradients pile up across batches"),
                                      ({"step": False}, "call optimizer.step() after backward: "
                                       "the parameters never changed")):
                    params, _ = _trained(_reference_epoch, epochs, seed, **variant)
                    if all(np.allclose(g, p, rtol=1e-4, atol=1e-6)
                           for g, p in zip(got_params, params)):
                        hint = text
                raise Mismatch("the parameters after training differ from the expected ones",
                               expected_params[-1], got_params[-1], hint)
            expect_close(got_losses, expected_losses, what="mean losses per epoch",
                         rtol=1e-4, atol=1e-6,
                         hint="return the mean of the batch losses (loss.item()) over the epoch, "
                              "not the last batch's loss")
        data = "12 moons" if seed == 7 else "12 unseen random moons"
        return Test(f"a 2-4-2 network, {data} in batches of 4, SGD with momentum, "
                    f"{epochs} epoch(s)", run)

    unseen = int(unseen_rng().integers(1000, 2**31))
    return check("5.2", [make(1), make(3), make(2, unseen)], candidate=train_epoch,
                 solved="your loop trains exactly like the reference, epoch after epoch.")


def check_accuracy(accuracy: Callable) -> Feedback:
    """Exercise 5.3: the fraction of rows whose largest logit is the label."""
    cases = [
        ("3 samples, 2 classes", [[2.0, 1.0], [0.0, 3.0], [1.0, -1.0]], [0, 1, 1]),
        ("1 sample, 3 classes", [[0.1, 0.7, 0.2]], [1]),
        ("4 samples, all wrong", [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]], [1, 1, 0, 0]),
    ]
    rng = unseen_rng()
    for n, classes in ((int(rng.integers(5, 40)), 3), (int(rng.integers(5, 40)), 4)):
        logits = rng.normal(size=(n, classes)).round(3)
        labels = np.where(rng.random(n) < 0.6, logits.argmax(axis=1), rng.integers(0, classes, n))
        cases.append((f"{n} unseen random samples, {classes} classes", logits.tolist(),
                      labels.tolist()))

    def make(description: str, logits: list, labels: list) -> Test:
        def run() -> None:
            expected = float(np.mean(np.argmax(np.array(logits), axis=1) == np.array(labels)))
            got = accuracy(tg.tensor(logits), tg.tensor(labels))
            expect_true(isinstance(got, (float, int)) and not isinstance(got, bool),
                        f"accuracy returned a {type(got).__name__}, not a float",
                        hint="finish with .item() to get a Python number")
            expect_close(got, expected, what="accuracy",
                         hint="argmax over dim=1, compare with the labels, then take the mean "
                              "of the matches as floats")
        return Test(description, run)

    return check("5.3", [make(*c) for c in cases], candidate=accuracy,
                 solved="you can measure how often the model is right.")


# --- 5.4 and 5.5: an optimizer's step, plugged into optim.sgd_step / optim.adam_step ---------

def _sgd_trajectory(params: list, grads: list, lr: float, momentum: float, slip: str = "") -> list:
    """Each parameter after SGD with momentum over ``grads`` (numpy); ``slip`` replays a
    usual mistake: "ema", "not kept", "twice", "ascent"."""
    params, buffers = [p.copy() for p in params], [None] * len(params)
    for step_grads in grads:
        for i, g in enumerate(step_grads):
            b = buffers[i]
            if slip == "ema":
                b = g.copy() if b is None else momentum * b + (1 - momentum) * g
            else:
                b = g.copy() if b is None or slip == "not kept" else momentum * b + g
            buffers[i] = b
            update = g + momentum * b if slip == "twice" else b
            params[i] = params[i] + lr * update if slip == "ascent" else params[i] - lr * update
    return params


def _adam_trajectory(params: list, grads: list, lr: float, betas: tuple, eps: float,
                     slip: str = "") -> list:
    """Each parameter after Adam over ``grads`` (numpy); ``slip`` replays a usual mistake:
    "no bias correction", "eps inside the root", "step not kept", "no square", "step from 0",
    "no eps"."""
    beta1, beta2 = betas
    params = [p.copy() for p in params]
    m, v = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    with np.errstate(all="ignore"):  # (a slip can take the root of a negative number)
        return _adam_steps(params, grads, lr, betas, eps, slip, m, v)


def _adam_steps(params: list, grads: list, lr: float, betas: tuple, eps: float, slip: str,
                m: list, v: list) -> list:
    beta1, beta2 = betas
    for t, step_grads in enumerate(grads, start=1):
        t = 1 if slip == "step not kept" else t - 1 if slip == "step from 0" else t
        for i, g in enumerate(step_grads):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * (g if slip == "no square" else g * g)
            m_hat, v_hat = m[i] / (1 - beta1**t), v[i] / (1 - beta2**t)
            if slip == "no bias correction":
                m_hat, v_hat = m[i], v[i]
            root = np.sqrt(v_hat + eps) if slip == "eps inside the root" else \
                np.sqrt(v_hat) + (0.0 if slip == "no eps" else eps)
            params[i] = params[i] - lr * m_hat / root
    return params


_SLIP_HINTS = {
    "ema": "PyTorch's momentum adds the whole gradient: b ← momentum·b + g, not "
           "momentum·b + (1 − momentum)·g",
    "not kept": "the buffer must survive between steps: store it in state "
                "(state['momentum_buffer'] = b) and read it back next time",
    "twice": "momentum enters once: θ ← θ − lr·b (adding momentum·b to g again is Nesterov's "
             "variant, not this one)",
    "ascent": "the sign: step against the gradient, θ ← θ − lr·b",
    "no bias correction": "bias correction is missing: divide m by (1 − β1ᵗ) and v by "
                          "(1 − β2ᵗ), with t the step number (1 at the first step)",
    "eps inside the root": "eps goes outside the square root: √v̂ + eps",
    "step not kept": "count the steps in state['step'] (1, 2, 3, ...): the bias correction "
                     "depends on it",
    "no square": "the second moment averages g², not g",
    "no eps": "eps is missing: add group['eps'] to √v̂ (it keeps the step finite where v̂ is 0)",
    "step from 0": "the first step is t = 1: with t = 0, 1 − β1ᵗ is 0 and the bias correction "
                   "divides by zero (increment state['step'] before using it)",
}


def _step_case(strategies):
    """(number of parameters, shape, dtype, steps, lr, momentum or betas, Adam's eps)."""
    shape = strategies.lists(strategies.integers(1, 4), max_size=3).map(tuple)
    return strategies.tuples(strategies.integers(1, 2), shape,
                             strategies.sampled_from(["float64", "float32"]),
                             strategies.integers(1, 5), strategies.sampled_from([0.5, 0.1, 0.01]),
                             strategies.sampled_from([0.0, 0.5, 0.9, 0.99]),
                             strategies.sampled_from([0.1, 1e-3, 1e-8]))  # (shrinks to 0.1)


def _run_steps(step: Callable, case: tuple, group: dict) -> tuple[list, list, list]:
    """Run ``step`` on the case's parameters and gradients as an optimizer would; returns
    the starting parameters, the gradients and the parameters after the learner's steps."""
    n_params, shape, dtype, n_steps = case[:4]
    rng = np.random.default_rng(len(str(case[:6])))  # (eps, Adam's only, left out)
    start = [rng.normal(size=shape) for _ in range(n_params)]
    grads = [[rng.normal(size=shape) for _ in range(n_params)] for _ in range(n_steps)]
    params = [tg.tensor(p, dtype=getattr(tg, dtype)) for p in start]
    states: list[dict] = [{} for _ in params]
    part = "optim.adam_step" if "betas" in group else "optim.sgd_step"
    with tg.no_grad(), np.errstate(all="ignore"):
        for step_grads in grads:
            for i, g in enumerate(step_grads):
                with written_by_the_learner(part, "step"):
                    new = step(params[i], tg.tensor(g, dtype=getattr(tg, dtype)), states[i],
                               group)
                expect_true(isinstance(new, tg.Tensor) and tuple(new.shape) == shape,
                            f"your step returned {type(new).__name__ if not isinstance(new, tg.Tensor) else 'shape ' + str(list(new.shape))}"
                            f" for a parameter of shape {list(shape)}",
                            hint="return the parameter's new value, a tensor shaped like param")
                params[i] = new.detach().clone()
    return start, grads, [to_numpy(p).astype(np.float64) for p in params]


def _expect_same_again(step: Callable, case: tuple, group: dict, got: list, kept: str) -> None:
    """The same steps again from fresh states give the same parameters: nothing is kept
    outside ``state`` (a global buffer would mix parameters and runs)."""
    again = _run_steps(step, case, group)[2]
    expect_true(all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, again)),
                "the same steps from the same start gave different parameters the second time",
                hint=f"keep the {kept} in state (one dict per parameter, empty at the first "
                     "step), not in a variable outside the function")


def _expect_trajectory(got: list, expected: list, slips: dict, described: str,
                       hint: str, dtype: str) -> None:
    tolerance = 2e-4 if dtype == "float32" else 1e-9
    def close(a: list, b: list) -> bool:
        return all(np.allclose(x, y, rtol=tolerance, atol=tolerance, equal_nan=True)
                   for x, y in zip(a, b))

    for slip, replay in slips.items():
        if not close(got, expected) and close(got, replay):
            hint = _SLIP_HINTS[slip]
            break
    for i, (g, e) in enumerate(zip(got, expected)):
        expect_close(g, e, what=f"parameter {i} after {described}", hint=hint,
                     rtol=tolerance, atol=tolerance)


def _trains_the_chapters_model(part: str, step: Callable, make_optimizer: Callable) -> Test:
    """The chapter's model trained with the learner's step plugged in, against the engine's."""
    def run() -> None:
        def train() -> list:
            model, loader = _tiny_problem()
            optimizer = make_optimizer(model.parameters())
            for _ in range(3):
                _reference_epoch(model, loader, nn.CrossEntropyLoss(), optimizer)
            return [to_numpy(p).astype(np.float64) for p in model.parameters()]

        expected = train()
        with plugged_workload(part, step, "the model trained") as plugged_part:
            got = train()
        expect_true(plugged_part.calls == 3 * 3 * 4, f"the optimizer called your step "
                    f"{plugged_part.calls} times in 9 steps of a model with 4 parameters (36 "
                    "expected)", hint="one call per parameter per step")
        for i, (g, e) in enumerate(zip(got, expected)):
            expect_close(g, e, what=f"parameter {i} after 3 epochs with your step",
                         rtol=1e-4, atol=1e-5)
    return Test(f"the chapter's model, trained for 3 epochs with {part} plugged in", run)


def _step_tests(random: Callable, shown: str, varied: str, part: str, step: Callable,
                make_optimizer: Callable) -> list[Test]:
    """The case the chapter shows, random ones, then the chapter's model trained with it."""
    return [Test(f"3 steps of one parameter of shape (2,), lr=0.1, {shown}",
                 lambda: random((1, (2,), "float64", 3, 0.1, 0.9, 1e-8))),
            property_test(f"random shapes, steps, learning rates and {varied}, two parameters "
                          "at once", _step_case, random),
            _trains_the_chapters_model(part, step, make_optimizer)]


def check_sgd_momentum_step(sgd_momentum_step: Callable) -> Feedback:
    """Exercise 5.4: SGD with momentum, one parameter's update; then the model trains with it."""
    def random(case: tuple) -> None:
        lr, momentum, dtype = case[4], case[5], case[2]
        group = dict(lr=lr, momentum=momentum, dampening=0.0, weight_decay=0.0,
                     nesterov=False, maximize=False)
        start, grads, got = _run_steps(sgd_momentum_step, case, group)
        _expect_same_again(sgd_momentum_step, case, group, got, "momentum buffer")
        slips = {slip: _sgd_trajectory(start, grads, lr, momentum, slip) for slip in
                 ("ema", "not kept", "twice", "ascent")}
        _expect_trajectory(got, _sgd_trajectory(start, grads, lr, momentum), slips,
                           f"{len(grads)} step(s), lr={lr}, momentum={momentum}",
                           "b ← g at the first step, then b ← momentum·b + g; θ ← θ − lr·b",
                           dtype)

    tests = _step_tests(random, "momentum=0.9", "momenta", "optim.sgd_step", sgd_momentum_step,
                        lambda p: optim.SGD(p, lr=0.5, momentum=0.9))
    return check("5.4", tests, candidate=sgd_momentum_step,
                 solved="tg.optim.SGD trained the chapter's model with your momentum step.")


def check_adam_step(adam_step: Callable) -> Feedback:
    """Exercise 5.5: Adam's update for one parameter; then the model trains with it."""
    def random(case: tuple) -> None:
        lr, dtype, eps = case[4], case[2], case[6]
        betas = (0.9, 0.999) if case[5] in (0.0, 0.9) else (case[5], 0.99)
        group = dict(lr=lr, betas=betas, eps=eps, weight_decay=0.0, amsgrad=False,
                     maximize=False)
        start, grads, got = _run_steps(adam_step, case, group)
        _expect_same_again(adam_step, case, group, got, "step count and moments")
        slips = {slip: _adam_trajectory(start, grads, lr, betas, eps, slip) for slip in
                 ("no bias correction", "eps inside the root", "step not kept", "step from 0",
                  "no square", "no eps")}
        _expect_trajectory(got, _adam_trajectory(start, grads, lr, betas, eps), slips,
                           f"{len(grads)} step(s), lr={lr}, betas={betas}, eps={eps}",
                           "m ← β1·m + (1 − β1)·g; v ← β2·v + (1 − β2)·g²; "
                           "θ ← θ − lr·m̂/(√v̂ + eps) with m̂ = m/(1 − β1ᵗ), v̂ = v/(1 − β2ᵗ)",
                           dtype)

    tests = _step_tests(random, "betas=(0.9, 0.999)", "betas and eps", "optim.adam_step", adam_step,
                        lambda p: optim.Adam(p, lr=0.05))
    return check("5.5", tests, candidate=adam_step,
                 solved="tg.optim.Adam trained the chapter's model with your Adam step.")

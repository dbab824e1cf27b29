"""Checkers for chapter 5, *Modules and optimizers*: a module, a training epoch, accuracy."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad import nn, optim
from teachgrad.data import DataLoader, TensorDataset, make_moons

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

"""Checkers for chapter 3, *Autograd*: gradients by hand, accumulation, a manual training loop."""
from __future__ import annotations

from typing import Callable

import numpy as np

import teachgrad as tg

from .core import (Feedback, Test, check, counting_backward, expect_close, expect_true,
                   numerical_gradient, to_numpy, unseen_rng)


def _unseen_seed() -> int:
    return int(unseen_rng().integers(2**31))


def _mse(X: np.ndarray, y: np.ndarray, w: np.ndarray, b: float) -> float:
    return float(np.mean((X @ w + b - y) ** 2))


def _problem(seed: int, n: int, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, d)), rng.normal(size=n), rng.normal(size=d),
            float(rng.normal()))


def check_linear_mse_grads(linear_mse_grads: Callable) -> Feedback:
    """Exercise 3.1: gradients of mean((X @ w + b - y)**2) by hand, in numpy."""
    problems = [("4 samples, 3 features", 0, 4, 3), ("1 sample, 2 features", 1, 1, 2),
                ("5 samples, 1 feature", 2, 5, 1),
                ("unseen random data: 7 samples, 4 features", _unseen_seed(), 7, 4)]

    def make(description: str, seed: int, n: int, d: int) -> Test:
        X, y, w, b = _problem(seed, n, d)

        def run() -> None:
            expected_w = numerical_gradient(lambda v: _mse(X, y, v, b), w)
            expected_b = numerical_gradient(lambda v: _mse(X, y, w, float(v)), np.array(b))
            got = linear_mse_grads(X.copy(), y.copy(), w.copy(), b)
            expect_true(isinstance(got, tuple) and len(got) == 2,
                        f"return a pair (grad_w, grad_b), not a {type(got).__name__}",
                        hint="end with `return grad_w, grad_b`")
            grad_w, grad_b = (np.asarray(to_numpy(g), dtype=np.float64) for g in got)
            expect_close(grad_w, expected_w, what="grad_w", rtol=1e-4, atol=1e-6,
                         hint=_hint(grad_w, expected_w, n))
            expect_close(grad_b, expected_b, what="grad_b", rtol=1e-4, atol=1e-6,
                         hint=_hint(grad_b, expected_b, n)
                         + " (b is added to every sample, so its gradient sums over samples)")
        return Test(description, run)

    return check("3.1", [make(*p) for p in problems], candidate=linear_mse_grads,
                 solved="your hand-derived gradients match finite differences.")


def _hint(got: np.ndarray, expected: np.ndarray, n: int) -> str:
    """Name the usual slip when the answer is off by a telling factor."""
    if got.shape == expected.shape and np.any(expected != 0):
        if np.allclose(got * 2, expected, rtol=1e-3):
            return "d(u²)/du = 2u: a factor 2 is missing"
        if n > 1 and np.allclose(got, expected * n, rtol=1e-3):
            return "the loss is a mean: divide the sum over samples by n"
        if np.allclose(got, -expected, rtol=1e-3):
            return "the sign is flipped: the residual is (X @ w + b - y)"
    return "chain rule: dL/dprediction = 2 (prediction - y) / n, then dprediction/dw = X"


def check_gradient_by_microbatches(gradient_by_microbatches: Callable) -> Feedback:
    """Exercise 3.2: accumulate the full-batch gradient over micro-batches."""
    cases = [("6 samples in micro-batches of 2", 3, 6, 2, 2),
             ("5 samples in micro-batches of 2 (the last one has 1 sample)", 4, 5, 3, 2),
             ("3 samples in one micro-batch of 3", 5, 3, 2, 3),
             ("unseen random data: 7 samples in micro-batches of 3", _unseen_seed(), 7, 2, 3)]

    def make(description: str, seed: int, n: int, d: int, size: int) -> Test:
        X, y, w0, _ = _problem(seed, n, d)

        def run() -> None:
            w = tg.tensor(w0, dtype=tg.float64, requires_grad=True)
            expected = numerical_gradient(lambda v: _mse(X, y, v, 0.0), w0)
            with counting_backward() as passes:
                got = gradient_by_microbatches(w, tg.tensor(X), tg.tensor(y), size)
            expect_true(got is not None, "your function returned None",
                        hint="return w.grad after the last backward()")
            n_chunks = -(-n // size)
            expect_true(passes[0] == n_chunks,
                        f"your code called backward() {passes[0]} time(s); {n} samples in "
                        f"micro-batches of {size} make {n_chunks} micro-batches, one backward() each",
                        hint="the point is to never hold the whole batch's graph: loop over "
                             "slices X[start:start + size], and call backward() on each slice's loss")
            got_np = np.asarray(to_numpy(got), dtype=np.float64)
            if got_np.shape == expected.shape and n_chunks > 1 and n % size == 0 \
                    and np.allclose(got_np, expected * n_chunks, rtol=1e-3):
                hint = ("each micro-batch's loss must be divided by the full batch size N, "
                        "not averaged over the micro-batch")
            else:
                hint = ("loss of a micro-batch = sum of its squared errors / N; "
                        "call backward() once per micro-batch and let .grad add up")
            expect_close(got_np, expected, what="accumulated gradient", hint=hint, rtol=1e-4)
        return Test(description, run)

    return check("3.2", [make(*c) for c in cases], candidate=gradient_by_microbatches,
                 solved="backward() on each micro-batch adds up to the full-batch gradient.")


def _reference_descent(X: np.ndarray, y: np.ndarray, steps: int, lr: float,
                       zero_grads: bool = True) -> tuple[np.ndarray, float]:
    """Gradient descent on mean squared error from w = 0, b = 0.

    With ``zero_grads=False`` it reproduces the usual bug: gradients never reset.
    """
    n, d = X.shape
    w, b = np.zeros(d), 0.0
    grad_w_total, grad_b_total = np.zeros(d), 0.0
    for _ in range(steps):
        residual = X @ w + b - y
        grad_w, grad_b = 2 * X.T @ residual / n, 2 * residual.sum() / n
        if zero_grads:
            grad_w_total, grad_b_total = grad_w, grad_b
        else:
            grad_w_total, grad_b_total = grad_w_total + grad_w, grad_b_total + grad_b
        w, b = w - lr * grad_w_total, b - lr * grad_b_total
    return w, b


def check_train_linear(train_linear: Callable) -> Feedback:
    """Exercise 3.3: gradient descent by hand: backward, update under no_grad, zero the grads."""
    cases = [("4 samples, 2 features, 3 steps, lr=0.1", 6, 4, 2, 3, 0.1),
             ("6 samples, 3 features, 5 steps, lr=0.05", 7, 6, 3, 5, 0.05),
             ("2 samples, 1 feature, 1 step, lr=0.5", 8, 2, 1, 1, 0.5),
             ("unseen random data: 5 samples, 2 features, 4 steps, lr=0.1",
              _unseen_seed(), 5, 2, 4, 0.1)]

    def make(description: str, seed: int, n: int, d: int, steps: int, lr: float) -> Test:
        X, y, _, _ = _problem(seed, n, d)

        def run() -> None:
            expected_w, expected_b = _reference_descent(X, y, steps, lr)
            with counting_backward() as passes:
                got = train_linear(tg.tensor(X, dtype=tg.float32),
                                   tg.tensor(y, dtype=tg.float32), steps, lr)
            expect_true(passes[0] == steps,
                        f"your code called backward() {passes[0]} time(s) in {steps} step(s)",
                        hint="the gradients must come from autograd: one loss.backward() per "
                             "step, not a formula in numpy")
            expect_true(isinstance(got, tuple) and len(got) == 2,
                        "return the pair (w, b)", hint="end with `return w, b`")
            w, b = got
            expect_true(isinstance(w, tg.Tensor) and w.is_leaf and w.requires_grad,
                        "w should still be a leaf tensor that requires grad after training",
                        hint="update in place (w -= lr * w.grad) inside `with tg.no_grad():`, "
                             "so w stays the same parameter")
            forgot_w, _ = _reference_descent(X, y, steps, lr, zero_grads=False)
            got_w = np.asarray(to_numpy(w), dtype=np.float64)
            hint = "each step: loss, backward, update under no_grad, then zero the grads"
            if steps > 1 and np.allclose(got_w, forgot_w, rtol=1e-3, atol=1e-4):
                hint = ("the gradients add up across steps: zero them after each update "
                        "(w.grad.zero_() or w.grad = None)")
            expect_close(got_w, expected_w, what="trained w", hint=hint, rtol=1e-3, atol=1e-4)
            expect_close(b, np.array([expected_b]), what="trained b (shape [1])", hint=hint,
                         rtol=1e-3, atol=1e-4)
        return Test(description, run,
                    hint="update the parameters inside `with tg.no_grad():`")

    return check("3.3", [make(*c) for c in cases], candidate=train_linear,
                 solved="you trained a model with nothing but backward() and no_grad updates.")

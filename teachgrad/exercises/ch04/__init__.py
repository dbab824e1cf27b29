"""Checkers for chapter 4, *Custom Functions*: a stable sigmoid and a linear layer's backward."""
from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

import teachgrad as tg

from ..core import (Feedback, Mismatch, Test, check, expect_close, expect_true, numerical_gradient,
                   to_numpy, unseen_rng, watching_ops)


def _stable_sigmoid(x: np.ndarray) -> np.ndarray:
    z = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + z), z / (1 + z))


def _forward_hint(got: np.ndarray, expected: np.ndarray) -> str:
    """Name the usual slip: the branch point moved, so some x get sigmoid(-x)."""
    wrong = ~np.isclose(got, expected, rtol=1e-5, atol=1e-7)
    if got.shape == expected.shape and wrong.any() \
            and np.allclose(got[wrong], 1 - expected[wrong], rtol=1e-4, atol=1e-6):
        return ("some x got sigmoid(-x): the branch must switch exactly at x = 0, "
                "1/(1+z) for x >= 0 and z/(1+z) for x < 0")
    return "sigmoid(x) = 1 / (1 + exp(-x)); keep it finite for large |x|"


def _is_function_class(candidate: Any) -> bool:
    return isinstance(candidate, type) and issubclass(candidate, tg.autograd.Function)


def _not_a_function(candidate: Any) -> Test:
    def run() -> None:
        raise Mismatch(f"expected a subclass of tg.autograd.Function, got {candidate!r}",
                       hint="define `class ...(tg.autograd.Function):` and pass the class itself",
                       show_values=False)
    return Test("the class you passed", run)


def _apply_quietly(fn: Callable, *args: Any) -> Any:
    """Run the learner's code, turning numpy overflow warnings into a clear failure."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return fn(*args)


def _grad_of_sum(fn: Callable, *inputs: tg.Tensor) -> list:
    out = _apply_quietly(fn, *inputs)
    _apply_quietly(out.sum().backward)
    return out, [t.grad for t in inputs]


def check_sigmoid_function(Sigmoid: type) -> Feedback:
    """Exercise 4.1: sigmoid as one Function: values, stability, backward from the saved output."""
    if not _is_function_class(Sigmoid):
        return check("4.1", [_not_a_function(Sigmoid)], candidate=Sigmoid, solved="")

    def values(xs: list[float], dtype: Any) -> Test:
        def run() -> None:
            x = tg.tensor(xs, dtype=dtype, requires_grad=True)
            try:
                y, (grad,) = _grad_of_sum(Sigmoid.apply, x)
            except RuntimeWarning as warning:
                raise Mismatch(f"numpy warned: {warning}", hint=(
                    "exp(-x) overflows for large negative x: compute exp(-|x|), which is "
                    "at most 1, and pick 1/(1+z) or z/(1+z) with tg.where"), show_values=False)
            expected = _stable_sigmoid(np.array(xs))
            expect_close(y, expected, what="forward output", rtol=1e-5, atol=1e-7,
                         hint=_forward_hint(np.asarray(to_numpy(y), dtype=np.float64), expected))
            expect_true(y.grad_fn is not None and y.grad_fn.function is Sigmoid,
                        "the output was not made by your Function",
                        hint="return the result of forward; call it through Sigmoid.apply(x)")
            expect_close(grad, expected * (1 - expected), what="gradient", rtol=1e-5, atol=1e-7,
                         hint="d sigmoid/dx = y * (1 - y) with y the saved output, times the "
                              "incoming grad")
        return Test(f"x = {xs} ({dtype.name})", run)

    def finite_differences() -> Test:
        x0 = np.random.default_rng(41).normal(size=(2, 3)) * 3

        def run() -> None:
            x = tg.tensor(x0, dtype=tg.float64, requires_grad=True)
            _, (grad,) = _grad_of_sum(Sigmoid.apply, x)
            expected = numerical_gradient(lambda v: float(_stable_sigmoid(v).sum()), x0)
            expect_close(grad, expected, what="gradient", rtol=1e-5, atol=1e-8,
                         hint="the backward must multiply the incoming grad by y * (1 - y)")
        return Test("a random 2 x 3 float64 x, against finite differences", run)

    rng = unseen_rng()
    unseen = (rng.normal(size=5) * 30).round(2).tolist()
    # Near the branch point both forms must meet: small |x| of both signs (a branch moved
    # to x >= 1 or x >= -1 picks the wrong form there), and values just past +-1.
    near_zero = [-1.001, -0.999, -0.5, -1e-3, 1e-3, 0.5, 0.999, 1.001]
    unseen_near_zero = np.sort(rng.uniform(-2, 2, size=6)).round(3).tolist()
    tests = [one_node_inside(Sigmoid, [-3.0, 0.0, 2.5]),
             values([-3.0, 0.0, 2.5], tg.float32), values([-100.0, 100.0], tg.float32),
             values(near_zero, tg.float32), values(unseen_near_zero, tg.float64),
             values([-800.0, 800.0], tg.float64), values(unseen, tg.float64),
             one_node_inside(Sigmoid, [-100.0, 100.0]), one_node_inside(Sigmoid, [-800.0, 800.0]),
             finite_differences()]
    return check("4.1", tests, candidate=Sigmoid,
                 solved="one node, stable for any x, and its backward reuses the forward's output.")


_LIBRARY_SIGMOID = "teachgrad.ops"


def one_node_inside(Sigmoid: type, xs: list[float]) -> Test:
    """Sigmoid.apply(x) is one node, built from tensor operations that all stay finite."""
    def run() -> None:
        x = tg.tensor(xs, dtype=tg.float32 if max(map(abs, xs)) < 200 else tg.float64,
                      requires_grad=True)
        with warnings.catch_warnings(), watching_ops() as ops:
            warnings.simplefilter("ignore", RuntimeWarning)  # judged by the values below
            Sigmoid.apply(x)
        inside = [op for op in ops if op.depth > 0]
        library = [op for op in inside if op.function.__name__ == "Sigmoid"
                   and op.function.__module__.startswith(_LIBRARY_SIGMOID)]
        expect_true(not library, "your forward calls the library's sigmoid (tg.sigmoid)",
                    hint="the exercise is to build sigmoid yourself from tg.exp, tg.where and "
                         "arithmetic, so that it becomes one node with your own backward")
        expect_true(bool(inside), "your forward ran no teachgrad operations at all",
                    hint="compute with tensor operations (tg.exp, tg.where, +, /) on x, not with "
                         "numpy on x.numpy()")
        for op in inside:
            for out in op.outputs:
                values = np.asarray(to_numpy(out), dtype=np.float64)
                expect_true(bool(np.all(np.isfinite(values))),
                            f"inside your forward, {op.function.__name__} gave inf or nan: "
                            "a value overflowed on the way (even if the final answer looks "
                            "right, numpy warned, and a warning silenced is still an overflow)",
                            hint="exp(-x) overflows for large negative x: compute "
                                 "z = exp(-|x|), which is at most 1, then pick 1/(1+z) or "
                                 "z/(1+z) with tg.where")
    return Test(f"x = {xs}: what runs inside your forward", run,
                hint="call it as Sigmoid.apply(x)")


def check_linear_function(LinearFunction: type) -> Feedback:
    """Exercise 4.2: ``LinearFunction.apply(x, W, b) = x @ W.T + b`` with all three gradients."""
    if not _is_function_class(LinearFunction):
        return check("4.2", [_not_a_function(LinearFunction)], candidate=LinearFunction,
                     solved="")
    shapes = [(3, 4, 2), (1, 1, 1), (5, 2, 3)]
    fixed = list(shapes)
    hints = {
        "x": "grad_x = grad @ W: each input feature reaches every output through W",
        "W": "grad_W = grad.T @ x, shaped like W (out_features, in_features)",
        "b": "grad_b = grad.sum(dim=0): b is added to every row of the batch",
    }

    def make(batch: int, n_in: int, n_out: int) -> Test:
        rng = (np.random.default_rng(batch * 100 + n_in * 10 + n_out)
               if (batch, n_in, n_out) in fixed else unseen)
        x0 = rng.normal(size=(batch, n_in))
        W0 = rng.normal(size=(n_out, n_in))
        b0 = rng.normal(size=n_out)
        weights = rng.normal(size=(batch, n_out))  # loss = sum(weights * output): uneven grads

        def loss_of(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> float:
            return float(np.sum(weights * (x @ W.T + b)))

        def run() -> None:
            x, W, b = (tg.tensor(a, dtype=tg.float64, requires_grad=True) for a in (x0, W0, b0))
            out = LinearFunction.apply(x, W, b)
            expect_close(out, x0 @ W0.T + b0, what="forward output",
                         hint="forward returns x @ W.T + b")
            expect_true(out.grad_fn is not None and out.grad_fn.function is LinearFunction,
                        "the output was not made by your Function",
                        hint="call it through LinearFunction.apply(x, W, b)")
            _expect_gradient_shapes(LinearFunction, out, weights, {"x": x0, "W": W0, "b": b0})
            (out * tg.tensor(weights)).sum().backward()
            expected = {
                "x": numerical_gradient(lambda v: loss_of(v, W0, b0), x0),
                "W": numerical_gradient(lambda v: loss_of(x0, v, b0), W0),
                "b": numerical_gradient(lambda v: loss_of(x0, W0, v), b0),
            }
            for name, tensor in (("x", x), ("W", W), ("b", b)):
                expect_true(tensor.grad is not None, f"{name}.grad is None after backward",
                            hint="backward returns one gradient per input of forward: "
                                 "(grad_x, grad_W, grad_b)")
                expect_close(tensor.grad, expected[name], what=f"gradient of {name}",
                             rtol=1e-5, atol=1e-8, hint=hints[name])
        return Test(f"x of shape ({batch}, {n_in}), W of shape ({n_out}, {n_in}), "
                    f"b of shape ({n_out},)", run)

    def frozen_weights() -> Test:
        def run() -> None:
            x = tg.tensor([[1.0, 2.0]], dtype=tg.float64, requires_grad=True)
            W = tg.tensor([[3.0, -1.0]], dtype=tg.float64)  # no gradient wanted
            b = tg.tensor([0.5], dtype=tg.float64)
            LinearFunction.apply(x, W, b).sum().backward()
            expect_close(x.grad, [[3.0, -1.0]], what="gradient of x",
                         hint="when W and b need no gradient, still return grad_x (and None "
                              "or any gradient for the others)")
        return Test("only x requires grad (W and b are frozen)", run,
                    hint="check ctx.needs_input_grad, or compute all three gradients anyway")

    unseen = unseen_rng()
    shapes.append(tuple(int(v) for v in unseen.integers(2, 6, size=3)))
    return check("4.2", [make(*s) for s in shapes] + [frozen_weights()],
                 candidate=LinearFunction,
                 solved="your linear layer's backward matches finite differences for x, W and b.")


def _expect_gradient_shapes(LinearFunction: type, out: tg.Tensor, weights: np.ndarray,
                            inputs: dict[str, np.ndarray]) -> None:
    """Call the learner's backward directly: each gradient must have its input's shape.

    The engine would quietly sum a (batch, out) bias gradient down to (out,), so
    only a direct call shows whether backward itself summed over the batch.
    """
    grads = LinearFunction.backward(out.grad_fn.ctx, tg.tensor(weights, dtype=tg.float64))
    expect_true(isinstance(grads, tuple) and len(grads) == 3,
                "backward should return three gradients (grad_x, grad_W, grad_b), "
                f"got {type(grads).__name__}", hint="end backward with `return grad_x, grad_W, grad_b`")
    for (name, value), grad in zip(inputs.items(), grads):
        shape = tuple(getattr(grad, "shape", ()))
        if grad is not None and shape != value.shape:
            raise Mismatch(f"backward returned a gradient of {name} of shape {list(shape)}, but "
                           f"{name} has shape {list(value.shape)}",
                           hint=("b is added to every row of the batch, so its gradient sums "
                                 "the rows: grad.sum(dim=0)") if name == "b"
                           else "a gradient always has the shape of its input",
                           show_values=False)


# Exercises 4.3 and 4.4 (the engine's own formulas, written by the learner) live beside.
from .formulas import check_elementwise_backward, check_matmul_sum_backward  # noqa: E402,F401

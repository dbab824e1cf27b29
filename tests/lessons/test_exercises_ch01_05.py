"""The exercise checkers of chapters 1-5, and the framework under them.

For every checker: the reference solution from the chapter's own notebook
passes; the learner edition's stub of that same cell reports "not solved yet"
without raising; and typical wrong answers get feedback that names the input
that failed and gives the matching hint.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import teachgrad as tg
from teachgrad import nn, optim
from teachgrad.exercises import (Case, Feedback, Mismatch, Test, ch01, ch02, ch03, ch04, ch05,
                                 check, check_function, describe, expect_close,
                                 numerical_gradient)
from teachgrad.exercises.edition import learner_stub

from notebook_solutions import define, solution_source

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CHAPTERS = {
    1: "01_why_ml_systems.ipynb", 2: "02_tensors_and_devices.ipynb", 3: "03_autograd.ipynb",
    4: "04_custom_functions.ipynb", 5: "05_modules_and_optimizers.ipynb",
}


# --- loading the notebooks' own solution cells --------------------------------------------

def _solution_source(chapter: int, name: str) -> str:
    """The source of the `solution` cell of a chapter that defines ``name``."""
    return solution_source(CHAPTERS[chapter], name)


def _define(source: str, name: str):
    return define(source, name, {"tg": tg, "np": np, "nn": nn, "optim": optim})


def reference(chapter: int, name: str):
    return _define(_solution_source(chapter, name), name)


def stub(chapter: int, name: str):
    return _define(learner_stub(_solution_source(chapter, name)), name)


EXERCISES = [
    (1, "peak_fp32_tflops", ch01.check_peak_fp32_tflops, "1.1"),
    (1, "mma_flops", ch01.check_mma_flops, "1.2"),
    (2, "broadcast_shape", ch02.check_broadcast_shape, "2.1"),
    (2, "pairwise_sq_distances", ch02.check_pairwise_sq_distances, "2.2"),
    (2, "min_max_scale_on_device", ch02.check_min_max_scale_on_device, "2.3"),
    (3, "linear_mse_grads", ch03.check_linear_mse_grads, "3.1"),
    (3, "gradient_by_microbatches", ch03.check_gradient_by_microbatches, "3.2"),
    (3, "train_linear", ch03.check_train_linear, "3.3"),
    (4, "Sigmoid", ch04.check_sigmoid_function, "4.1"),
    (4, "LinearFunction", ch04.check_linear_function, "4.2"),
    (5, "TwoLayerNet", ch05.check_two_layer_net, "5.1"),
    (5, "train_epoch", ch05.check_train_epoch, "5.2"),
    (5, "accuracy", ch05.check_accuracy, "5.3"),
]
IDS = [e[3] for e in EXERCISES]


@pytest.mark.parametrize("chapter, name, checker, number", EXERCISES, ids=IDS)
def test_reference_solution_passes(chapter, name, checker, number, capsys):
    feedback = checker(reference(chapter, name))
    assert feedback.passed, feedback.message
    assert capsys.readouterr().out.startswith(f"✅ Exercise {number} solved: ")


@pytest.mark.parametrize("chapter, name, checker, number", EXERCISES, ids=IDS)
def test_learner_stub_is_not_solved_yet(chapter, name, checker, number, capsys):
    feedback = checker(stub(chapter, name))
    assert feedback.status == "not solved yet" and not feedback.passed
    assert capsys.readouterr().out == (
        f"⏳ Exercise {number} not solved yet: fill in the cell above\n")


def quiet_wrong(feedback: Feedback, failed_input: str, *hint_words: str) -> None:
    """A wrong answer: not passed, the failing input named, the hint says what it should."""
    assert feedback.status in ("wrong", "error"), feedback.message
    assert not feedback.passed
    assert feedback.failed_input == failed_input, feedback.message
    assert f"input:    {failed_input}" in feedback.message
    for word in hint_words:
        assert word in feedback.message, feedback.message


# --- chapter 1 -------------------------------------------------------------------------------

def test_peak_fp32_forgetting_the_multiply_add():
    feedback = ch01.check_peak_fp32_tflops(lambda sms, cores, ghz: sms * cores * ghz / 1000)
    quiet_wrong(feedback, "the notes' GPU: 72 SMs, 64 FP32 cores each, 1.77 GHz",
                "expected: 16.3123", "got:      8.15616", "counts as two")


def test_peak_fp32_in_gflops_instead_of_tflops():
    feedback = ch01.check_peak_fp32_tflops(lambda sms, cores, ghz: sms * cores * 2 * ghz)
    quiet_wrong(feedback, "the notes' GPU: 72 SMs, 64 FP32 cores each, 1.77 GHz",
                "divide by 1000")


def test_mma_flops_without_adding_c():
    feedback = ch01.check_mma_flops(lambda m, n, k: m * n * (2 * k - 1))
    quiet_wrong(feedback, "m=4, n=4, k=4", "expected: 128", "got:      112", "also adds C")


def test_async_finish_time_that_is_synchronous():
    feedback = ch01.check_async_finish_time(lambda h, d, n: n * (h + d))
    quiet_wrong(feedback, "host 1 ms, device 3 ms, 4 kernels (the device is the bottleneck)",
                "expected: 13", "got:      16", "synchronous time")


def test_reference_async_finish_time_matches_closed_form():
    for host, device, n in [(1, 3, 4), (3, 1, 4), (0.5, 2, 10), (2, 2, 7)]:
        expected = host + n * device if device >= host else n * host + device
        assert ch01.reference_async_finish_time(host, device, n) == pytest.approx(expected)


# --- chapter 2 -------------------------------------------------------------------------------

def test_broadcast_shape_aligned_from_the_left():
    def left_aligned(a, b):
        n = max(len(a), len(b))
        a, b = tuple(a) + (1,) * (n - len(a)), tuple(b) + (1,) * (n - len(b))
        return tuple(max(x, y) for x, y in zip(a, b))
    feedback = ch02.check_broadcast_shape(left_aligned)
    quiet_wrong(feedback, "shapes (2, 3) and (3,)", "expected: (2, 3)", "got:      (3, 3)",
                "from the right")


def test_broadcast_shape_that_never_raises():
    feedback = ch02.check_broadcast_shape(
        lambda a, b: tuple(np.broadcast_shapes(a, b)) if a != (3,) else (4,))
    quiet_wrong(feedback, "shapes (3,) and (4,)", "a ValueError was expected")


def test_pairwise_distances_returning_numpy():
    feedback = ch02.check_pairwise_sq_distances(
        lambda A, B: ((A.numpy()[:, None] - B.numpy()[None]) ** 2).sum(-1))
    quiet_wrong(feedback, "A of shape (3, 2) and B of shape (4, 2) on cpu",
                "raised RuntimeError", "use tensor operations only")


def test_pairwise_distances_without_new_axes():
    feedback = ch02.check_pairwise_sq_distances(lambda A, B: ((A - B) ** 2).sum(dim=-1))
    quiet_wrong(feedback, "A of shape (3, 2) and B of shape (4, 2) on cpu", "cannot broadcast")


def test_min_max_scale_with_item_copies_back():
    def with_item(x):
        x = x.to("cuda")
        low, high = x.min().item(), x.max().item()
        return (x - low) / (high - low)
    feedback = ch02.check_min_max_scale_on_device(with_item)
    quiet_wrong(feedback, "a random x of shape (2, 3)", "copied data back to the host 2 time(s)",
                ".item()")


def test_min_max_scale_on_the_cpu():
    feedback = ch02.check_min_max_scale_on_device(lambda x: (x - x.min()) / (x.max() - x.min()))
    quiet_wrong(feedback, "a random x of shape (2, 3)", "should be a tensor on cuda")


# --- chapter 3 -------------------------------------------------------------------------------

def test_linear_mse_grads_without_the_mean():
    def summed(X, y, w, b):
        residual = X @ w + b - y
        return 2 * X.T @ residual, 2 * residual.sum()
    quiet_wrong(ch03.check_linear_mse_grads(summed), "4 samples, 3 features",
                "wrong grad_w", "divide the sum over samples by n")


def test_linear_mse_grads_missing_the_factor_two():
    def half(X, y, w, b):
        residual = (X @ w + b - y) / X.shape[0]
        return X.T @ residual, residual.sum()
    quiet_wrong(ch03.check_linear_mse_grads(half), "4 samples, 3 features", "a factor 2")


def test_microbatches_averaged_per_microbatch():
    def averaged(w, X, y, size):
        for start in range(0, X.shape[0], size):
            ((X[start:start + size] @ w - y[start:start + size]) ** 2).mean().backward()
        return w.grad
    quiet_wrong(ch03.check_gradient_by_microbatches(averaged), "6 samples in micro-batches of 2",
                "full batch size N")


def test_train_linear_without_zeroing():
    def never_zeroed(X, y, steps, lr):
        w = tg.zeros(X.shape[1], requires_grad=True)
        b = tg.zeros(1, requires_grad=True)
        for _ in range(steps):
            ((X @ w + b - y) ** 2).mean().backward()
            with tg.no_grad():
                w -= lr * w.grad
                b -= lr * b.grad
        return w, b
    quiet_wrong(ch03.check_train_linear(never_zeroed), "4 samples, 2 features, 3 steps, lr=0.1",
                "zero them after each update")


def test_train_linear_updating_outside_no_grad():
    def recorded(X, y, steps, lr):
        w = tg.zeros(X.shape[1], requires_grad=True)
        b = tg.zeros(1, requires_grad=True)
        for _ in range(steps):
            ((X @ w + b - y) ** 2).mean().backward()
            w -= lr * w.grad
        return w, b
    feedback = ch03.check_train_linear(recorded)
    quiet_wrong(feedback, "4 samples, 2 features, 3 steps, lr=0.1", "raised RuntimeError",
                "with tg.no_grad()")
    assert feedback.status == "error"


# --- chapter 4 -------------------------------------------------------------------------------

class NaiveSigmoid(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = 1 / (1 + tg.exp(-x))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * (1 - y)


class SigmoidWithWrongBackward(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        z = tg.exp(-x.abs())
        y = tg.where(x >= 0, 1 / (1 + z), z / (1 + z))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


def test_sigmoid_that_overflows():
    quiet_wrong(ch04.check_sigmoid_function(NaiveSigmoid), "x = [-100.0, 100.0] (float32)",
                "overflow", "exp(-|x|)")


def test_sigmoid_with_a_wrong_backward():
    quiet_wrong(ch04.check_sigmoid_function(SigmoidWithWrongBackward),
                "x = [-3.0, 0.0, 2.5] (float32)", "wrong gradient", "y * (1 - y)")


def test_sigmoid_checker_given_a_function_not_a_class():
    feedback = ch04.check_sigmoid_function(tg.sigmoid)
    assert feedback.status == "wrong" and "subclass of tg.autograd.Function" in feedback.message


class LinearWithUnsummedBias(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x, W, b):
        ctx.save_for_backward(x, W)
        return x @ W.T + b

    @staticmethod
    def backward(ctx, grad):
        x, W = ctx.saved_tensors
        return grad @ W, grad.T @ x, grad[0]


def test_linear_function_with_a_wrong_bias_gradient():
    quiet_wrong(ch04.check_linear_function(LinearWithUnsummedBias),
                "x of shape (3, 4), W of shape (2, 4), b of shape (2,)",
                "wrong gradient of b", "grad.sum(dim=0)")


# --- chapter 5 -------------------------------------------------------------------------------

class NetWithoutRelu(nn.Module):
    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.first, self.second = nn.Linear(n_in, hidden), nn.Linear(hidden, n_out)

    def forward(self, x):
        return self.second(self.first(x))


class NetWithUnregisteredLayers(nn.Module):
    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.layers = [nn.Linear(n_in, hidden), nn.Linear(hidden, n_out)]  # a plain list

    def forward(self, x):
        return self.layers[1](tg.relu(self.layers[0](x)))


def test_two_layer_net_without_relu():
    quiet_wrong(ch05.check_two_layer_net(NetWithoutRelu), "TwoLayerNet(3, 5, 2) on a batch of 4",
                "apply the ReLU")


def test_two_layer_net_with_unregistered_layers():
    quiet_wrong(ch05.check_two_layer_net(NetWithUnregisteredLayers),
                "TwoLayerNet(3, 5, 2) on a batch of 4", "has 0 parameters, expected 32",
                "assign them to attributes")


def test_train_epoch_without_zero_grad():
    def no_zero_grad(model, loader, loss_fn, optimizer):
        losses = []
        for inputs, targets in loader:
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return sum(losses) / len(losses)
    quiet_wrong(ch05.check_train_epoch(no_zero_grad),
                "a 2-4-2 network, 12 moons in batches of 4, SGD with momentum, 1 epoch(s)",
                "call optimizer.zero_grad()")


def test_train_epoch_returning_the_last_loss():
    train_epoch = reference(5, "train_epoch")

    def last_loss(model, loader, loss_fn, optimizer):
        train_epoch(model, loader, loss_fn, optimizer)
        return 0.0
    quiet_wrong(ch05.check_train_epoch(last_loss),
                "a 2-4-2 network, 12 moons in batches of 4, SGD with momentum, 1 epoch(s)",
                "mean of the batch losses")


def test_accuracy_returning_a_tensor():
    quiet_wrong(ch05.check_accuracy(lambda logits, labels: (logits.argmax(dim=1) == labels)
                                    .float().mean()),
                "3 samples, 2 classes", "not a float", ".item()")


# --- the framework ---------------------------------------------------------------------------

def test_check_reports_the_first_failing_test_only(capsys):
    ran = []

    def passing():
        ran.append("first")

    def failing():
        ran.append("second")
        raise Mismatch("wrong value", 1.0, 2.0, "try again")

    def never():
        ran.append("third")

    feedback = check("9.9", [Test("a", passing), Test("b", failing), Test("c", never)],
                     solved="done")
    assert ran == ["first", "second"]
    assert feedback.tests_run == 2
    assert capsys.readouterr().out == (
        "❌ Exercise 9.9 not quite: wrong value\n"
        "   input:    b\n"
        "   expected: 1\n"
        "   got:      2\n"
        "   hint:     try again\n")


def test_check_never_raises_on_learner_errors():
    def crash():
        raise KeyError("boom")
    feedback = check("9.9", [Test("x = 1", crash, hint="look at the keys")], solved="", quiet=True)
    assert feedback.status == "error"
    assert feedback.message == ("❌ Exercise 9.9: your code raised KeyError: 'boom'\n"
                                "   input:    x = 1\n"
                                "   hint:     look at the keys")


@pytest.mark.parametrize("placeholder", [None, ...])
def test_an_unfilled_placeholder_is_not_solved_yet(placeholder):
    feedback = check_function("9.9", placeholder, [Case("x", (1,), 1)], solved="", quiet=True)
    assert feedback.status == "not solved yet"


def test_check_function_rejects_a_called_function():
    feedback = check_function("9.9", 42, [Case("x", (1,), 1)], solved="", quiet=True)
    assert feedback.status == "error" and "Pass the function itself" in feedback.message


def test_check_function_with_tensors_and_exact_values():
    cases = [Case("x = [1, 2]", (tg.tensor([1.0, 2.0]),), np.array([2.0, 4.0]))]
    assert check_function("9.9", lambda x: x * 2, cases, solved="", quiet=True).passed
    wrong = check_function("9.9", lambda x: x * 3, cases, solved="", quiet=True)
    assert "expected: [2., 4.] (shape [2])" in wrong.message
    assert "got:      [3., 6.] (shape [2])" in wrong.message
    exact = [Case("n = 3", (3,), 6)]
    assert not check_function("9.9", lambda n: 6.5, exact, solved="", exact=True, quiet=True).passed


def test_expect_close_names_shape_and_non_finite_problems():
    with pytest.raises(Mismatch, match=r"wrong shape of the value: expected \[2\], got \[3\]"):
        expect_close(np.zeros(3), np.zeros(2))
    with pytest.raises(Mismatch, match="contains inf or nan"):
        expect_close(np.array([np.nan]), np.array([1.0]))
    with pytest.raises(Mismatch, match="returned None"):
        expect_close(None, 1.0)


def test_describe_is_short_and_deterministic():
    assert describe(tg.tensor([1.5, 2.0])) == "[1.5, 2. ] (shape [2])"
    assert describe(0.1 + 0.2) == "0.3"
    assert describe((1, 2)) == "(1, 2)"
    assert describe(object()) == "object"  # never a repr with a memory address


def test_numerical_gradient_of_a_quadratic():
    x = np.array([1.0, -2.0, 0.5])
    assert np.allclose(numerical_gradient(lambda v: float((v ** 2).sum()), x), 2 * x)


def test_feedback_displays_nothing_more_in_a_notebook():
    feedback = check("9.9", [], solved="ok", quiet=True)
    assert feedback.passed and bool(feedback) and str(feedback) == "✅ Exercise 9.9 solved: ok"
    assert feedback._ipython_display_() is None


# --- the learner edition ---------------------------------------------------------------------

def test_learner_stub_keeps_signatures_and_docstrings():
    source = ('import math\n\n'
              'def area(r):\n    """Area of a circle."""\n    return math.pi * r ** 2\n\n'
              'class Twice(tg.autograd.Function):\n'
              '    @staticmethod\n    def forward(ctx, x):\n        return 2 * x\n\n'
              '    @staticmethod\n    def backward(ctx, grad): return 2 * grad\n')
    assert learner_stub(source) == (
        'import math\n\n'
        'def area(r):\n    """Area of a circle."""\n'
        '    # your code here\n    raise NotImplementedError("fill in area")\n\n'
        'class Twice(tg.autograd.Function):\n'
        '    @staticmethod\n    def forward(ctx, x):\n'
        '        # your code here\n        raise NotImplementedError("fill in forward")\n\n'
        '    @staticmethod\n    def backward(ctx, grad):\n'
        '        # your code here\n        raise NotImplementedError("fill in backward")')

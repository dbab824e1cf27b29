"""Wrong answers to the exercises of chapters 1-5, each rejected with feedback that names it.

Every exercise gets at least three realistic wrong answers here or in
tests/lessons/test_exercises_ch01_05.py: the slips learners make (wrong sign, off by
one, a missing zero_grad) and the shortcuts that skip the method the exercise
teaches (a lookup table for the visible cases, numpy wrapped in a tensor, one
backward() for the whole batch). Each checker also tests inputs drawn afresh
on every run, so a table keyed on the inputs a learner has seen cannot pass.
"""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad import nn
from teachgrad.exercises import ch01, ch02, ch03, ch04, ch05
from teachgrad.exercises.core import Feedback
from teachgrad.exercises.edition import learner_stub

from test_exercises_ch01_05 import NetWithoutRelu, _solution_source, reference


def rejected(feedback: Feedback, *words: str) -> None:
    """Not passed, and the message contains every one of ``words``."""
    assert feedback.status in ("wrong", "error"), feedback.message
    for word in words:
        assert word in feedback.message, feedback.message


def lookup_table(chapter: int, name: str, checker, *, key=lambda *args: args, right=None):
    """A learner's table of the answers to the inputs the checker shows (0 otherwise).

    It records the reference answer for every input the checker tries on one
    run, then answers from the table on a second run, whose unseen inputs differ.
    """
    right = right or reference(chapter, name)
    table = {}

    def recording(*args):
        table[key(*args)] = answer = right(*args)
        return answer

    checker(recording)

    def from_table(*args):
        return table.get(key(*args), 0.0)
    return from_table


# --- chapter 1 -------------------------------------------------------------------------------

def test_peak_fp32_lookup_table_fails_on_an_unseen_gpu():
    table = lookup_table(1, "peak_fp32_tflops", ch01.check_peak_fp32_tflops)
    rejected(ch01.check_peak_fp32_tflops(table), "a GPU you have not seen", "wrong peak TFLOP/s")


def test_peak_fp32_in_petaflops():
    rejected(ch01.check_peak_fp32_tflops(lambda sms, cores, ghz: sms * cores * 2 * ghz / 1e6),
             "72 SMs", "wrong peak TFLOP/s", "expected: 16.3123")


def test_mma_flops_counting_only_multiplications():
    rejected(ch01.check_mma_flops(lambda m, n, k: m * n * k), "m=4, n=4, k=4",
             "each of the k products is also summed in")


def test_mma_flops_lookup_table():
    table = lookup_table(1, "mma_flops", ch01.check_mma_flops)
    rejected(ch01.check_mma_flops(table), "wrong number of FLOPs")


def test_async_finish_time_at_the_slower_rate_only():
    rejected(ch01.check_async_finish_time(lambda h, d, n: n * max(h, d)),
             "the device is the bottleneck", "the first kernel cannot start before the host enqueued it")


def test_async_finish_time_ignoring_a_slow_host():
    rejected(ch01.check_async_finish_time(lambda h, d, n: h + n * d if n else 0.0),
             "the host is the bottleneck", "wrong finish time")


def test_async_finish_time_lookup_table():
    # the exercise moved to chapter 10; its checker stays, with the reference answer here
    table = lookup_table(1, "async_finish_time", ch01.check_async_finish_time,
                         right=ch01.reference_async_finish_time)
    rejected(ch01.check_async_finish_time(table), "unseen", "wrong finish time")


# --- chapter 2 -------------------------------------------------------------------------------

def test_broadcast_shape_zipping_and_truncating():
    def zipped(a, b):
        return tuple(max(x, y) for x, y in zip(a[::-1], b[::-1]))[::-1]
    rejected(ch02.check_broadcast_shape(zipped), "shapes (2, 3) and (3,)", "wrong broadcast shape")


def test_broadcast_shape_lookup_table():
    right = reference(2, "broadcast_shape")
    seen = {}
    for a, b in [((3, 1), (1, 4)), ((2, 3), (3,)), ((5, 1, 4), (3, 1)), ((), (2, 2)),
                 ((1,), (8, 4, 3)), ((0, 1), (1, 5))]:
        seen[(a, b)] = right(a, b)

    def from_table(a, b):
        if (a, b) in seen:
            return seen[(a, b)]
        raise ValueError("not in my table")
    # the unseen pairs are random: a table fails on a broadcastable one, which comes up
    # in nearly every run; ten runs make a miss practically impossible
    results = [ch02.check_broadcast_shape(from_table) for _ in range(10)]
    assert not all(f.passed for f in results)


def test_pairwise_distances_by_python_loops():
    def loops(A, B):
        rows = [((A[i] - B) ** 2).sum(dim=-1) for i in range(A.shape[0])]
        return tg.stack(rows)
    rejected(ch02.check_pairwise_sq_distances(loops), "tensor operations for 3 x 4 distances",
             "no Python loops")


def test_pairwise_distances_computed_in_numpy_and_wrapped():
    def wrapped(A, B):
        a, b = A.detach().numpy(), B.detach().numpy()
        return tg.tensor(((a[:, None] - b[None]) ** 2).sum(-1), device=A.device)
    rejected(ch02.check_pairwise_sq_distances(wrapped), "no link to A and B", "grad_fn")


def test_pairwise_distances_without_squaring():
    rejected(ch02.check_pairwise_sq_distances(
        lambda A, B: (A[:, None, :] - B[None, :, :]).abs().sum(dim=-1)), "wrong distance matrix")


def test_min_max_scale_computed_on_the_host_and_copied_in():
    def host(x):
        v = x.numpy()
        return tg.tensor((v - v.min()) / (v.max() - v.min()), device="cuda")
    rejected(ch02.check_min_max_scale_on_device(host), "only 0 operation(s) ran on the device",
             "every step runs as a kernel on the device")


def test_min_max_scale_with_cpu_tensors_then_moved():
    rejected(ch02.check_min_max_scale_on_device(
        lambda x: ((x - x.min()) / (x.max() - x.min())).to("cuda")),
        "part of the work ran on the host")


def test_min_max_scale_copying_twice():
    def twice(x):
        return (x.to("cuda") - x.min().to("cuda")) / (x.max().to("cuda") - x.min().to("cuda"))
    rejected(ch02.check_min_max_scale_on_device(twice), "host-to-device copies, not 1")


# --- chapter 3 -------------------------------------------------------------------------------

def test_linear_mse_grads_with_the_sign_flipped():
    def flipped(X, y, w, b):
        residual = y - (X @ w + b)
        return 2 * X.T @ residual / len(y), 2 * residual.sum() / len(y)
    rejected(ch03.check_linear_mse_grads(flipped), "wrong grad_w", "the sign is flipped")


def test_linear_mse_grads_with_an_unsummed_bias_gradient():
    def unsummed(X, y, w, b):
        residual = X @ w + b - y
        return 2 * X.T @ residual / len(y), 2 * residual / len(y)
    rejected(ch03.check_linear_mse_grads(unsummed), "grad_b", "sums over samples")


def test_linear_mse_grads_by_autograd_instead_of_by_hand():
    def autograd(X, y, w, b):
        X_, y_ = tg.tensor(X), tg.tensor(y)
        w_, b_ = tg.tensor(w, requires_grad=True), tg.tensor(b, requires_grad=True)
        ((X_ @ w_ + b_ - y_) ** 2).mean().backward()
        return w_.grad, b_.grad
    rejected(ch03.check_linear_mse_grads(autograd), "let autograd compute the gradients",
             "backward pass(es) ran", "derive the gradients by hand")


def test_linear_mse_grads_by_autograd_grad_without_backward():
    def autograd_grad(X, y, w, b):
        X_, y_ = tg.tensor(X), tg.tensor(y)
        w_, b_ = tg.tensor(w, requires_grad=True), tg.tensor(b, requires_grad=True)
        return tg.autograd.grad(((X_ @ w_ + b_ - y_) ** 2).mean(), [w_, b_])
    rejected(ch03.check_linear_mse_grads(autograd_grad), "a graph was recorded")


def test_linear_mse_grads_with_tensors_but_no_graph_is_accepted():
    def with_tensors(X, y, w, b):
        residual = tg.tensor(X) @ tg.tensor(w) + b - tg.tensor(y)
        return (2 * tg.tensor(X).T @ residual / len(y)).numpy(), float(2 * residual.mean())
    assert ch03.check_linear_mse_grads(with_tensors).passed


def test_microbatches_replaced_by_one_full_batch_backward():
    def full_batch(w, X, y, size):
        ((X @ w - y) ** 2).mean().backward()
        return w.grad
    rejected(ch03.check_gradient_by_microbatches(full_batch), "called backward() 1 time(s)",
             "make 3 micro-batches")


def test_microbatches_with_the_gradient_from_numpy():
    def by_hand(w, X, y, size):
        Xn, yn, wn = X.numpy(), y.numpy(), w.detach().numpy()
        w.grad = tg.tensor(2 * Xn.T @ (Xn @ wn - yn) / len(yn))
        return w.grad
    rejected(ch03.check_gradient_by_microbatches(by_hand), "called backward() 0 time(s)")


def test_microbatches_dropping_the_last_partial_batch():
    def dropped(w, X, y, size):
        n = X.shape[0]
        for start in range(0, n - size + 1, size):
            ((X[start:start + size] @ w - y[start:start + size]) ** 2).sum().div(n).backward()
        return w.grad
    rejected(ch03.check_gradient_by_microbatches(dropped),
             "5 samples in micro-batches of 2", "called backward() 2 time(s)")


def test_train_linear_in_numpy_wrapped_in_tensors():
    def numpy_descent(X, y, steps, lr):
        Xn, yn = X.numpy().astype(np.float64), y.numpy().astype(np.float64)
        w, b = np.zeros(Xn.shape[1]), 0.0
        for _ in range(steps):
            r = Xn @ w + b - yn
            w, b = w - lr * 2 * Xn.T @ r / len(yn), b - lr * 2 * r.mean()
        return tg.tensor(w, requires_grad=True), tg.tensor([b], requires_grad=True)
    rejected(ch03.check_train_linear(numpy_descent), "called backward() 0 time(s) in 3 step(s)",
             "one loss.backward() per step")


def test_train_linear_climbing_the_gradient():
    def ascent(X, y, steps, lr):
        w = tg.zeros(X.shape[1], requires_grad=True)
        b = tg.zeros(1, requires_grad=True)
        for _ in range(steps):
            ((X @ w + b - y) ** 2).mean().backward()
            with tg.no_grad():
                w += lr * w.grad
                b += lr * b.grad
            w.grad = b.grad = None
        return w, b
    rejected(ch03.check_train_linear(ascent), "wrong trained w")


def test_train_linear_rebinding_w_to_a_new_tensor():
    def rebound(X, y, steps, lr):
        w = tg.zeros(X.shape[1], requires_grad=True)
        b = tg.zeros(1, requires_grad=True)
        for _ in range(steps):
            ((X @ w + b - y) ** 2).mean().backward()
            with tg.no_grad():
                w, b = w - lr * w.grad, b - lr * b.grad
        return w, b
    feedback = ch03.check_train_linear(rebound)
    assert not feedback.passed, feedback.message


# --- chapter 4 -------------------------------------------------------------------------------

class LibrarySigmoid(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = tg.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * (1 - y)


class SilencedNaiveSigmoid(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        with np.errstate(all="ignore"):  # hides numpy's overflow warning
            y = 1 / (1 + tg.exp(-x))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * (1 - y)


class SigmoidBackwardFromInput(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        z = tg.exp(-x.abs())
        ctx.save_for_backward(x)
        return tg.where(x >= 0, 1 / (1 + z), z / (1 + z))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x * (1 - x)


def sigmoid_switching_at(threshold):
    class Sigmoid(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            z = tg.exp(-x.abs())
            y = tg.where(x >= threshold, 1 / (1 + z), z / (1 + z))
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y * (1 - y)
    return Sigmoid


@pytest.mark.parametrize("threshold", [1.0, -1.0, 0.5])
def test_sigmoid_switching_forms_away_from_zero(threshold):
    rejected(ch04.check_sigmoid_function(sigmoid_switching_at(threshold)), "x = [-1.001",
             "some x got sigmoid(-x)", "switch exactly at x = 0")


class SigmoidFromTanh(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = 0.5 * (1 + tg.tanh(0.5 * x))  # stable for any x: tanh stays in [-1, 1]
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * (1 - y)


@pytest.mark.parametrize("right", [sigmoid_switching_at(0.0), SigmoidFromTanh])
def test_sigmoid_right_answers_are_accepted(right):
    assert ch04.check_sigmoid_function(right).passed


def test_sigmoid_calling_the_library_sigmoid():
    rejected(ch04.check_sigmoid_function(LibrarySigmoid), "calls the library's sigmoid")


def test_sigmoid_overflowing_with_the_warning_silenced():
    rejected(ch04.check_sigmoid_function(SilencedNaiveSigmoid), "x = [-100.0, 100.0]",
             "gave inf or nan", "exp(-|x|)")


def test_sigmoid_backward_from_the_input_instead_of_the_output():
    rejected(ch04.check_sigmoid_function(SigmoidBackwardFromInput), "wrong gradient",
             "y * (1 - y)")


def make_linear(backward_body):
    class Linear(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, W, b):
            ctx.save_for_backward(x, W)
            return x @ W.T + b

        @staticmethod
        def backward(ctx, grad):
            x, W = ctx.saved_tensors
            return backward_body(grad, x, W)
    return Linear


def test_linear_function_returning_the_unsummed_bias_gradient():
    unsummed = make_linear(lambda grad, x, W: (grad @ W, grad.T @ x, grad))
    rejected(ch04.check_linear_function(unsummed),
             "gradient of b of shape [3, 2], but b has shape [2]", "grad.sum(dim=0)")


def test_linear_function_with_a_transposed_weight_gradient():
    transposed = make_linear(lambda grad, x, W: (grad @ W, x.T @ grad, grad.sum(dim=0)))
    rejected(ch04.check_linear_function(transposed), "gradient of W of shape [4, 2]")


def test_linear_function_with_a_wrong_input_gradient():
    wrong_x = make_linear(lambda grad, x, W: (grad @ W * 2, grad.T @ x, grad.sum(dim=0)))
    rejected(ch04.check_linear_function(wrong_x), "wrong gradient of x", "grad_x = grad @ W")


def test_learner_edition_does_not_leak_the_backward_through_the_rule():
    for name in ("Sigmoid", "LinearFunction"):
        source = _solution_source(4, name)
        stub = learner_stub(source)
        assert "rule = " in source and "Σ" not in stub and "σ(x)·" not in stub, stub
        assert 'rule = ""' in stub
        assert len(stub.splitlines()) <= len(source.splitlines())


# --- chapter 5 -------------------------------------------------------------------------------

class NetWithReluAtTheEnd(NetWithoutRelu):
    def forward(self, x):
        return tg.relu(self.second(tg.relu(self.first(x))))


class NetWithSigmoid(NetWithoutRelu):
    def forward(self, x):
        return self.second(tg.sigmoid(self.first(x)))


class NetWithoutBiases(nn.Module):
    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.first = nn.Linear(n_in, hidden, bias=False)
        self.second = nn.Linear(hidden, n_out, bias=False)

    def forward(self, x):
        return self.second(tg.relu(self.first(x)))


def test_two_layer_net_with_relu_on_the_output():
    rejected(ch05.check_two_layer_net(NetWithReluAtTheEnd), "wrong output")


def test_two_layer_net_with_sigmoid():
    rejected(ch05.check_two_layer_net(NetWithSigmoid), "wrong output")


def test_two_layer_net_without_biases():
    rejected(ch05.check_two_layer_net(NetWithoutBiases), "parameters, expected")


def epoch(order):
    """A train_epoch doing the steps of each batch in ``order``."""
    def train_epoch(model, loader, loss_fn, optimizer):
        losses = []
        for inputs, targets in loader:
            loss = None
            for step in order:
                if step == "zero":
                    optimizer.zero_grad()
                elif step == "loss":
                    loss = loss_fn(model(inputs), targets)
                elif step == "backward":
                    loss.backward()
                elif step == "step":
                    optimizer.step()
            losses.append(loss.item())
        return float(np.mean(losses))
    return train_epoch


def test_train_epoch_without_the_optimizer_step():
    rejected(ch05.check_train_epoch(epoch(["zero", "loss", "backward"])),
             "the parameters never changed")


def test_train_epoch_zeroing_between_backward_and_step():
    rejected(ch05.check_train_epoch(epoch(["loss", "backward", "zero", "step"])),
             "the parameters after training differ")


def test_train_epoch_stepping_before_backward():
    rejected(ch05.check_train_epoch(epoch(["zero", "loss", "step", "backward"])),
             "the parameters after training differ")


def test_accuracy_lookup_table_fails_on_unseen_samples():
    def key(logits, labels):
        return (str(logits.tolist()), str(labels.tolist()))
    table = lookup_table(5, "accuracy", ch05.check_accuracy, key=key)
    rejected(ch05.check_accuracy(table), "unseen random samples", "wrong accuracy")


def test_accuracy_with_argmax_over_the_batch():
    rejected(ch05.check_accuracy(
        lambda logits, labels: (logits.argmax(dim=0) == labels).float().mean().item()))


def test_accuracy_counting_instead_of_averaging():
    rejected(ch05.check_accuracy(
        lambda logits, labels: (logits.argmax(dim=1) == labels).float().sum().item()),
        "wrong accuracy")

"""Chapters 12 and 13: reference solutions pass, stubs are "not solved yet", and the
mistakes learners make are rejected with specific feedback.

The reference solutions are read from the notebooks' cells tagged ``solution``.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import teachgrad as tg
from teachgrad import nn
from teachgrad.exercises import NOT_SOLVED_YET, SOLVED, ch12, ch13
from teachgrad.exercises.edition import learner_stub

import notebook_solutions
from notebook_solutions import solution_source

EXERCISES = [
    ("12_instrumentation", "CallCounter", ch12.check_call_counter),
    ("12_instrumentation", "log_grad_norms", ch12.check_log_grad_norms),
    ("12_instrumentation", "dead_fractions", ch12.check_dead_fractions),
    ("13_hyperparameter_search", "random_search", ch13.check_random_search),
    ("13_hyperparameter_search", "promote", ch13.check_promote),
    ("13_hyperparameter_search", "hyperband_schedule", ch13.check_hyperband_schedule),
]


def define(source: str, name: str):
    return notebook_solutions.define(source, name, {"tg": tg, "nn": nn, "np": np, "math": math})


@pytest.mark.parametrize("notebook, name, checker", EXERCISES, ids=[e[1] for e in EXERCISES])
def test_reference_solution_is_solved(notebook, name, checker):
    feedback = checker(define(solution_source(notebook, name), name))
    assert feedback.status == SOLVED, feedback.message


@pytest.mark.parametrize("notebook, name, checker", EXERCISES, ids=[e[1] for e in EXERCISES])
def test_learner_stub_is_not_solved_yet(notebook, name, checker):
    stub = learner_stub(solution_source(notebook, name))
    assert "NotImplementedError" in stub
    feedback = checker(define(stub, name))
    assert feedback.status == NOT_SOLVED_YET, feedback.message


def rejected(feedback, *words: str) -> None:
    assert feedback.status in ("wrong", "error"), feedback.message
    for word in words:
        assert word in feedback.message, feedback.message


# -- 12.1 CallCounter ------------------------------------------------------------------------

class CounterTopOnly:
    """Hooks only the model itself."""

    def __init__(self, model):
        self.counts = {name: 0 for name, _ in model.named_modules()}
        self.handle = model.register_forward_hook(self.count)

    def count(self, module, args, output):
        self.counts[""] += 1

    def remove(self):
        self.handle.remove()


class CounterOffByOne:
    """Starts every count at 1."""

    def __init__(self, model):
        self.counts, self.handles = {}, []
        for name, module in model.named_modules():
            self.counts[name] = 1
            self.handles.append(module.register_forward_hook(
                lambda m, a, o, name=name: self.counts.__setitem__(name, self.counts[name] + 1)))

    def remove(self):
        for h in self.handles:
            h.remove()


class CounterNeverRemoves(CounterOffByOne):
    """Correct counts, but remove() forgets the handles."""

    def __init__(self, model):
        super().__init__(model)
        self.counts = {name: 0 for name in self.counts}

    def remove(self):
        pass


class CounterInBackward:
    """Counts in a backward hook: runs only when gradients flow."""

    def __init__(self, model):
        self.counts, self.handles = {}, []
        for name, module in model.named_modules():
            self.counts[name] = 0
            self.handles.append(module.register_full_backward_hook(
                lambda m, gi, go, name=name: self.counts.__setitem__(name, self.counts[name] + 2)))

    def remove(self):
        for h in self.handles:
            h.remove()


def test_call_counter_on_the_model_only():
    rejected(ch12.check_call_counter(CounterTopOnly), "hook every module")


def test_call_counter_off_by_one():
    rejected(ch12.check_call_counter(CounterOffByOne), "start every count at 0")


def test_call_counter_without_remove():
    rejected(ch12.check_call_counter(CounterNeverRemoves), "after remove() your hooks still count",
             "call .remove() on each")


def test_call_counter_in_backward():
    rejected(ch12.check_call_counter(CounterInBackward), "wrong counts")


# -- 12.2 log_grad_norms ----------------------------------------------------------------------

def norms_of_parameters(model, writer, step):
    for name, p in model.named_parameters():
        writer.add_scalar(f"grad_norm/{name}", float(np.linalg.norm(p.detach().numpy())), step)


def squared_norms(model, writer, step):
    for name, p in model.named_parameters():
        writer.add_scalar(f"grad_norm/{name}", (p.grad * p.grad).sum().item(), step)


def next_step(model, writer, step):
    for name, p in model.named_parameters():
        writer.add_scalar(f"grad_norm/{name}", (p.grad * p.grad).sum().sqrt().item(), step + 1)


def first_layer_only(model, writer, step):
    name, p = next(iter(model.named_parameters()))
    writer.add_scalar(f"grad_norm/{name}", (p.grad * p.grad).sum().sqrt().item(), step)


def test_grad_norm_of_the_parameter_not_the_gradient():
    rejected(ch12.check_log_grad_norms(norms_of_parameters), "use the parameter's .grad")


def test_grad_norm_squared():
    rejected(ch12.check_log_grad_norms(squared_norms), "take the square root")


def test_grad_norm_wrong_step():
    rejected(ch12.check_log_grad_norms(next_step), "logged at step(s) [8], expected 7")


def test_grad_norm_missing_parameters():
    rejected(ch12.check_log_grad_norms(first_layer_only), "tags missing", "one writer.add_scalar")


# -- 12.3 dead_fractions ------------------------------------------------------------------------

def _hooked(model, X, measure, key=lambda name: name):
    out, handles = {}, []
    for name, module in model.named_modules():
        if isinstance(module, nn.ReLU):
            handles.append(module.register_forward_hook(
                lambda m, a, o, name=name: out.__setitem__(key(name), measure(o.detach().numpy()))))
    model(X)
    for h in handles:
        h.remove()
    return out


def zero_entries(model, X):
    return _hooked(model, X, lambda a: float(np.mean(a <= 0)))


def dead_in_any_example(model, X):
    return _hooked(model, X, lambda a: float(np.mean(np.any(a <= 0, axis=0))))


def named_after_the_linear(model, X):
    return _hooked(model, X, lambda a: float(np.mean(np.all(a <= 0, axis=0))),
                   key=lambda name: str(int(name) - 1))


def hard_coded(model, X):
    return {"1": 0.5, "3": 0.5}


def leaves_hooks(model, X):
    out = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.ReLU):
            module.register_forward_hook(lambda m, a, o, name=name: out.__setitem__(
                name, float(np.mean(np.all(o.detach().numpy() <= 0, axis=0)))))
    model(X)
    return out


def test_dead_fraction_of_zero_entries():
    rejected(ch12.check_dead_fractions(zero_entries), "fraction of zero *entries*",
             "dead when it is 0 for every example")


def test_dead_in_any_example():
    rejected(ch12.check_dead_fractions(dead_in_any_example), "wrong dead fraction")


def test_dead_fraction_keyed_by_the_linear():
    rejected(ch12.check_dead_fractions(named_after_the_linear), "keyed by the ReLU's own name")


def test_dead_fraction_hard_coded():
    rejected(ch12.check_dead_fractions(hard_coded), "wrong")


def test_dead_fraction_leaving_hooks():
    rejected(ch12.check_dead_fractions(leaves_hooks), "the model's hooks are not what they were")


# -- 13.3 hyperband_schedule ------------------------------------------------------------------

def _schedule(max_budget, eta, s_max, round_n=math.ceil, reverse=False):
    B = (s_max + 1) * max_budget
    brackets = []
    for s in range(s_max, -1, -1):
        n = round_n(B / max_budget * eta**s / (s + 1))
        r = max_budget * eta ** (-s)
        brackets.append([(n // eta**i, r * eta**i) for i in range(s + 1)])
    return brackets[::-1] if reverse else brackets


def float_log(max_budget, eta):
    return _schedule(max_budget, eta, int(math.log(max_budget, eta)))


def floor_n(max_budget, eta):
    s_max = 0
    while eta ** (s_max + 1) <= max_budget:
        s_max += 1
    return _schedule(max_budget, eta, s_max, round_n=math.floor)


def reversed_brackets(max_budget, eta):
    s_max = 0
    while eta ** (s_max + 1) <= max_budget:
        s_max += 1
    return _schedule(max_budget, eta, s_max, reverse=True)


def papers_table_only(max_budget, eta):
    return [[(81, 1), (27, 3), (9, 9), (3, 27), (1, 81)], [(34, 3), (11, 9), (3, 27), (1, 81)],
            [(15, 9), (5, 27), (1, 81)], [(8, 27), (2, 81)], [(5, 81)]]


def test_schedule_with_a_floating_point_log():
    rejected(ch13.check_hyperband_schedule(float_log), "5 brackets, expected s_max + 1 = 6",
             "math.log(243, 3) is 4.999999999999999")


def test_schedule_rounding_n_down():
    rejected(ch13.check_hyperband_schedule(floor_n), "n rounds up: math.ceil")


def test_schedule_in_reverse():
    rejected(ch13.check_hyperband_schedule(reversed_brackets), "the brackets are in reverse order")


def test_schedule_hard_coded_for_the_paper():
    feedback = ch13.check_hyperband_schedule(papers_table_only)
    rejected(feedback)
    assert feedback.failed_input != "max_budget = 81, eta = 3"  # fixed case passes, random fails


# -- 13.2 promote ---------------------------------------------------------------------------

def keeps_nans(losses, eta):
    return sorted(range(len(losses)), key=lambda i: losses[i])[: len(losses) // eta]


def rounds_up(losses, eta):
    ok = sorted((i for i, x in enumerate(losses) if math.isfinite(x)), key=lambda i: losses[i])
    return ok[: math.ceil(len(losses) / eta)]


def keeps_the_worst(losses, eta):
    ok = sorted((i for i, x in enumerate(losses) if math.isfinite(x)), key=lambda i: -losses[i])
    return ok[: len(losses) // eta]


def unsorted(losses, eta):
    ok = sorted((i for i, x in enumerate(losses) if math.isfinite(x)), key=lambda i: losses[i])
    return sorted(ok[: len(losses) // eta])


def test_promote_keeps_failed_trials():
    rejected(ch13.check_promote(keeps_nans), "never promoted")


def test_promote_rounds_up():
    rejected(ch13.check_promote(rounds_up), "floor(n / eta)")


def test_promote_keeps_the_worst():
    rejected(ch13.check_promote(keeps_the_worst), "lower loss is better")


def test_promote_not_best_first():
    rejected(ch13.check_promote(unsorted), "wrong configurations promoted")

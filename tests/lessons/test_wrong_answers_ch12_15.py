"""Chapters 12-15: realistic wrong answers the checkers must reject (with feedback naming
the mistake), and other right answers they must accept.

Each wrong answer is a small edit of the chapter's own solution, of the kind a learner
makes: a count that starts at 1, a hook left behind, the full-batch gradient where shards
differ, a library call that answers the exercise, a session never run.
"""
from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import teachgrad as tg
from teachgrad import nn, tune
from teachgrad.distributed import ring
from teachgrad.exercises import ch12, ch13, ch14, ch15
from teachgrad.utils.data import DistributedSampler

from notebook_solutions import define, solution_source

NAMESPACE = {"tg": tg, "nn": nn, "np": np, "math": math, "onnx": onnx, "ort": ort}


def reference(notebook: str, name: str):
    return define(solution_source(notebook, name), name, NAMESPACE)


def rejected(feedback, *words: str) -> None:
    assert feedback.status in ("wrong", "error"), feedback.message
    for word in words:
        assert word in feedback.message, feedback.message


def accepted(feedback) -> None:
    assert feedback.passed, feedback.message


# -- 12.1 CallCounter --------------------------------------------------------------------------

class CounterWithPreHooks:
    """Right: a forward pre-hook counts calls as well as a forward hook."""

    def __init__(self, model):
        self.counts = {name: 0 for name, _ in model.named_modules()}
        self.handles = [module.register_forward_pre_hook(
            lambda m, args, name=name: self.counts.__setitem__(name, self.counts[name] + 1))
            for name, module in model.named_modules()]

    def remove(self):
        for handle in self.handles:
            handle.remove()


class CounterOncePerModule(CounterWithPreHooks):
    """Wrong: counts a module once per model call, however often it ran."""

    def __init__(self, model):
        self.counts = {name: 0 for name, _ in model.named_modules()}
        self.seen: set = set()
        self.handles = [model.register_forward_pre_hook(lambda m, args: self.seen.clear())]
        for name, module in model.named_modules():
            self.handles.append(module.register_forward_hook(self._once(name)))

    def _once(self, name):
        def hook(m, args, out):
            if name not in self.seen:
                self.seen.add(name)
                self.counts[name] += 1
        return hook


class CounterOfChildrenOnly(CounterWithPreHooks):
    """Wrong: model.named_children() misses the nested modules."""

    def __init__(self, model):
        self.counts = {"": 0}
        self.handles = [model.register_forward_hook(self._bump(""))]
        for name, module in model.named_children():
            self.counts[name] = 0
            self.handles.append(module.register_forward_hook(self._bump(name)))

    def _bump(self, name):
        def hook(m, args, out):
            self.counts[name] += 1
        return hook


class CounterClearingAllHooks(CounterWithPreHooks):
    """Wrong: remove() clears every forward hook of every module, the model's own too."""

    def __init__(self, model):
        super().__init__(model)
        self.model = model

    def remove(self):
        for module in self.model.modules():
            module._forward_pre_hooks.clear()
            module._forward_hooks.clear()


def test_call_counter_accepts_pre_hooks():
    accepted(ch12.check_call_counter(CounterWithPreHooks))


def test_call_counter_counts_a_layer_called_twice():
    rejected(ch12.check_call_counter(CounterOncePerModule), "called twice in one forward",
             "counted 2, ran 4")


def test_call_counter_counts_nested_modules():
    rejected(ch12.check_call_counter(CounterOfChildrenOnly), "nested ones included")


def test_call_counter_leaves_the_models_own_hooks():
    rejected(ch12.check_call_counter(CounterClearingAllHooks),
             "does not hold the hooks it had before", "remove exactly your own handles")


def test_call_counter_feedback_names_the_modules():
    feedback = ch12.check_call_counter(CounterOncePerModule)
    assert "expected: dict" not in feedback.message and "got:      dict" not in feedback.message
    assert "modules have wrong counts" in feedback.message


# -- 12.2 log_grad_norms -----------------------------------------------------------------------

def norms_of_every_parameter(model, writer, step):
    """Wrong: a parameter without a gradient is logged (as 0)."""
    for name, p in model.named_parameters():
        norm = 0.0 if p.grad is None else float(np.linalg.norm(p.grad.numpy()))
        writer.add_scalar(f"grad_norm/{name}", norm, step)


def l1_norms(model, writer, step):
    for name, p in model.named_parameters():
        if p.grad is not None:
            writer.add_scalar(f"grad_norm/{name}", p.grad.abs().sum().item(), step)


def norms_after_clipping(model, writer, step):
    """Wrong: clips the gradients in place while logging them."""
    for name, p in model.named_parameters():
        if p.grad is not None:
            norm = (p.grad * p.grad).sum().sqrt().item()
            p.grad.mul_(min(1.0, 0.1 / (norm + 1e-12)))
            writer.add_scalar(f"grad_norm/{name}", norm, step)


def norms_as_tensors(model, writer, step):
    """Right: SummaryWriter.add_scalar takes a one-element tensor too."""
    for name, p in model.named_parameters():
        if p.grad is not None:
            writer.add_scalar(f"grad_norm/{name}", (p.grad * p.grad).sum().sqrt(), step)


def test_grad_norms_skip_parameters_without_gradient():
    rejected(ch12.check_log_grad_norms(norms_of_every_parameter), "should not be there",
             "skip the parameters whose .grad is None")


def test_grad_norms_l1():
    rejected(ch12.check_log_grad_norms(l1_norms), "L1 norm")


def test_grad_norms_must_not_change_the_gradients():
    rejected(ch12.check_log_grad_norms(norms_after_clipping), "changed the gradient")


def norms_without_the_guard(model, writer, step):
    """Wrong: a frozen or unused parameter has no gradient (None) to take the norm of."""
    for name, p in model.named_parameters():
        writer.add_scalar(f"grad_norm/{name}", (p.grad * p.grad).sum().sqrt().item(), step)


def test_grad_norms_of_a_model_with_frozen_and_unused_layers():
    rejected(ch12.check_log_grad_norms(norms_without_the_guard), "frozen layer")


def test_grad_norms_as_tensors_are_accepted():
    accepted(ch12.check_log_grad_norms(norms_as_tensors))


# -- 12.3 dead_fractions ----------------------------------------------------------------------

def layer_by_layer(model, X):
    """Wrong: runs the children one after the other, which is not what a model with
    branches computes (and no hooks at all)."""
    out, fractions = X, {}
    with tg.no_grad():
        for name, layer in model.named_children():
            try:
                out = layer(out)
            except Exception:
                break
            if isinstance(layer, nn.ReLU):
                fractions[name] = float(np.mean(np.all(out.numpy() <= 0, axis=0)))
    return fractions


def top_level_relus_only(model, X):
    """Wrong: only the ReLUs that are the model's own children (no dot in their name)."""
    dead = reference("12_instrumentation", "dead_fractions")(model, X)
    return {name: f for name, f in dead.items() if "." not in name}


def clears_every_hook(model, X):
    fractions = reference("12_instrumentation", "dead_fractions")(model, X)
    for module in model.modules():
        module._forward_hooks.clear()
    return fractions


def live_fraction(model, X):
    dead = reference("12_instrumentation", "dead_fractions")(model, X)
    return {name: 1.0 - f for name, f in dead.items()}


def test_dead_fractions_on_models_with_branches():
    rejected(ch12.check_dead_fractions(layer_by_layer), "wrong layers")


def test_dead_fractions_of_nested_relus():
    rejected(ch12.check_dead_fractions(top_level_relus_only), "the nested ones too")


def test_dead_fractions_leaves_the_models_hooks():
    rejected(ch12.check_dead_fractions(clears_every_hook), "hooks are not what they were")


def test_dead_fractions_live_instead_of_dead():
    rejected(ch12.check_dead_fractions(live_fraction), "fraction of live units")


# -- 13.1 random_search -------------------------------------------------------------------------

def search(draw, *, keep_nan=False, seeded=True, use_budget=True):
    """random_search with one piece changed: how lr is drawn, NaN handling, seeding."""
    def random_search(objective, low, high, n_trials, budget, seed):
        rng = np.random.default_rng(seed if seeded else None)
        best_lr, best_loss = None, math.inf
        for _ in range(n_trials):
            lr = draw(rng, low, high)
            loss = objective({"lr": lr}, budget if use_budget else 1)
            if (keep_nan or math.isfinite(loss)) and not loss >= best_loss:
                best_lr, best_loss = lr, loss
        return best_lr, best_loss
    return random_search


def log_uniform(rng, low, high):
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def test_random_search_plain_uniform():
    rejected(ch13.check_random_search(search(lambda rng, lo, hi: rng.uniform(lo, hi))),
             "most draws land in the top decade")


def test_random_search_mixed_bases():
    rejected(ch13.check_random_search(
        search(lambda rng, lo, hi: 10 ** rng.uniform(math.log(lo), math.log(hi)))),
        "outside", "exponentiate")


def test_random_search_lets_a_diverged_run_win():
    rejected(ch13.check_random_search(search(log_uniform, keep_nan=True)), "never wins")


def test_random_search_unseeded():
    rejected(ch13.check_random_search(search(log_uniform, seeded=False)),
             "two different searches")


def test_random_search_with_a_fixed_budget():
    rejected(ch13.check_random_search(search(log_uniform, use_budget=False)), "budget")


def test_random_search_with_the_library():
    def with_tune(objective, low, high, n_trials, budget, seed):
        result = tune.random_search(objective, {"lr": tune.loguniform(low, high)},
                                    n_trials=n_trials, budget=budget, seed=seed)
        return result.best_config["lr"], result.best_loss
    rejected(ch13.check_random_search(with_tune), "tune.random_search")


def test_random_search_other_right_answers():
    accepted(ch13.check_random_search(search(
        lambda rng, lo, hi: lo * (hi / lo) ** rng.random())))
    accepted(ch13.check_random_search(search(
        lambda rng, lo, hi: 10 ** rng.uniform(math.log10(lo), math.log10(hi)))))


# -- 13.2 promote, 13.3 hyperband_schedule -----------------------------------------------------

def promote_counting_finished(losses, eta):
    finished = sorted((i for i, loss in enumerate(losses) if math.isfinite(loss)),
                      key=lambda i: losses[i])
    return finished[: len(finished) // eta]


def promote_keeping_inf(losses, eta):
    finished = sorted((i for i, loss in enumerate(losses) if not math.isnan(loss)),
                      key=lambda i: losses[i])
    return finished[: len(losses) // eta]


def promote_sorting_in_place(losses, eta):
    order = sorted(range(len(losses)), key=lambda i: losses[i] if math.isfinite(losses[i])
                   else math.inf)
    losses.sort(key=lambda v: v if math.isfinite(v) else math.inf)
    return [i for i in order if math.isfinite(losses[i]) or True][: len(losses) // eta]


def test_promote_counts_every_trial():
    rejected(ch13.check_promote(promote_counting_finished), "n = len(losses)")


def test_promote_never_an_infinite_loss():
    rejected(ch13.check_promote(promote_keeping_inf), "NaN or inf")


def test_promote_with_the_library_or_numpy_is_judged_by_its_answer():
    def with_argsort(losses, eta):
        values = np.where(np.isfinite(losses), losses, np.inf)
        return [int(i) for i in np.argsort(values, kind="stable")[: len(losses) // eta]
                if np.isfinite(values[i])]
    accepted(ch13.check_promote(with_argsort))


def schedule_with_log(max_budget, eta):
    s_max = int(math.log(max_budget) / math.log(eta) + 1e-9)
    B = (s_max + 1) * max_budget
    return [[(math.ceil(B / max_budget * eta**s / (s + 1)) // eta**i, max_budget * eta ** (i - s))
             for i in range(s + 1)] for s in range(s_max, -1, -1)]


def schedule_rungs_rounded(max_budget, eta):
    right = reference("13_hyperparameter_search", "hyperband_schedule")(max_budget, eta)
    return [[(n, round(r)) for n, r in bracket] for bracket in right]


def test_schedule_with_a_tolerant_log_is_right():
    accepted(ch13.check_hyperband_schedule(schedule_with_log))


def test_schedule_starting_past_the_first_bracket():
    # s_max = 1 to start with: a budget below eta still gets two brackets
    def from_one(max_budget, eta):
        s_max = 1
        while eta ** (s_max + 1) <= max_budget:
            s_max += 1
        return [[(math.ceil((s_max + 1) * eta**s / (s + 1)) // eta**i, max_budget * eta ** (i - s))
                 for i in range(s + 1)] for s in range(s_max, -1, -1)]
    rejected(ch13.check_hyperband_schedule(from_one), "max_budget = 4, eta = 5", "2 brackets")


def test_schedule_below_eta_is_one_bracket():
    # the library refuses max_budget < eta (a search of one trial); the exercise does not
    right = reference("13_hyperparameter_search", "hyperband_schedule")
    assert right(4, 5) == [[(1, 4)]] and right(1, 3) == [[(1, 1)]]
    accepted(ch13.check_hyperband_schedule(right))


def test_schedule_with_rounded_budgets():
    # R = 1000, eta = 3 has budgets like 1000 / 729: rounding them is wrong
    rejected(ch13.check_hyperband_schedule(schedule_rungs_rounded), "r * eta**i")


def test_schedule_with_fractional_rungs():
    def true_division(max_budget, eta):
        right = reference("13_hyperparameter_search", "hyperband_schedule")(max_budget, eta)
        return [[(bracket[0][0] / eta**i, r) for i, (_, r) in enumerate(bracket)]
                for bracket in right]
    rejected(ch13.check_hyperband_schedule(true_division), "whole number of configurations")


def test_schedule_from_the_library():
    rejected(ch13.check_hyperband_schedule(
        lambda R, eta: [[(r.n, r.budget) for r in b] for b in tune.hyperband_schedule(R, eta)]),
        "tune.hyperband_schedule")


def test_schedule_from_the_library_under_other_names():
    from teachgrad.tune import hyperband_schedule as imported_before
    from teachgrad.tune import schedule as defining_module

    for call in (imported_before, defining_module.hyperband_schedule):
        rejected(ch13.check_hyperband_schedule(
            lambda R, eta, call=call: [[(r.n, r.budget) for r in b] for b in call(R, eta)]),
            "tune.hyperband_schedule")
    # put back afterwards, under every name
    assert imported_before(81, 3)[0][0].n == 81 and tune.hyperband_schedule is imported_before


# -- 14.1 data_parallel_gradient ------------------------------------------------------------------

def full_batch_gradient(w, X, y, world_size):
    """Wrong: one backward over everything (equal to the average only for equal shards)."""
    w.grad = None
    ((X @ w - y) ** 2).mean().backward()
    return w.grad.numpy().copy()


def average_keeping_the_stale_gradient(w, X, y, world_size):
    grads, start = [], None
    for r in range(world_size):
        ((X[r::world_size] @ w - y[r::world_size]) ** 2).mean().backward()
        grads.append(w.grad.numpy().copy() - (0 if start is None else start))
        start = w.grad.numpy().copy()
    return np.mean(grads, axis=0)


def average_with_tg_grad(w, X, y, world_size):
    """Right: tg.autograd.grad instead of .backward() and .grad."""
    grads = [tg.autograd.grad(((X[r::world_size] @ w - y[r::world_size]) ** 2).mean(), w)[0]
             for r in range(world_size)]
    return sum(g.numpy() for g in grads) / world_size


def test_gradient_average_with_one_backward():
    # equal shards: the right numbers, but one backward pass; uneven ones: wrong numbers
    rejected(ch14.check_data_parallel_gradient(full_batch_gradient),
             "from 1 backward pass(es) for 2 ranks")


def test_gradient_average_with_uneven_shards():
    def full_batch_gradient_per_rank(w, X, y, world_size):
        grads = []
        for _ in range(world_size):  # as many backward passes as ranks, all of the full batch
            grads.append(full_batch_gradient(w, X, y, world_size))
        return np.mean(grads, axis=0)
    rejected(ch14.check_data_parallel_gradient(full_batch_gradient_per_rank),
             "shards have different sizes")


def test_gradient_average_with_a_stale_gradient():
    rejected(ch14.check_data_parallel_gradient(average_keeping_the_stale_gradient),
             "w.grad not empty at the start")


def test_gradient_average_with_autograd_grad():
    accepted(ch14.check_data_parallel_gradient(average_with_tg_grad))


# -- 14.2 send_chunk, 14.3 shard_indices --------------------------------------------------------

def test_ring_from_the_library():
    rejected(ch14.check_ring_send_chunk(lambda *args: ring.send_chunk(*args)), "ring.send_chunk")


def test_ring_from_the_schedule():
    def from_schedule(phase, step, rank, p):
        return next(s.send for s in ring.ring_schedule(p)
                    if (s.phase, s.step, s.rank) == (phase, step, rank))
    rejected(ch14.check_ring_send_chunk(from_schedule), "ring.ring_schedule")


def test_ring_written_another_way():
    accepted(ch14.check_ring_send_chunk(
        lambda phase, s, r, p: (r - s + (phase == "all-gather") + p) % p))


def shards_padding_once(n, num_replicas, rank, drop_last):
    order = list(range(n))
    if drop_last:
        order = order[: (n // num_replicas) * num_replicas]
    else:
        total = math.ceil(n / num_replicas) * num_replicas
        order += order[: total - len(order)]
    return order[rank::num_replicas]


def test_shards_with_fewer_samples_than_ranks():
    rejected(ch14.check_shard_indices(shards_padding_once), "fewer samples than ranks")


def test_shards_from_the_sampler():
    rejected(ch14.check_shard_indices(lambda n, p, r, d: list(
        DistributedSampler(range(n), p, r, shuffle=False, drop_last=d))), "DistributedSampler")


def test_shards_with_modular_arithmetic():
    def modular(n, p, rank, drop_last):
        total = n // p * p if drop_last else math.ceil(n / p) * p
        return [i % n for i in range(rank, total, p)]
    accepted(ch14.check_shard_indices(modular))


# -- 15.1 from_keras ----------------------------------------------------------------------------

class KerasLike(nn.Module):
    """Right: not an nn.Sequential of nn.Linear, but Parameters used as Keras does."""

    def __init__(self, kernels, biases):
        super().__init__()
        self.kernels = [nn.Parameter(tg.tensor(k)) for k in kernels]
        self.biases = [nn.Parameter(tg.tensor(b)) for b in biases]
        for i, (k, b) in enumerate(zip(self.kernels, self.biases)):
            setattr(self, f"kernel{i}", k)
            setattr(self, f"bias{i}", b)

    def forward(self, x):
        for i, (k, b) in enumerate(zip(self.kernels, self.biases)):
            x = x @ k + b
            if i < len(self.kernels) - 1:
                x = x.relu()
        return x


def from_keras_without_relu(kernels, biases):
    layers = []
    for kernel, bias in zip(kernels, biases):
        linear = nn.Linear(*kernel.shape)
        with tg.no_grad():
            linear.weight.copy_(tg.tensor(kernel.T))
            linear.bias.copy_(tg.tensor(bias))
        layers.append(linear)
    return nn.Sequential(*layers)


def test_from_keras_accepts_a_model_of_parameters():
    accepted(ch15.check_from_keras(KerasLike))


def test_from_keras_without_activations():
    rejected(ch15.check_from_keras(from_keras_without_relu), "put an nn.ReLU after every Linear")


def test_from_keras_crash_hint_fits_any_crash():
    def crashes(kernels, biases):
        return nn.Sequential(*[nn.Linear(k.shape[1], k.shape[0]) for k in kernels])(None)
    feedback = ch15.check_from_keras(crashes)
    assert feedback.status == "error"
    assert "one nn.Linear(in, out) per kernel" in feedback.message


# -- 15.2 describe_onnx ---------------------------------------------------------------------------

def describe(path, *, dims=lambda d: d.dim_param or d.dim_value, count_constants=True):
    graph = onnx.load(path).graph
    operators: dict = {}
    for node in graph.node:
        operators[node.op_type] = operators.get(node.op_type, 0) + 1
    initializers = [t for t in graph.initializer if count_constants or "const" not in t.name]
    return {"inputs": {v.name: [dims(d) for d in v.type.tensor_type.shape.dim] for v in graph.input},
            "outputs": {v.name: [dims(d) for d in v.type.tensor_type.shape.dim] for v in graph.output},
            "operators": operators,
            "stored_values": sum(int(np.prod(t.dims)) for t in initializers)}


def test_describe_onnx_fixed_sizes_only():
    rejected(ch15.check_describe_onnx(lambda p: describe(p, dims=lambda d: d.dim_value)),
             "wrong 'inputs'", "dim_param")


def test_describe_onnx_forgetting_constants():
    rejected(ch15.check_describe_onnx(lambda p: describe(p, count_constants=False)),
             "wrong 'stored_values'", "constants")


def test_describe_onnx_first_input_only():
    def first_only(path):
        found = describe(path)
        found["inputs"] = dict(list(found["inputs"].items())[:1])
        return found
    rejected(ch15.check_describe_onnx(first_only), "one entry per graph.input")


def test_describe_onnx_with_tuples_is_right():
    def as_tuples(path):
        found = describe(path)
        for key in ("inputs", "outputs"):
            found[key] = {name: tuple(shape) for name, shape in found[key].items()}
        return found
    accepted(ch15.check_describe_onnx(as_tuples))


# -- 15.3 export_and_serve ----------------------------------------------------------------------

def serve_a_copy_of_the_model(model, example, path):
    """Wrong: exports, but predicts with a frozen copy of the model, never with the file."""
    tg.onnx.export(model, (example,), path, input_names=["x"], output_names=["logits"],
                   dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    weights = [p.detach().numpy().copy() for p in model.parameters()]

    def predict(array):
        x = array.astype(np.float64)
        for i in range(0, len(weights), 2):
            x = x @ weights[i].T + weights[i + 1]
            if i < len(weights) - 2:
                x = np.maximum(x, 0)
        return x.astype(np.float32)
    return predict


def dynamic_input_only(model, example, path):
    tg.onnx.export(model, (example,), path, input_names=["x"], output_names=["logits"],
                   dynamic_axes={"x": {0: "batch"}})
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return lambda array: session.run(["logits"], {"x": array})[0]


def batch_on_the_wrong_output_axis(model, example, path):
    tg.onnx.export(model, (example,), path, input_names=["x"], output_names=["logits"],
                   dynamic_axes={"x": {0: "batch"}, "logits": {1: "batch"}})
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return lambda array: session.run(["logits"], {"x": array})[0]


def serve_with_the_engine(model, example, path):
    """Wrong: the file is written, but the engine's model answers, not the file."""
    tg.onnx.export(model, (example,), path, input_names=["x"], output_names=["logits"],
                   dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    return lambda array: model(tg.tensor(array)).detach().numpy()


def test_serve_with_the_batch_on_the_wrong_output_axis():
    rejected(ch15.check_export_and_serve(batch_on_the_wrong_output_axis), "'logits'")


def test_serve_with_the_engine_instead_of_the_file():
    rejected(ch15.check_export_and_serve(serve_with_the_engine),
             "without running an ONNX Runtime session")


def test_serve_must_run_an_onnx_runtime_session():
    rejected(ch15.check_export_and_serve(serve_a_copy_of_the_model),
             "without running an ONNX Runtime session")


def test_serve_needs_a_dynamic_output_axis_too():
    rejected(ch15.check_export_and_serve(dynamic_input_only), "'logits'", "the output's")


@pytest.mark.parametrize("notebook, name, checker", [
    ("12_instrumentation", "CallCounter", ch12.check_call_counter),
    ("13_hyperparameter_search", "random_search", ch13.check_random_search),
    ("15_the_ecosystem", "describe_onnx", ch15.check_describe_onnx),
    ("15_the_ecosystem", "export_and_serve", ch15.check_export_and_serve),
])
def test_each_run_draws_new_inputs_and_the_reference_passes_them(notebook, name, checker):
    for _ in range(3):
        accepted(checker(reference(notebook, name)))

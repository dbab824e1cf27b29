"""Checkers for chapter 3, *Autograd*: gradients by hand, accumulation, a manual training loop,
and backward's visiting order (the learner's, plugged into the engine)."""
from __future__ import annotations

from typing import Callable

import numpy as np

import teachgrad as tg

from .building import plugged_workload, property_test, written_by_the_learner
from .core import (Feedback, Mismatch, Test, check, counting_backward, expect_close, expect_true,
                   numerical_gradient, to_numpy, unseen_rng, watching_ops)


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
            got = _by_hand(linear_mse_grads, X.copy(), y.copy(), w.copy(), b)
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


def _by_hand(linear_mse_grads: Callable, *args) -> object:
    """Call the learner's function and check, through the engine, that autograd did not
    do the work: no backward pass ran and no operation recorded a graph node."""
    with watching_ops() as ops, counting_backward() as passes:
        got = linear_mse_grads(*args)
    recorded = [op.function.__name__ for op in ops
                if any(getattr(out, "grad_fn", None) is not None for out in op.outputs)]
    expect_true(passes[0] == 0 and not recorded,
                "your function let autograd compute the gradients ("
                + (f"{passes[0]} backward pass(es) ran" if passes[0] else
                   f"a graph was recorded: {', '.join(dict.fromkeys(recorded))}") + ")",
                hint="the exercise is to derive the gradients by hand: "
                     "grad_w = 2 X^T (X w + b - y) / n and grad_b = 2 sum(X w + b - y) / n, "
                     "in numpy, without requires_grad or backward()")
    return got


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


# --- 3.4 the order backward visits nodes in (plugged into autograd.order) ---------------------

#: The operations a random graph is made of: each takes one or two earlier values.
_GRAPH_OPS = {
    "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b,
    "tanh": lambda a, b: a.tanh(), "scale": lambda a, b: a * 0.5,
    "with a constant": lambda a, b: a * tg.tensor([1.0, -2.0, 0.5], dtype=tg.float64),
}


def _random_graph(strategies):
    """A recipe for a graph: leaves, then operations on earlier values (reused freely,
    constants among them), then a loss that adds several outputs up."""
    op = strategies.tuples(strategies.sampled_from(sorted(_GRAPH_OPS)),
                           strategies.integers(0, 10**6), strategies.integers(0, 10**6))
    return strategies.tuples(strategies.integers(1, 4), strategies.lists(op, min_size=1, max_size=25),
                             strategies.lists(strategies.integers(0, 10**6), min_size=1, max_size=3))


def _build(recipe) -> tuple[list, "tg.Tensor"]:
    """The leaves and the loss a recipe makes (seeded values, float64)."""
    n_leaves, ops, outputs = recipe
    rng = np.random.default_rng(n_leaves + len(ops))
    leaves = [tg.tensor(rng.normal(size=3), requires_grad=True) for _ in range(n_leaves)]
    values = list(leaves)
    for name, i, j in ops:
        values.append(_GRAPH_OPS[name](values[i % len(values)], values[j % len(values)]))
    loss = sum(values[-1 - k % len(values)].sum() for k in outputs)
    return leaves, loss


def _describe(recipe) -> str:
    """A recipe as code: ``v0, v1 = leaves; v2 = v0 * v1; ...; loss = v2.sum()``."""
    n_leaves, ops, outputs = recipe
    lines, count = [", ".join(f"v{i}" for i in range(n_leaves)) + " = leaves"], n_leaves
    forms = {"add": "{a} + {b}", "mul": "{a} * {b}", "sub": "{a} - {b}", "tanh": "{a}.tanh()",
             "scale": "{a} * 0.5", "with a constant": "{a} * constant"}
    for name, i, j in ops:
        lines.append(f"v{count} = " + forms[name].format(a=f"v{i % count}", b=f"v{j % count}"))
        count += 1
    lines.append("loss = " + " + ".join(f"v{count - 1 - k % count}.sum()" for k in outputs))
    return "; ".join(lines)


def _order_problem(order, root) -> Mismatch | None:
    """What is wrong with ``order`` as backward's visiting order from ``root`` (None: nothing)."""
    from ..autograd.engine import AccumulateGrad, Node, visiting_order
    if not isinstance(order, (list, tuple)):
        return Mismatch(f"your function returned a {type(order).__name__}, not a list of nodes",
                        hint="collect the nodes in a list and return it", show_values=False)
    for item in order:
        if not isinstance(item, (Node, AccumulateGrad)):
            hint = {tg.Tensor: "a tensor's node is tensor.grad_fn; walk node.next_functions",
                    tuple: "next_functions holds (node, index) pairs: keep only the node",
                    type(None): "skip the None entries of next_functions (inputs without a "
                                "gradient)"}.get(type(item), "return graph nodes only")
            return Mismatch(f"your list holds a {type(item).__name__}", hint=hint,
                            show_values=False)
    reachable = visiting_order(root)
    names = {node: node.name() for node in reachable}
    twice = [node for node in set(order) if order.count(node) > 1]
    if twice:
        return Mismatch(f"{names.get(twice[0], 'a node')} appears {order.count(twice[0])} times "
                        "in your order", hint="a node used by several others is reached several "
                        "times: remember the nodes you visited (a set) and skip them",
                        show_values=False)
    missing = [node for node in reachable if node not in order]
    if missing:
        leaves = all(type(n) is AccumulateGrad for n in missing) and not any(
            type(n) is AccumulateGrad for n in order)
        return Mismatch(f"your order leaves out {len(missing)} of the {len(reachable)} nodes "
                        f"the root reaches, e.g. {names[missing[0]]}", hint=(
                            "the leaves' AccumulateGrad nodes belong in the order too: backward "
                            "stores .grad there" if leaves else "follow every edge of "
                            "node.next_functions, not only the first"), show_values=False)
    if len(order) != len(reachable):
        return Mismatch("your order holds nodes the root does not reach",
                        hint="start from root and walk node.next_functions only", show_values=False)
    if order[0] is not root:
        reversed_hint = order[-1] is root
        return Mismatch(f"your order starts with {order[0].name()}, not with the root "
                        f"({root.name()})", hint=(
                            "your list ends with the root: a depth-first walk appends a node "
                            "after its inputs, so reverse that list" if reversed_hint else
                            "backward starts at the root: it comes first"), show_values=False)
    position = {node: i for i, node in enumerate(order)}
    for node in order:
        for nxt, _ in node.next_functions:
            if nxt is not None and position[nxt] < position[node]:
                return Mismatch(
                    f"your order visits {nxt.name()} (position {position[nxt]}) before "
                    f"{node.name()} (position {position[node]}), which sends it a gradient",
                    hint="a node may run only once every node that uses its value has sent "
                         "its gradient; a breadth-first walk breaks this when a value is used "
                         "twice at different depths: append each node after visiting all its "
                         "inputs (depth first), then reverse the list", show_values=False)
    return None


def _expect_valid_order(topological_order: Callable, leaves: list, loss) -> list:
    with written_by_the_learner("autograd.order", "topological_order"):
        order = topological_order(loss.grad_fn)
    problem = _order_problem(order, loss.grad_fn)
    if problem is not None:
        raise problem
    return list(order)


def check_topological_order(topological_order: Callable) -> Feedback:
    """Exercise 3.4: backward's visiting order, then backward and the stepper run on it."""
    def shown() -> None:  # the chapter's own graph
        w, b = tg.tensor(2.0, requires_grad=True), tg.tensor(1.0, requires_grad=True)
        _expect_valid_order(topological_order, [w, b], (w * 3.0 + b - 10.0) ** 2)

    def random_graphs(recipe) -> None:
        leaves, loss = _build(recipe)
        try:
            _expect_valid_order(topological_order, leaves, loss)
        except Mismatch as mismatch:
            mismatch.problem += f", on the graph {_describe(recipe)}"
            raise

    def engine_runs_it() -> None:
        leaves, loss = _build((3, [("mul", 0, 1), ("add", 3, 2), ("tanh", 4, 0), ("mul", 5, 3),
                                   ("with a constant", 6, 0), ("sub", 7, 4)], [0, 2]))
        order = _expect_valid_order(topological_order, leaves, loss)
        loss.backward(retain_graph=True)
        expected = [leaf.grad.numpy().copy() for leaf in leaves]
        for leaf in leaves:
            leaf.grad = None
        with plugged_workload("autograd.order", topological_order, "backward ran"):
            steps = [step.node for step in tg.autograd.backward_steps(loss)]
        expect_true(steps == order, "the stepper's steps did not follow your order",
                    hint="return the same order each time you are called with the same root")
        for leaf, grad in zip(leaves, expected):
            expect_close(leaf.grad, grad, what="gradient of a leaf, with your order",
                         rtol=1e-10, atol=1e-12)
        x = tg.tensor(np.linspace(-1, 1, 4), requires_grad=True)
        with plugged_workload("autograd.order", topological_order, "gradcheck ran"):
            expect_true(tg.autograd.gradcheck(lambda t: (t * t.tanh() + t).sum(), (x,),
                                              raise_exception=False),
                        "gradcheck failed with your order plugged in")

    tests = [Test("the chapter's graph: loss = (w·3 + b − 10)²", shown),
             property_test("random graphs: values used twice, constants, several outputs",
                           _random_graph, random_graphs),
             Test("backward, the stepper and gradcheck with your order plugged in",
                  engine_runs_it)]
    return check("3.4", tests, candidate=topological_order,
                 solved="backward, the stepper and gradcheck ran on your topological order.")

"""The engine's replaceable parts: plugging a function in, the engine running on it,
its mistakes stopped with the part's name, and the engine's own part back afterwards."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd import engine, parts
from teachgrad.exercises import PartError, plug, plugged, unplug
from teachgrad.ops.elementwise import Mul


@pytest.fixture(autouse=True)
def _engine_parts_back():
    yield
    unplug()  # (a failing test must not leave a part plugged for the next)


def _realistic(seed: int = 0):
    """Leaves used twice, broadcasting, a matmul and a reduction: a graph worth ordering."""
    rng = np.random.default_rng(seed)
    x = tg.tensor(rng.normal(size=(3, 4)), requires_grad=True)
    w = tg.tensor(rng.normal(size=(4, 4)), requires_grad=True)
    b = tg.tensor(rng.normal(size=(4,)), requires_grad=True)
    return x, w, b


def _loss(x, w, b):
    y = x
    for _ in range(3):
        y = (y @ w + b).tanh() - y.sigmoid() * 0.5 + y / (b * b + 1)
    return (y * x).sum() + w.mean()


def _grads(run) -> list[np.ndarray]:
    leaves = _realistic()
    run(_loss(*leaves))
    return [t.grad.numpy().copy() for t in leaves]


def _same_bits(a: list, b: list) -> None:
    for u, v in zip(a, b):
        assert u.tobytes() == v.tobytes()


def depth_first_order(root):
    """A learner's order: a depth-first walk with an explicit stack, reversed post-order."""
    post, done, stack = [], set(), [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            post.append(node)
        elif node not in done:
            done.add(node)
            stack.append((node, True))
            stack += [(child, False) for child, _ in node.next_functions if child is not None]
    return post[::-1]


# --- autograd.order -----------------------------------------------------------------

def test_the_engines_own_order_plugged_gives_the_same_bits_and_steps():
    plain = _grads(lambda loss: loss.backward())
    names = [s.node.name() for s in tg.autograd.backward_steps(_loss(*_realistic()))]
    with plugged("autograd.order", engine.visiting_order) as part:
        _same_bits(_grads(lambda loss: loss.backward()), plain)
        assert [s.node.name() for s in tg.autograd.backward_steps(_loss(*_realistic()))] == names
    assert part.calls == 2


def test_backward_and_the_stepper_run_nodes_in_the_learners_order():
    leaves = _realistic()
    loss = _loss(*leaves)
    expected = depth_first_order(loss.grad_fn)
    assert expected != engine.visiting_order(loss.grad_fn)  # (a different order indeed)
    with plugged("autograd.order", depth_first_order) as part:
        steps = [s.node for s in tg.autograd.backward_steps(loss)]
        assert steps == expected and part.calls == 1
        np.testing.assert_allclose(leaves[1].grad.numpy(), _grads(lambda l: l.backward())[1])
    plain = _grads(lambda loss: loss.backward())
    with plugged("autograd.order", depth_first_order):
        for mine, engines in zip(_grads(lambda loss: loss.backward()), plain):
            np.testing.assert_allclose(mine, engines, rtol=1e-12)


def test_gradcheck_runs_on_the_learners_order():
    calls = []

    def counting(root):
        calls.append(root)
        return depth_first_order(root)

    x = tg.tensor(np.random.default_rng(1).normal(size=(2, 3)), requires_grad=True)
    with plugged("autograd.order", counting):
        assert tg.autograd.gradcheck(lambda t: (t * t.exp()).sum(), (x,))
    assert calls


@pytest.mark.parametrize("mistake, says", [
    (lambda root: depth_first_order(root)[::-1], "starting with"),
    (lambda root: [root] + depth_first_order(root)[1:][::-1], "which sends it a gradient"),
    (lambda root: depth_first_order(root)[:-1], "without"),
    (lambda root: depth_first_order(root) + [root], "twice"),
    (lambda root: None, "a NoneType"),
])
def test_an_order_backward_cannot_run_is_stopped_naming_the_part(mistake, says):
    x, w, b = _realistic()
    with plugged("autograd.order", mistake):
        with pytest.raises(PartError, match="your autograd.order") as caught:
            _loss(x, w, b).backward()
    assert says in str(caught.value) and x.grad is None  # (nothing half-written)


def test_tensors_instead_of_nodes_get_a_hint():
    x, w, b = _realistic()
    with plugged("autograd.order", lambda root: [x]), \
            pytest.raises(PartError, match=r"a Tensor at position 0 \(a tensor: its node is"):
        _loss(x, w, b).backward()


def test_an_error_in_the_learners_code_names_the_part_and_the_line():
    def broken(root):
        nodes = [root]
        return nodes[1]  # IndexError here

    with plugged("autograd.order", broken), pytest.raises(PartError) as caught:
        _loss(*_realistic()).backward()
    message = str(caught.value)
    assert message.startswith("in your autograd.order (plugged with tg.exercises.plug): IndexError")
    assert "test_plug.py, line" in message and "return nodes[1]" in message
    assert isinstance(caught.value.__cause__, IndexError)


def test_several_roots_at_once_are_refused_clearly():
    x, w, b = _realistic()
    with plugged("autograd.order", depth_first_order), pytest.raises(PartError, match="one loss"):
        tg.autograd.backward([(x * 2).sum(), (x * 3).sum()])


# --- autograd.sum_to_shape ----------------------------------------------------------

def test_the_engines_sum_to_shape_plugged_gives_the_same_bits_and_is_used():
    plain = _grads(lambda loss: loss.backward())
    with plugged("autograd.sum_to_shape", engine.sum_to_shape) as part:
        _same_bits(_grads(lambda loss: loss.backward()), plain)
    assert part.calls > 0  # (b broadcasts over the rows: its gradient is summed to (4,))


def test_gradcheck_and_backward_use_the_learners_sum_to_shape():
    def no_reduction(grad, shape):  # a wrong one: keeps only the first row
        return grad.reshape(-1, *shape)[0] if len(shape) < grad.ndim else grad

    x = tg.tensor(np.random.default_rng(2).normal(size=(3, 4)), requires_grad=True)
    b = tg.tensor(np.random.default_rng(3).normal(size=(4,)), requires_grad=True)
    assert tg.autograd.gradcheck(lambda x, b: (x * b).sum(), (x, b))
    with plugged("autograd.sum_to_shape", no_reduction):
        assert not tg.autograd.gradcheck(lambda x, b: (x * b).sum(), (x, b), raise_exception=False)


@pytest.mark.parametrize("result, says", [
    (lambda grad, shape: grad, "shape [3, 4] for a gradient of shape [3, 4]; expected shape [4]"),
    (lambda grad, shape: grad.numpy().sum(0), "a ndarray"),
    (lambda grad, shape: grad.sum(0).float(), "teachgrad.float32"),
])
def test_a_sum_to_shape_with_the_wrong_result_is_stopped(result, says):
    x = tg.tensor(np.ones((3, 4)), requires_grad=True)
    b = tg.tensor(np.ones(4), requires_grad=True)
    with plugged("autograd.sum_to_shape", result), pytest.raises(PartError) as caught:
        (x * b).sum().backward()
    assert "your autograd.sum_to_shape" in str(caught.value) and says in str(caught.value)


# --- backward:<Op> ------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Mul", "Div", "MatMul", "Sum", "Add", "Tanh", "Sigmoid", "Mean"])
def test_each_ops_own_formula_plugged_gives_the_same_bits(op):
    plain = _grads(lambda loss: loss.backward())
    part = parts.get(f"backward:{op}")
    with plugged(part.name, part.engine):
        _same_bits(_grads(lambda loss: loss.backward()), plain)
    assert part.calls > 0


def test_an_ops_formula_is_swapped_and_put_back():
    original = Mul.__dict__["backward"]

    def mul_backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a * 2  # a wrong db

    a = tg.tensor([1.0, 2.0], dtype=tg.float64, requires_grad=True)
    b = tg.tensor([3.0, 4.0], dtype=tg.float64, requires_grad=True)
    with plugged("backward:Mul", mul_backward) as part:
        (a * b).sum().backward()
        assert b.grad.tolist() == [2.0, 4.0] and part.calls == 1
        assert not tg.autograd.gradcheck(lambda a, b: a * b, (a, b), raise_exception=False)
    assert Mul.__dict__["backward"] is original
    assert tg.autograd.gradcheck(lambda a, b: a * b, (a, b))


@pytest.mark.parametrize("formula, says", [
    (lambda ctx, grad: grad.numpy(), "a ndarray as gradient 0"),
    (lambda ctx, grad: (grad,), "returned 1 gradients"),
    (lambda ctx, grad: (grad.sum(0), grad.sum(0)), "returned a gradient of shape [2, 2] for input 1"),
])
def test_a_formula_with_the_wrong_result_is_stopped_naming_the_part(formula, says):
    a = tg.tensor(np.ones((2, 2)), requires_grad=True)
    b = tg.tensor(np.ones((3, 2, 2)), requires_grad=True)
    with plugged("backward:Mul", formula), pytest.raises((PartError, RuntimeError, TypeError)) as e:
        (a * b).sum().backward()
    assert "your backward:Mul (plugged with tg.exercises.plug)" in str(e.value)
    assert says in str(e.value)


def test_unknown_parts_and_non_functions_are_refused_before_anything_changes():
    with pytest.raises(KeyError, match="autograd.order"):
        plug("backward:NoSuchOp", lambda ctx, g: g)
    with pytest.raises(KeyError, match="there is no part called 'autograd.orde'"):
        plug("autograd.orde", depth_first_order)
    with pytest.raises(TypeError, match="needs a function"):
        plug("backward:Mul", 3)
    assert tg.exercises.plugged_parts() == {}


# --- optim.sgd_step / optim.adam_step -----------------------------------------------

def _train(make_optimizer, steps: int = 5) -> list[np.ndarray]:
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(3, 5), tg.nn.Tanh(), tg.nn.Linear(5, 1))
    optimizer = make_optimizer(model.parameters())
    x = tg.tensor(np.random.default_rng(4).normal(size=(8, 3)), dtype=tg.float32)
    for _ in range(steps):
        optimizer.zero_grad()
        (model(x) ** 2).mean().backward()
        optimizer.step()
    return [p.detach().numpy().copy() for p in model.parameters()]


OPTIMIZERS = {
    "optim.sgd_step": [
        lambda p: tg.optim.SGD(p, lr=0.1),
        lambda p: tg.optim.SGD(p, lr=0.1, momentum=0.9),
        lambda p: tg.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
        lambda p: tg.optim.SGD(p, lr=0.1, momentum=0.5, dampening=0.3, maximize=True),
    ],
    "optim.adam_step": [
        lambda p: tg.optim.Adam(p, lr=0.01),
        lambda p: tg.optim.Adam(p, lr=0.01, weight_decay=0.1, amsgrad=True),
    ],
}


@pytest.mark.parametrize("name, index", [(n, i) for n, makers in OPTIMIZERS.items()
                                         for i in range(len(makers))])
def test_the_optimizers_own_step_plugged_trains_to_the_same_bits(name, index):
    make = OPTIMIZERS[name][index]
    plain = _train(make)
    part = parts.get(name) if name in parts._PARTS else tg.exercises.parts()[name]
    with plugged(name, part.engine):
        _same_bits(_train(make), plain)
    assert part.calls == 5 * 4  # (four parameters, five steps)


def test_a_learners_sgd_step_returning_a_new_value_is_written_into_the_parameter():
    def sgd(param, grad, state, group):
        return param - group["lr"] * grad

    plain = _train(lambda p: tg.optim.SGD(p, lr=0.1))
    with plugged("optim.sgd_step", sgd):
        for mine, engines in zip(_train(lambda p: tg.optim.SGD(p, lr=0.1)), plain):
            np.testing.assert_allclose(mine, engines, rtol=1e-6)


@pytest.mark.parametrize("step, says", [
    (lambda param, grad, state, group: None, "forget to return it"),
    (lambda param, grad, state, group: param.sum(), "expected teachgrad.float32, shape [5, 3]"),
    (lambda param, grad, state, group: param.double(), "a teachgrad.float64 tensor"),
])
def test_an_update_with_the_wrong_result_is_stopped(step, says):
    with plugged("optim.sgd_step", step), pytest.raises(PartError) as caught:
        _train(lambda p: tg.optim.SGD(p, lr=0.1), steps=1)
    assert "your optim.sgd_step" in str(caught.value) and says in str(caught.value)


def test_adamw_keeps_its_own_update():
    plain = _train(lambda p: tg.optim.AdamW(p, lr=0.01))
    with plugged("optim.adam_step", lambda *args: 1 / 0) as part:
        _same_bits(_train(lambda p: tg.optim.AdamW(p, lr=0.01)), plain)
    assert part.calls == 0


# --- plug, unplug, plugged ----------------------------------------------------------

def test_plug_lasts_until_unplug_and_plugged_restores_what_was_there():
    part = plug("autograd.order", depth_first_order)
    with plugged("autograd.order", engine.visiting_order):
        assert tg.exercises.plugged_parts() == {"autograd.order": engine.visiting_order}
    assert part.fn is depth_first_order
    with pytest.raises(ZeroDivisionError), plugged("autograd.order", engine.visiting_order):
        1 / 0
    assert part.fn is depth_first_order
    unplug("autograd.order")
    assert part.fn is None and tg.exercises.plugged_parts() == {}


def test_every_part_says_what_it_receives_and_returns():
    listed = tg.exercises.parts()
    assert {"autograd.order", "autograd.sum_to_shape", "optim.sgd_step",
            "optim.adam_step"} <= set(listed)
    for part in listed.values():
        assert part.receives and part.returns and callable(part.engine)


def test_a_learner_stub_raising_not_implemented_passes_through_unwrapped():
    def stub(root):
        raise NotImplementedError("fill in topological_order")  # (the learner edition's stub)

    with plugged("autograd.order", stub), pytest.raises(NotImplementedError):
        _loss(*_realistic()).backward()

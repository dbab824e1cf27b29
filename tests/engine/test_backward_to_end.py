"""``backward()``'s own loop (``engine._run_to_end``) runs the stepper's steps, in its order.

With no hook on any leaf, no tool watching and no learner's order plugged in,
``backward()`` runs the nodes without counting dependencies first (the node made last
among those with a gradient runs next) and adds each leaf's gradient at the end. These
tests hold it to the generator the stepper drives (``backward_steps``), which counts
dependencies and runs each leaf's step as soon as its gradient is complete: the same
gradients to the bit, the same order of nodes, the same errors; and they check when
``backward()`` takes which of the two.
"""
from __future__ import annotations

import gc
from collections import deque

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd import backward_steps, engine, function
from teachgrad.backends.numpy_backend import kept_number


@pytest.fixture
def loops(monkeypatch):
    """Counts of the two loops backward() may take: {"to_end": n, "steps": n}."""
    counts = {"to_end": 0, "steps": 0}
    to_end, steps = engine._run_to_end, engine._run

    def counted_to_end(*args, **kwargs):
        counts["to_end"] += 1
        return to_end(*args, **kwargs)

    def counted_steps(*args, **kwargs):
        counts["steps"] += 1
        return steps(*args, **kwargs)

    monkeypatch.setattr(engine, "_run_to_end", counted_to_end)
    monkeypatch.setattr(engine, "_run", counted_steps)
    return counts


class Log(tg.autograd.Function):
    """``x * factor`` whose backward (on tensors) notes its name in ``Log.order``."""
    order: list = []

    @staticmethod
    def forward(ctx, x, name, factor):
        ctx.name, ctx.factor = name, factor
        return x * factor

    @staticmethod
    def backward(ctx, grad):
        Log.order.append(ctx.name)
        return grad * ctx.factor, None, None


class Pair(tg.autograd.Function):
    """Two outputs, ``2x`` and ``3x``: an unused one gets zeros (materialize_grads)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g2, g3):
        return g2 * 2 + g3 * 3


class Nothing(tg.autograd.Function):
    """Sends no gradient at all: the branch below it is never reached."""

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, grad):
        return None


def _chain(x, w, b):
    y = x
    for _ in range(3):
        y = (y * w + 0.1).tanh() - y.sigmoid() * 0.5
    return (y * b).sum()


def _split(x, w, b):
    qkv = x @ w  # (4, 6): q, k and v side by side, as in attention
    q, k, v = qkv.split(2, dim=1)
    return (q * k + v.tanh() * b).sum() + qkv.chunk(3, dim=1)[1].sum() * 0.5


def _mixed(x, w, b):
    first, second = Pair.apply(x * w)
    h = Log.apply(second, "second", 2.0) + Log.apply(x, "x", 3.0)
    m, _ = (h * b).max(dim=1)  # (a formula on tensors, and an index output)
    dead = Nothing.apply(w * 5)  # (w gets nothing through here)
    return m.sum() + (dead * 0).sum() + (first.relu() * 0.25).sum()


def _broadcast(x, w, b):
    s = (x * w).sum()  # 0-d
    return ((x + b[0]) * s).tanh().mean() + (s / 3).sigmoid() * b.sum()


def _hooked(x, w, b):
    mid = (x * w).tanh()
    mid.register_hook(lambda g: g * 2)
    mid.retain_grad()
    out = (mid * b).sigmoid()
    out.register_hook(lambda g: None)
    return out.sum(), mid


GRAPHS = {
    "chain": (_chain, [(4, 3), (4, 3), (4, 3)]),
    "split": (_split, [(4, 5), (5, 6), (4, 2)]),
    "mixed": (_mixed, [(4, 3), (4, 3), (4, 3)]),
    "broadcast": (_broadcast, [(4, 3), (3,), (4, 3)]),
}


def _leaves(shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [tg.tensor(rng.standard_normal(s), dtype=dtype, requires_grad=True) for s in shapes]


def _by_stepper(loss, **kwargs):
    steps = list(backward_steps(loss, **kwargs))
    assert steps[-1].pending == 0


@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_backward_gives_the_steppers_gradients_to_the_bit(name, dtype, loops):
    graph, shapes = GRAPHS[name]
    got, want = _leaves(shapes, dtype), _leaves(shapes, dtype)
    got[0].grad = tg.ones(*shapes[0], dtype=dtype)  # added into a .grad already there
    want[0].grad = tg.ones(*shapes[0], dtype=dtype)
    Log.order = []
    graph(*got).backward()
    assert loops == {"to_end": 1, "steps": 0}
    order, Log.order = Log.order, []
    _by_stepper(graph(*want))
    assert Log.order == order  # the same nodes in the same order
    for g, w in zip(got, want):
        if w.grad is None:
            assert g.grad is None
            continue
        assert g.grad.dtype is dtype and g.grad.shape == w.shape and g.grad.is_contiguous()
        np.testing.assert_array_equal(g.grad.numpy(), w.grad.numpy())


def test_the_order_of_nodes_is_the_steppers_on_a_diamond(loops):
    def diamond(x):
        a = Log.apply(x, "a", 2.0)
        b = Log.apply(a, "b", 3.0)
        c = Log.apply(a, "c", 5.0)
        d = Log.apply(x, "d", 7.0)
        return (Log.apply(b + c, "top", 1.5) * d).sum()

    orders = []
    for run in (lambda loss: loss.backward(), _by_stepper):
        Log.order = []
        x = tg.tensor([1.0, -2.0], requires_grad=True)
        run(diamond(x))
        orders.append((Log.order, x.grad.tolist()))
    assert orders[0] == orders[1]
    assert orders[0][0] == ["top", "d", "c", "b", "a"]  # the node made last runs first
    assert loops["to_end"] == 1


def test_hooks_retain_grad_and_several_roots(loops):
    results = []
    for run in ("backward", "stepper"):
        x, w, b = _leaves([(3, 2), (3, 2), (3, 2)], tg.float64, seed=5)
        loss, mid = _hooked(x, w, b)
        extra = (mid * 3).sum()  # a second root above a node of the first
        if run == "backward":
            tg.autograd.backward([loss, extra])
        else:
            deque(backward_steps([loss, extra]), maxlen=0)
        results.append([t.grad.numpy() for t in (x, w, b, mid)])
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)
    assert loops["to_end"] == 1


def test_backward_inside_no_grad_and_with_retain_graph(loops):
    x, w, b = _leaves([(4, 3)] * 3, tg.float32, seed=2)
    loss = _chain(x, w, b)
    with tg.no_grad():
        loss.backward(retain_graph=True)
        assert not tg.is_grad_enabled()  # (restored as it was)
    assert tg.is_grad_enabled()
    first = x.grad.numpy().copy()
    loss.backward()  # through the kept graph again: twice the gradient
    np.testing.assert_array_equal(x.grad.numpy(), first + first)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), first + first)  # nothing added
    assert loops["to_end"] == 3


def test_a_leaf_as_root_and_a_leaf_that_gets_nothing(loops):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    x.backward(tg.tensor([3.0, 4.0]))
    assert x.grad.tolist() == [3.0, 4.0]
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    (Nothing.apply(w * 2) * 3).sum().backward()
    assert w.grad is None
    assert loops["to_end"] == 2


def test_a_hook_on_a_leaf_sends_backward_through_the_stepper(loops):
    """A leaf's hooks see its gradient as soon as it is complete, before the nodes below
    run (DDP sends it then): the stepper's loop does that, so backward() takes it."""
    before = function.hooked_leaves
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([0.5, -1.0], requires_grad=True)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(list(Log.order)))
    assert function.hooked_leaves == before + 1
    Log.order = []
    late = Log.apply(w, "late", 2.0)  # made before x's branch, so it runs after it
    h = x * 3
    ((late * 5).sum() + (h * 1.0).sum()).backward()
    assert loops == {"to_end": 0, "steps": 1}
    assert seen == [[]] and Log.order == ["late"]  # x's hook ran before w's branch
    assert x.grad.tolist() == [3.0, 3.0] and w.grad.tolist() == [10.0, 10.0]
    del x, h
    gc.collect()
    assert function.hooked_leaves == before  # (counted for as long as it lives)
    (w * 2).sum().backward()
    assert loops == {"to_end": 1, "steps": 1}


def test_a_leaf_is_counted_while_it_holds_hooks(loops):
    before = function.hooked_leaves
    x = tg.tensor([1.0], requires_grad=True)
    first = x.register_hook(lambda g: g * 2)  # (a hook on the leaf's gradient)
    second = x.register_post_accumulate_grad_hook(lambda t: None)
    assert function.hooked_leaves == before + 1  # (one leaf, counted once)
    (x * 5).sum().backward()
    assert x.grad.tolist() == [10.0] and loops == {"to_end": 0, "steps": 1}
    first.remove()
    assert function.hooked_leaves == before + 1  # (it still holds one)
    second.remove()
    second.remove()  # (twice: nothing more happens)
    assert function.hooked_leaves == before
    (x * 5).sum().backward()
    assert x.grad.tolist() == [15.0] and loops == {"to_end": 1, "steps": 1}
    x.register_hook(lambda g: g * 0)
    assert function.hooked_leaves == before + 1
    del x
    gc.collect()
    assert function.hooked_leaves == before  # (or until it dies)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kept_numbers_give_the_bits_of_python_numbers(dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(257) * 1e3).astype(dtype)
    a[:4] = [0.0, -0.0, np.inf, np.nan]
    for v in (0.5, 0.1, -3.7, 1.0, 0.0, -0.0, 1e-45, 3e38, 1e300, -1e300, float("nan"),
              float("inf"), 2.0 ** -149, 1 / 3):
        k = kept_number(v, np.dtype(dtype))
        assert type(k) is float or (k.shape == () and k.dtype == dtype)
        with np.errstate(all="ignore"):
            for op in (np.multiply, np.add, np.subtract, np.divide):
                np.testing.assert_array_equal(op(a, k), op(a, v))
                np.testing.assert_array_equal(op(k, a), op(v, a))
                assert np.array_equal(np.signbit(op(a, k)), np.signbit(op(a, v)))
    assert kept_number(0.5, np.dtype(np.int64)) == 0.5  # (no table: the number itself)


def test_ctx_one_is_one_on_tensors_and_a_read_only_array_on_arrays():
    seen = []

    class Twice(tg.autograd.Function):
        formula_on_arrays = True

        @staticmethod
        def forward(ctx, a, keep):
            out = ctx.backend.binary("mul", a._array, 2.0)
            if keep:
                ctx.out = out  # (the dtype ctx.one takes on arrays)
            return out

        @staticmethod
        def backward(ctx, grad):
            seen.append(ctx.one)
            return grad * (ctx.one + ctx.one), None

    for keep in (True, False):
        for run in (lambda loss: loss.backward(), _by_stepper):
            x = tg.tensor([1.0, -2.0], requires_grad=True)
            run(Twice.apply(x, keep).sum())
            assert x.grad.tolist() == [2.0, 2.0]
    on_arrays, stepper, without_output, _ = seen
    assert type(on_arrays) is np.ndarray and on_arrays.shape == () and on_arrays == 1
    assert on_arrays.dtype == np.float32 and not on_arrays.flags.writeable
    assert stepper == 1  # (the stepper runs the formula on arrays too)
    assert type(without_output) is float and without_output == 1.0  # (no output: no dtype)

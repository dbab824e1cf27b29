"""Autograd behaviour: accumulation, graph freeing, hooks, grad mode, custom Functions
and the step-by-step engine. Expected gradients are worked out by hand in comments."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd import AccumulateGrad, BackwardStep, Function, backward_steps
from teachgrad.autograd.function import FREED_GRAPH_MESSAGE


def leaf(*values: float) -> tg.Tensor:
    return tg.tensor(list(values), requires_grad=True)


# -- accumulation ---------------------------------------------------------------------------


def test_grads_accumulate_across_backward_calls():
    x = leaf(1.0, 2.0)
    (x * x).sum().backward()  # d/dx x² = 2x
    first = x.grad
    assert first.tolist() == [2.0, 4.0]
    (x * 3).sum().backward()  # + 3
    assert x.grad.tolist() == [5.0, 7.0]
    assert x.grad is first  # accumulated into the same tensor, as in PyTorch


def test_setting_grad_to_none_starts_over():
    x = leaf(1.0, 2.0)
    (x * 3).sum().backward()
    x.grad = None
    (x * 5).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]


def test_grad_is_not_an_alias_of_the_incoming_gradient():
    x = leaf(1.0, 2.0)
    g = tg.tensor([1.0, 1.0])
    x.backward(g)
    g.add_(10)  # changing the seed afterwards must not change x.grad
    assert x.grad.tolist() == [1.0, 1.0]


def test_only_leaves_keep_grad():
    x = leaf(1.0, 2.0)
    y = x * 2
    y.sum().backward()
    assert y.grad is None and not y.is_leaf and x.is_leaf
    assert y.grad_fn.name() == "MulBackward"


def test_leaf_grads_are_stored_row_major():
    # x @ W.T sends W a transposed gradient; .grad keeps W's own (row-major) layout,
    # so that optimizer updates walk both in the same order
    w = tg.randn(3, 4, requires_grad=True)
    x = tg.randn(5, 4)
    (x @ w.T).sum().backward()
    assert w.grad.array.flags.c_contiguous
    np.testing.assert_allclose(w.grad.numpy(), np.tile(x.numpy().sum(0), (3, 1)), rtol=1e-5)


def test_a_repeated_input_is_two_edges_whose_grads_add():
    x = leaf(3.0)
    y = x * x
    (edge0, nr0), (edge1, nr1) = y.grad_fn.next_functions
    assert edge0 is edge1 and isinstance(edge0, AccumulateGrad) and edge0.variable is x
    y.backward()
    assert x.grad.item() == 6.0  # x·1 + 1·x


def test_a_tensor_used_by_two_operations():
    x = leaf(0.5, -1.0)
    a, b = x.exp(), x * 2
    (a * b).sum().backward()  # d/dx (2x·eˣ) = 2eˣ + 2x·eˣ
    expected = 2 * np.exp([0.5, -1.0]) * (1 + np.array([0.5, -1.0]))
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


def test_broadcast_inputs_get_grads_summed_back_to_their_shape():
    w = tg.ones(3, requires_grad=True)
    b = tg.tensor(0.0, requires_grad=True)
    x = tg.arange(6.0).reshape(2, 3)
    (x * w + b).sum().backward()
    assert w.grad.tolist() == [3.0, 5.0, 7.0]  # column sums of x
    assert b.grad.item() == 6.0 and b.grad.shape == ()


def test_backward_with_an_explicit_gradient():
    x = leaf(1.0, 2.0)
    (x * x).backward(tg.tensor([1.0, 0.5]))
    assert x.grad.tolist() == [2.0, 2.0]


def test_backward_on_a_leaf():
    x = tg.tensor(2.0, requires_grad=True)
    x.backward()
    assert x.grad.item() == 1.0


def test_tg_autograd_backward_is_tensor_backward():
    x = leaf(1.0, 2.0)
    tg.autograd.backward((x * 4).sum())
    assert x.grad.tolist() == [4.0, 4.0]


def test_gradient_dtype_follows_the_leaf():
    x = tg.tensor([1.0], dtype=tg.float64, requires_grad=True)
    (x.float() * 2).sum().backward()
    assert x.grad.dtype is tg.float64


def test_parts_of_the_graph_that_need_no_grad_get_none():
    x, c = leaf(1.0, 2.0), tg.tensor([5.0, 6.0])
    (x * c).sum().backward()
    assert c.grad is None and x.grad.tolist() == [5.0, 6.0]


def test_max_dim_indices_never_require_grad():
    x = tg.tensor([[1.0, 5.0], [3.0, 2.0]], requires_grad=True)
    values, indices = x.max(1)
    assert values.requires_grad and not indices.requires_grad and indices.grad_fn is None
    values.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0], [1.0, 0.0]]


# -- freeing the graph ----------------------------------------------------------------------------


def test_second_backward_through_a_freed_graph_raises():
    x = leaf(1.0, 2.0)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError) as info:
        y.backward()
    assert str(info.value) == FREED_GRAPH_MESSAGE
    assert "retain_graph=True" in str(info.value)
    assert x.grad.tolist() == [2.0, 4.0]  # nothing was added by the failed call


def test_freed_graph_is_detected_before_any_gradient_moves():
    x, w = leaf(1.0, 2.0), leaf(3.0)
    h = x * x
    h.sum().backward()  # frees Mul
    x.grad = None
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        (h.sum() + (w * 2).sum()).backward()  # w's branch is fresh, h's is freed
    assert w.grad is None and x.grad is None


def test_retain_graph_allows_a_second_backward():
    x = leaf(1.0, 2.0)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]


# -- hooks and retain_grad ---------------------------------------------------------------------------


def test_hook_on_a_leaf_sees_and_can_replace_the_grad():
    x = leaf(1.0, 2.0)
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    (x * 3).sum().backward(retain_graph=True)
    assert seen == [[3.0, 3.0]] and x.grad.tolist() == [30.0, 30.0]
    handle.remove()
    x.grad = None
    (x * 3).sum().backward()
    assert seen == [[3.0, 3.0]] and x.grad.tolist() == [3.0, 3.0]
    handle.remove()  # removing twice is harmless


def test_hook_on_a_non_leaf_changes_what_flows_upstream():
    x = leaf(1.0, 2.0)
    y = x * 3
    seen = []
    y.register_hook(lambda g: seen.append(g.tolist()))  # returns None: grad unchanged
    y.register_hook(lambda g: g * 2)
    (y * y).sum().backward()  # dL/dy = 2y = [6, 12], doubled by the hook, times 3
    assert seen == [[6.0, 12.0]]
    assert x.grad.tolist() == [36.0, 72.0]


def test_hook_on_a_tensor_without_grad_raises():
    message = "cannot register a hook on a tensor that doesn't require gradient"
    with pytest.raises(RuntimeError, match=message):
        tg.zeros(2).register_hook(lambda g: g)


def test_retain_grad_keeps_a_non_leaf_grad_and_accumulates():
    x = leaf(1.0, 2.0)
    y = x * 3
    y.retain_grad()
    y.retain_grad()  # twice is the same as once
    assert y.retains_grad and not x.retains_grad
    (y.sum() * 2).backward(retain_graph=True)
    assert y.grad.tolist() == [2.0, 2.0]
    y.sum().backward()
    assert y.grad.tolist() == [3.0, 3.0]


def test_retain_grad_shows_the_grad_after_other_hooks():
    x = leaf(1.0, 2.0)
    y = x * 3
    y.retain_grad()
    y.register_hook(lambda g: g * 10)  # registered later, still runs first
    y.sum().backward()
    assert y.grad.tolist() == [10.0, 10.0] and x.grad.tolist() == [30.0, 30.0]


# -- grad mode ----------------------------------------------------------------------------------------


def test_no_grad_and_enable_grad_as_context_managers():
    x = leaf(1.0)
    with tg.no_grad():
        assert not tg.is_grad_enabled()
        y = x * 2
        with tg.enable_grad():
            assert tg.is_grad_enabled()
            z = x * 2
        assert not tg.is_grad_enabled()
    assert tg.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf
    assert z.requires_grad and z.grad_fn is not None


def test_grad_mode_as_decorators_with_and_without_parentheses():
    @tg.no_grad()
    def doubled(t):
        return t * 2, tg.is_grad_enabled()

    @tg.no_grad
    def tripled(t):
        return t * 3

    @tg.enable_grad()
    def recorded(t):
        return t * 4

    x = leaf(1.0)
    out, enabled = doubled(x)
    assert not out.requires_grad and not enabled
    assert not tripled(x).requires_grad and tripled.__name__ == "tripled"
    with tg.no_grad():
        assert recorded(x).requires_grad
    assert tg.is_grad_enabled()


def test_no_grad_restores_the_mode_after_an_exception():
    with pytest.raises(ValueError):
        with tg.no_grad():
            raise ValueError("boom")
    assert tg.is_grad_enabled()


def test_set_grad_enabled_as_call_context_manager_and_decorator():
    x = leaf(1.0)
    try:
        tg.set_grad_enabled(False)  # a plain call switches the mode
        assert not tg.is_grad_enabled()
        assert not (x * 2).requires_grad
    finally:
        tg.set_grad_enabled(True)
    assert tg.is_grad_enabled()
    with tg.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert tg.is_grad_enabled()
    with tg.no_grad():
        with tg.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not tg.is_grad_enabled()

    @tg.set_grad_enabled(False)
    def f(t):
        return t * 2

    assert tg.is_grad_enabled()
    assert not f(x).requires_grad
    assert tg.is_grad_enabled()


def test_no_grad_refuses_arguments():
    with pytest.raises(TypeError, match="no_grad\\(\\) takes no arguments"):
        tg.no_grad(1)


def test_backward_of_something_computed_under_no_grad_raises():
    x = leaf(1.0)
    with tg.no_grad():
        y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        y.backward()


# -- custom Functions ---------------------------------------------------------------------------------


class ScaledSquare(Function):
    """k·x², with k a plain number (so its gradient slot is None)."""

    rule = "∂(k·x²)/∂x = 2k·x"
    calls: list = []

    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        ScaledSquare.calls.append(ctx.needs_input_grad)
        return x * x * k

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * ctx.k * x, None


def test_custom_function_forward_backward_and_rule():
    x = leaf(1.0, -2.0)
    y = ScaledSquare.apply(x, 3.0)
    assert y.tolist() == [3.0, 12.0]
    assert y.grad_fn.name() == "ScaledSquareBackward" and y.grad_fn.rule == "∂(k·x²)/∂x = 2k·x"
    y.sum().backward()
    assert x.grad.tolist() == [6.0, -12.0]


def test_custom_function_forward_runs_without_recording():
    class Probe(Function):
        @staticmethod
        def forward(ctx, x):
            inner = x * 2
            Probe.inner_requires_grad = inner.requires_grad
            return inner

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    x = leaf(1.0)
    y = Probe.apply(x)
    assert not Probe.inner_requires_grad and y.grad_fn.name() == "ProbeBackward"


def test_needs_input_grad():
    ScaledSquare.calls.clear()
    ScaledSquare.apply(leaf(1.0), 2.0)
    ScaledSquare.apply(tg.tensor([1.0]), 2.0)
    assert ScaledSquare.calls == [(True, False), (False, False)]


def test_function_without_inputs_needing_grad_records_nothing():
    y = ScaledSquare.apply(tg.tensor([2.0]), 1.0)
    assert y.grad_fn is None and not y.requires_grad


def test_mark_non_differentiable():
    class WithMask(Function):
        @staticmethod
        def forward(ctx, x):
            out, mask = x * 2, (x > 0).float()
            ctx.mark_non_differentiable(mask)
            return out, mask

        @staticmethod
        def backward(ctx, grad, grad_mask):
            return grad * 2

    x = leaf(1.0, -1.0)
    out, mask = WithMask.apply(x)
    assert out.requires_grad and not mask.requires_grad and mask.grad_fn is None
    out.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_multiple_outputs_get_one_gradient_each():
    class Split(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, grad_double, grad_triple):
            return grad_double * 2 + grad_triple * 3

    x = leaf(1.0, 2.0)
    double, triple = Split.apply(x)
    assert double.grad_fn is triple.grad_fn
    (double.sum() + (triple * triple).sum()).backward()  # 2 + 3·2·(3x)
    assert x.grad.tolist() == [20.0, 38.0]
    y = leaf(1.0, 2.0)
    double, _ = Split.apply(y)
    double.sum().backward()  # the unused output's gradient arrives as zeros
    assert y.grad.tolist() == [2.0, 2.0]


def test_function_returning_its_input_gives_a_new_tensor():
    class Identity(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad

    x = leaf(1.0)
    y = Identity.apply(x)
    assert y is not x and y.grad_fn is not None and x.grad_fn is None


def test_function_cannot_be_instantiated():
    message = r"ScaledSquare is used through its class: call ScaledSquare.apply\(...\)"
    with pytest.raises(RuntimeError, match=message):
        ScaledSquare()


def test_backward_returning_the_wrong_number_of_gradients():
    class TooMany(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    with pytest.raises(RuntimeError, match="returned 2 gradients, but its forward took 1 inputs"):
        TooMany.apply(leaf(1.0)).sum().backward()


def test_backward_returning_a_badly_shaped_gradient():
    class WrongShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return tg.ones(5)

    message = r"WrongShapeBackward returned a gradient of shape \[5\] for input 0, which has shape \[2\]"
    with pytest.raises(RuntimeError, match=message):
        WrongShape.apply(leaf(1.0, 2.0)).sum().backward()


def test_saved_tensors_after_free_raise():
    contexts = []

    class Keep(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            contexts.append(ctx)
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return grad

    Keep.apply(leaf(1.0)).sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        contexts[0].saved_tensors


def test_in_place_change_of_a_saved_tensor_raises_the_version_error():
    x = leaf(1.0, 2.0)
    c = tg.tensor([3.0, 4.0])
    y = (x * c).sum()  # Mul saves c to compute d/dx
    c += 1
    assert c._version == 1
    message = r"saved tensor 1, shape \[2\]\) was modified in place .*its version is 1, expected 0"
    with pytest.raises(RuntimeError, match=message):
        y.backward()


def test_views_and_detach_share_the_version_counter():
    c = tg.tensor([[3.0, 4.0], [5.0, 6.0]])
    views = [c.detach(), c.view(4), c.T, c[0], c[:, 1:], c.data, c.contiguous()]
    for i, view in enumerate(views, start=1):
        view.add_(0)
        assert c._version == i and view._version == i
    assert c.expand(3, 2, 2)._version == len(views)
    copy = c.T.reshape(4)  # a transposed tensor reshaped is a copy: its own counter
    copy.add_(1)
    assert copy._version == 1 and c._version == len(views)
    assert tg.tensor([1.0]).clone()._version == 0


def test_in_place_change_through_a_view_or_detach_raises_the_version_error():
    message = r"saved tensor 1, shape \[2, 2\]\) was modified in place"
    x = leaf(1.0, 2.0).reshape(1, 2)
    c = tg.tensor([[3.0, 4.0], [5.0, 6.0]])
    y = (x * c).sum()
    c[0].detach().add_(1)  # through a view of a detached tensor: still c's storage
    with pytest.raises(RuntimeError, match=message):
        y.backward()


@pytest.mark.parametrize("op", ["exp", "tanh", "sigmoid", "sqrt"])
def test_in_place_change_of_an_output_that_backward_reuses_raises(op):
    # these backward formulas reuse the forward's result (tanh: 1 - out²)
    x = leaf(1.0, 2.0)
    y = getattr(x, op)()
    with tg.no_grad():
        y.view(2)[1:].mul_(2)
    with pytest.raises(RuntimeError, match=r"the output of this operation\) was modified in "
                                           r"place .*its version is 1, expected 0"):
        y.sum().backward()
    assert x.grad is None  # nothing was written


def test_requires_grad_needs_a_floating_point_dtype():
    message = "only tensors of floating point dtype can require gradients, not teachgrad.int64"
    with pytest.raises(RuntimeError, match=message):
        tg.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match=message):
        tg.arange(3).requires_grad_()
    assert tg.arange(3).float().requires_grad_().requires_grad


def test_requires_grad_flag_only_changes_on_leaves():
    y = leaf(1.0) * 2
    message = "you can only change requires_grad of leaf tensors; this one was made by MulBackward"
    with pytest.raises(RuntimeError, match=message):
        y.requires_grad_(False)
    y.detach().requires_grad_(False)  # fine


# -- the step-by-step engine ------------------------------------------------------------------------------


def build_graph():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([3.0, -1.0], requires_grad=True)
    h = (x * w).tanh()
    loss = (h * x + w.exp()).sum()
    return x, w, h, loss


def test_backward_steps_follows_the_order_of_backward_and_gives_the_same_grads():
    # the order backward() uses, observed from the inside with hooks on every node's output
    x, w, h, loss = build_graph()
    seen_by_backward = []
    for name, t in [("x", x), ("w", w), ("h", h), ("loss", loss)]:
        t.register_hook(lambda g, name=name: seen_by_backward.append(name))
    loss.backward()

    x2, w2, h2, loss2 = build_graph()
    steps = list(backward_steps(loss2))
    names = {id(loss2.grad_fn): "loss", id(h2.grad_fn): "h",
             id(x2._accumulator()): "x", id(w2._accumulator()): "w"}
    stepped = [names[id(s.node)] for s in steps if id(s.node) in names]
    assert stepped == seen_by_backward
    assert [s.index for s in steps] == list(range(len(steps)))
    np.testing.assert_allclose(x2.grad.numpy(), x.grad.numpy())
    np.testing.assert_allclose(w2.grad.numpy(), w.grad.numpy())


def test_backward_steps_is_lazy_and_reports_each_step():
    x = leaf(1.0, 2.0)
    w = leaf(3.0, 4.0)
    loss = (x * w).sum()
    steps = backward_steps(loss)
    assert x.grad is None  # nothing ran yet
    first = next(steps)
    assert isinstance(first, BackwardStep) and first.index == 0
    assert first.node is loss.grad_fn and first.node.name() == "SumBackward"
    assert first.grad_outputs[0].item() == 1.0
    assert [g.tolist() for g in first.grad_inputs[:1]] == [[1.0, 1.0]]
    mul = next(steps)
    assert mul.node.name() == "MulBackward" and mul.rule == mul.node.rule
    assert [g.tolist() for g in mul.grad_inputs] == [[3.0, 4.0], [1.0, 2.0]]  # d/dx = w, d/dw = x
    leaves = list(steps)
    assert all(isinstance(s.node, AccumulateGrad) for s in leaves)
    assert {id(s.leaf) for s in leaves} == {id(x), id(w)}
    assert x.grad.tolist() == [3.0, 4.0] and w.grad.tolist() == [1.0, 2.0]


def test_backward_step_accumulated_flags_for_x_times_x():
    x = leaf(3.0)
    steps = list(backward_steps(x * x))
    mul, acc = steps
    assert mul.node.name() == "MulBackward"
    assert mul.accumulated == (False, True)  # the second edge adds to the first one's gradient
    assert [g.item() for g in mul.grad_inputs] == [3.0, 3.0]
    assert acc.leaf is x and acc.grad_outputs[0].item() == 6.0
    assert x.grad.item() == 6.0


def test_backward_steps_checks_everything_before_the_first_step():
    x = leaf(1.0, 2.0)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        backward_steps(x * 2)  # raises at the call, not at the first next()


def test_several_roots_that_are_outputs_of_one_operation():
    # backward([p, q], [gp, gq]) with p and q from one node: each edge below it counted once
    class TwoOutputs(tg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a._array * 2, a._array * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

    a = tg.tensor([1.0, -2.0, 0.5], requires_grad=True)
    p, q = TwoOutputs.apply(a)
    tg.autograd.backward([p, q], [tg.tensor([1.0, 1.0, 1.0]), tg.tensor([0.0, 1.0, 2.0])])
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 5.0, 8.0])

    lstm = tg.nn.LSTM(3, 4, num_layers=2)
    x = tg.randn(5, 2, 3, requires_grad=True)
    out, (h, c) = lstm(x)
    grads = [tg.randn(*t.shape) for t in (out, h, c)]
    tg.autograd.backward([out, h, c], grads)
    by_roots = x.grad.numpy().copy()
    x.grad = None
    out, (h, c) = lstm(x)
    sum((t * g).sum() for t, g in zip((out, h, c), grads)).backward()
    np.testing.assert_allclose(by_roots, x.grad.numpy(), rtol=1e-5, atol=1e-6)

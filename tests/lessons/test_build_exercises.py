"""The build exercises of chapters 2-5: realistic wrong answers are rejected with feedback
that names the mistake, right variants are accepted, and no part stays plugged after."""
from __future__ import annotations

import pytest

import teachgrad as tg
from teachgrad.autograd import engine
from teachgrad.exercises import ch02, ch03, ch04, ch05


@pytest.fixture(autouse=True)
def _nothing_left_plugged():
    yield
    assert tg.exercises.plugged_parts() == {}  # a checker always gives the engine its parts back


def _rejected(feedback, *says: str) -> None:
    assert not feedback.passed, feedback.message
    for text in says:
        assert text in feedback.message, feedback.message


# --- 2.4 sum_to_shape -------------------------------------------------------------------

def _axes(grad, shape):
    extra = grad.ndim - len(shape)
    return extra, list(range(extra)) + [extra + i for i, n in enumerate(shape)
                                        if n == 1 and grad.shape[extra + i] != 1]


def sum_to_shape(grad, shape):
    _, dims = _axes(grad, shape)
    if dims:
        grad = grad.sum(dim=tuple(dims), keepdim=True)
    return grad.reshape(shape)


def sum_one_dim_at_a_time(grad, shape):
    while grad.ndim > len(shape):
        grad = grad.sum(dim=0)
    for i, n in enumerate(shape):
        if n == 1:  # (summing a dimension that already has size 1 changes nothing)
            grad = grad.sum(dim=i, keepdim=True)
    return grad


def keepdim_forgotten(grad, shape):
    _, dims = _axes(grad, shape)
    return grad.sum(dim=tuple(dims)) if dims else grad


def mean_instead_of_sum(grad, shape):
    _, dims = _axes(grad, shape)
    return grad.mean(dim=tuple(dims), keepdim=True).reshape(shape) if dims else grad


def only_the_stretched_dims(grad, shape):
    extra, dims = _axes(grad, shape)
    dims = [d for d in dims if d >= extra]
    return grad.sum(dim=tuple(dims), keepdim=True) if dims else grad


def only_dims_larger_than_one(grad, shape):
    extra = grad.ndim - len(shape)
    dims = list(range(extra)) + [extra + i for i, n in enumerate(shape)
                                 if n == 1 and grad.shape[extra + i] > 1]  # forgets size 0
    if dims:
        grad = grad.sum(dim=tuple(dims), keepdim=True)
    return grad.reshape(shape)


def changes_the_dtype(grad, shape):
    return sum_to_shape(grad, shape).double()


def looks_at_the_wrong_size(grad, shape):
    # asks whether grad.shape[extra - i] was stretched instead of grad.shape[extra + i]:
    # right wherever i = 0 or the two sizes agree, so random shapes may miss it
    extra = grad.ndim - len(shape)
    dims = list(range(extra)) + [extra + i for i, n in enumerate(shape)
                                 if n == 1 and grad.shape[extra - i] != 1]
    if dims:
        grad = grad.sum(dim=tuple(dims), keepdim=True)
    return grad.reshape(shape)


@pytest.mark.parametrize("right", [sum_to_shape, sum_one_dim_at_a_time])
def test_sum_to_shape_right_answers_are_accepted(right):
    assert ch02.check_sum_to_shape(right).passed


def test_sum_to_shape_accepts_float32_rounding_of_a_long_sum(monkeypatch):
    # seed 4146954170 draws a float32 gradient (4, 4, 2, 4, 4, 3) summed to (2, 4, 1, 3): 64
    # numbers per sum, one dimension at a time, ended 1e-6 from numpy's all-at-once sum
    # (an entry near zero), and the checker refused that right answer
    from teachgrad.exercises import building

    class Seed:
        def integers(self, high):
            return 4146954170
    monkeypatch.setattr(building, "unseen_rng", lambda: Seed())
    assert ch02.check_sum_to_shape(sum_one_dim_at_a_time).passed


@pytest.mark.parametrize("wrong, says", [
    (keepdim_forgotten, "keepdim=True"),
    (mean_instead_of_sum, "sum, not mean"),
    (lambda grad, shape: grad, "nothing was summed"),
    (only_the_stretched_dims, "leading dimensions broadcasting added"),
    (changes_the_dtype, "keep grad's dtype"),
    (only_dims_larger_than_one, "a size-1 dimension broadcast to size 0"),
])
def test_sum_to_shape_mistakes_are_named(wrong, says):
    _rejected(ch02.check_sum_to_shape(wrong), says)


def test_sum_to_shape_that_checks_the_wrong_size_is_caught_whatever_the_draw(monkeypatch):
    # random shapes catch it on most draws, not all: with a draw that shows nothing (a 0-d
    # gradient), the fixed case after them still does
    _rejected(ch02.check_sum_to_shape(looks_at_the_wrong_size))
    monkeypatch.setattr(ch02, "_broadcast_case", lambda strategies: strategies.just(
        (((), ()), "float64", "contiguous")))
    assert ch02.check_sum_to_shape(sum_to_shape).passed
    _rejected(ch02.check_sum_to_shape(looks_at_the_wrong_size),
              "a stretched size-1 dimension beside one left at size 1")


def test_sum_to_shape_that_fails_only_on_unseen_shapes_is_caught():
    def only_up_to_two_dims(grad, shape):
        result = sum_to_shape(grad, shape)
        return result * 2 if len(shape) >= 3 else result
    _rejected(ch02.check_sum_to_shape(only_up_to_two_dims), "random shapes")


# --- 3.4 topological_order ----------------------------------------------------------------

def depth_first(root, remember_visited=True):
    visited, post = set(), []

    def visit(node):
        if node in visited:
            return
        if remember_visited:
            visited.add(node)
        for child, _ in node.next_functions:
            if child is not None:
                visit(child)
        post.append(node)

    visit(root)
    return post[::-1]


def by_longest_path(root):
    """Sort by the longest path from the root: every edge leads at least one step deeper."""
    depth, changed = {root: 0}, True
    while changed:
        changed = False
        for node in list(depth):
            for child, _ in node.next_functions:
                if child is not None and depth.get(child, -1) < depth[node] + 1:
                    depth[child] = depth[node] + 1
                    changed = True
    return sorted(depth, key=depth.get)


def breadth_first(root):
    order, queue = [], [root]
    while queue:
        node = queue.pop(0)
        if node not in order:
            order.append(node)
            queue += [child for child, _ in node.next_functions if child is not None]
    return order


def first_input_only(root):
    order, node = [root], root
    while node.next_functions and node.next_functions[0][0] is not None:
        node = node.next_functions[0][0]
        order.append(node)
    return order


@pytest.mark.parametrize("right", [depth_first, by_longest_path])
def test_topological_order_right_answers_are_accepted(right):
    assert ch03.check_topological_order(right).passed


@pytest.mark.parametrize("wrong, says", [
    (lambda root: depth_first(root)[::-1], "reverse that list"),
    (breadth_first, "breadth-first walk"),
    (lambda root: depth_first(root, remember_visited=False), "remember the nodes you visited"),
    (lambda root: [n for n in depth_first(root) if type(n).__name__ != "AccumulateGrad"],
     "AccumulateGrad nodes belong in the order"),
    (first_input_only, "follow every edge"),
    (lambda root: [root] + [child for child, _ in root.next_functions], "skip the None entries"),
    (lambda root: {node: i for i, node in enumerate(depth_first(root))}, "not a list of nodes"),
])
def test_topological_order_mistakes_are_named(wrong, says):
    _rejected(ch03.check_topological_order(wrong), says)


# --- 4.3 and 4.4: backward formulas ------------------------------------------------------------

def mul_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return grad * b, grad * a


def div_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return grad / b, -grad * a / (b * b)


def div_backward_as_the_engine(ctx, grad):
    a, b = ctx.saved_tensors
    return grad / b, -grad * ((a / b) / b)


def matmul_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return grad @ b.mT, a.mT @ grad


def matmul_backward_transposes(ctx, grad):
    a, b = ctx.saved_tensors
    return grad @ b.transpose(-1, -2), (grad.transpose(-1, -2) @ a).transpose(-1, -2)


def sum_backward(ctx, grad):
    if ctx.axes is not None and not ctx.keepdim:
        grad = grad.reshape([1 if i in ctx.axes else n for i, n in enumerate(ctx.shape)])
    return grad.expand(ctx.shape), None, None


def sum_backward_unsqueezing(ctx, grad):
    if ctx.axes is not None and not ctx.keepdim:
        for axis in sorted(ctx.axes):
            grad = grad.unsqueeze(axis)
    return grad * tg.ones(ctx.shape, dtype=grad.dtype), None, None


@pytest.mark.parametrize("mul, div", [(mul_backward, div_backward),
                                      (mul_backward, div_backward_as_the_engine)])
def test_elementwise_formulas_right_answers_are_accepted(mul, div):
    assert ch04.check_elementwise_backward(mul, div).passed


@pytest.mark.parametrize("matmul, total", [(matmul_backward, sum_backward),
                                           (matmul_backward_transposes, sum_backward_unsqueezing)])
def test_matmul_sum_formulas_right_answers_are_accepted(matmul, total):
    assert ch04.check_matmul_sum_backward(matmul, total).passed


def _swapped(ctx, grad):
    a, b = ctx.saved_tensors
    return grad * a, grad * b


def _without_grad(ctx, grad):
    a, b = ctx.saved_tensors
    return b, a


def _div_sign(ctx, grad):
    a, b = ctx.saved_tensors
    return grad / b, grad * a / (b * b)


def _div_not_squared(ctx, grad):
    a, b = ctx.saved_tensors
    return grad / b, -grad * a / b


def _div_times_b(ctx, grad):
    a, b = ctx.saved_tensors
    return grad * b, -grad * a / (b * b)


@pytest.mark.parametrize("mul, div, says", [
    (_swapped, div_backward, "the gradients are swapped"),
    (_without_grad, div_backward, "multiply the local derivative by the incoming grad"),
    (mul_backward, _div_sign, "mind the minus sign"),
    (mul_backward, _div_not_squared, "b squared, not b"),
    (mul_backward, _div_times_b, "divide grad by b"),
])
def test_elementwise_formula_mistakes_are_named(mul, div, says):
    _rejected(ch04.check_elementwise_backward(mul, div), says)


def _b_transposed_on_the_left(ctx, grad):
    a, b = ctx.saved_tensors
    return grad @ b.mT, b.mT @ grad


def _keepdim_ignored(ctx, grad):
    return grad.expand(ctx.shape), None, None


def _one_gradient_only(ctx, grad):
    return sum_backward(ctx, grad)[0]


@pytest.mark.parametrize("matmul, total, says", [
    (_b_transposed_on_the_left, sum_backward, "∂(A@B)/∂A = grad @ Bᵀ"),
    (matmul_backward, _keepdim_ignored, "put them back as size 1"),
    (matmul_backward, _one_gradient_only, "one gradient per argument of forward"),
])
def test_matmul_sum_formula_mistakes_are_named(matmul, total, says):
    _rejected(ch04.check_matmul_sum_backward(matmul, total), says)


# --- 5.4 and 5.5: optimizer steps -------------------------------------------------------------

def sgd_momentum_step(param, grad, state, group):
    buffer = state.get("momentum_buffer")
    buffer = grad.clone() if buffer is None else group["momentum"] * buffer + grad
    state["momentum_buffer"] = buffer
    return param - group["lr"] * buffer


def sgd_buffer_from_zeros(param, grad, state, group):
    buffer = group["momentum"] * state.get("b", tg.zeros_like(param)) + grad
    state["b"] = buffer
    return param - group["lr"] * buffer


def sgd_lr_inside_the_buffer(param, grad, state, group):
    """Sutskever's form: the same steps when lr does not change."""
    velocity = group["momentum"] * state.get("v", tg.zeros_like(param)) + group["lr"] * grad
    state["v"] = velocity
    return param - velocity


def sgd_in_place(param, grad, state, group):
    buffer = state.get("b")
    if buffer is None:
        buffer = state["b"] = grad.clone()
    else:
        buffer.mul_(group["momentum"]).add_(grad)
    return param.sub_(group["lr"] * buffer)


def _ema(param, grad, state, group):
    buffer = state.get("b")
    momentum = group["momentum"]
    buffer = grad.clone() if buffer is None else momentum * buffer + (1 - momentum) * grad
    state["b"] = buffer
    return param - group["lr"] * buffer


def _momentum_twice(param, grad, state, group):
    buffer = state.get("b")
    buffer = grad.clone() if buffer is None else group["momentum"] * buffer + grad
    state["b"] = buffer
    return param - group["lr"] * (grad + group["momentum"] * buffer)


SHARED: dict = {}


def _one_buffer_for_all(param, grad, state, group):
    buffer = SHARED.get("b")
    buffer = grad.clone() if buffer is None or buffer.shape != grad.shape \
        else group["momentum"] * buffer + grad
    SHARED["b"] = buffer
    return param - group["lr"] * buffer


def _buffer_not_kept(param, grad, state, group):
    buffer = grad.clone()
    return param - group["lr"] * buffer


def _ascent(param, grad, state, group):
    return 2 * param - sgd_momentum_step(param, grad, state, group)


@pytest.mark.parametrize("right", [sgd_momentum_step, sgd_buffer_from_zeros,
                                   sgd_lr_inside_the_buffer, sgd_in_place])
def test_sgd_momentum_right_answers_are_accepted(right):
    assert ch05.check_sgd_momentum_step(right).passed


@pytest.mark.parametrize("wrong, says", [
    (_ema, "adds the whole gradient"),
    (_momentum_twice, "momentum enters once"),
    (_one_buffer_for_all, "not in a variable outside the function"),
    (_buffer_not_kept, "store it in state"),
    (_ascent, "step against the gradient"),
    (lambda param, grad, state, group: None, "return the parameter's new value"),
])
def test_sgd_momentum_mistakes_are_named(wrong, says):
    _rejected(ch05.check_sgd_momentum_step(wrong), says)


def _adam(param, grad, state, group, *, bias_correction=True, eps_inside=False, first_t=1,
          square=True, eps=True):
    beta1, beta2 = group["betas"]
    if not state:
        state.update(step=first_t - 1, m=tg.zeros_like(param), v=tg.zeros_like(param))
    t = state["step"] = state["step"] + 1
    m = state["m"] = beta1 * state["m"] + (1 - beta1) * grad
    v = state["v"] = beta2 * state["v"] + (1 - beta2) * (grad * grad if square else grad)
    if bias_correction:
        m, v = m / (1 - beta1**(t - first_t + 1 if first_t else t - 1)), \
            v / (1 - beta2**(t - first_t + 1 if first_t else t - 1))
    root = (v + group["eps"]).sqrt() if eps_inside else v.sqrt() + (group["eps"] if eps else 0)
    return param - group["lr"] * m / root


def adam_in_place(param, grad, state, group):
    beta1, beta2 = group["betas"]
    if not state:
        state.update(step=0, m=tg.zeros_like(param), v=tg.zeros_like(param))
    state["step"] += 1
    t = state["step"]
    state["m"].mul_(beta1).add_((1 - beta1) * grad)
    state["v"].mul_(beta2).add_((1 - beta2) * grad * grad)
    denominator = (state["v"] / (1 - beta2**t)).sqrt() + group["eps"]
    return param.sub_(group["lr"] * (state["m"] / (1 - beta1**t)) / denominator)


@pytest.mark.parametrize("right", [_adam, adam_in_place])
def test_adam_right_answers_are_accepted(right):
    assert ch05.check_adam_step(right).passed


@pytest.mark.parametrize("options, says", [
    (dict(bias_correction=False), "bias correction is missing"),
    (dict(eps_inside=True), "eps goes outside the square root"),
    (dict(first_t=0), "the first step is t = 1"),
    (dict(square=False), "averages g², not g"),
    (dict(eps=False), "eps is missing"),
])
def test_adam_mistakes_are_named(options, says):
    _rejected(ch05.check_adam_step(lambda *args: _adam(*args, **options)), says)


# --- calling the engine's own piece is no answer ------------------------------------------------

def test_calling_the_engines_own_piece_is_rejected():
    from teachgrad.optim.sgd import sgd_step
    from teachgrad.autograd import parts

    _rejected(ch02.check_sum_to_shape(lambda grad, shape: engine.sum_to_shape(grad, shape)),
              "called the engine's own sum_to_shape")
    _rejected(ch03.check_topological_order(engine.visiting_order),
              "called the engine's own visiting_order")
    mul = parts.get("backward:Mul").engine
    _rejected(ch04.check_elementwise_backward(lambda ctx, grad: mul(ctx, grad), div_backward),
              "called the engine's own backward")
    _rejected(ch05.check_sgd_momentum_step(lambda *args: sgd_step(*args)),
              "called the engine's own sgd_step")
    _rejected(ch05.check_adam_step(lambda *args: tg.optim.adam.adam_step(*args)),
              "called the engine's own adam_step")


def test_letting_autograd_run_the_engines_piece_is_rejected():
    def sum_to_shape_by_autograd(grad, shape):
        leaf = tg.zeros(*shape, dtype=grad.dtype, requires_grad=True)
        with tg.enable_grad():
            (leaf + tg.zeros_like(grad)).backward(grad)
        return leaf.grad

    def mul_by_autograd(ctx, grad):
        a, b = (t.detach().requires_grad_() for t in ctx.saved_tensors)
        with tg.enable_grad():
            return tg.autograd.grad(a * b, (a, b), grad)

    def matmul_by_autograd(ctx, grad):
        a, b = (t.detach().requires_grad_() for t in ctx.saved_tensors)
        with tg.enable_grad():
            return tg.autograd.grad(a @ b, (a, b), grad)

    _rejected(ch02.check_sum_to_shape(sum_to_shape_by_autograd),
              "called the engine's own sum_to_shape")
    _rejected(ch04.check_elementwise_backward(mul_by_autograd, div_backward),
              "called the engine's own backward")
    _rejected(ch04.check_matmul_sum_backward(matmul_by_autograd, sum_backward),
              "called the engine's own backward")

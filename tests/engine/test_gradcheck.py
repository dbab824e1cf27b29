"""Every differentiable op against central differences, in float64.

``tg.autograd.gradcheck`` compares the Jacobian that backward computes with the
one measured by central differences. hypothesis picks the shapes (broadcasting
pairs included), the dims (negative and tuples) and keepdim. Inputs are built
away from the points where an op has no derivative (ties in max, 0 for relu and
abs, the edges of clamp), so a failure always means a wrong backward.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import teachgrad as tg
from teachgrad.autograd import GradcheckError, gradcheck

# Fixed examples, few of them: the whole file runs in seconds and never flakes.
FAST = settings(max_examples=12, deadline=None, derandomize=True, database=None)

# -- input strategies -------------------------------------------------------------------

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)
nonempty_shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3)
pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)

smooth = st.floats(-2.0, 2.0)  # anywhere: the op is smooth
positive = st.floats(0.5, 2.0)  # log, sqrt, the base of pow
# multiples of 0.1 shifted by 0.05: at least 0.05 (much more than eps) from 0, from ±0.5 and
# from each other when unique, so relu/abs/clamp/max never sit on a kink
off_grid = st.integers(-20, 19).map(lambda k: k / 10 + 0.05)
on_grid = st.integers(-20, 20).map(lambda k: k / 10)  # never equal to an off_grid value


def values(shape, elements=smooth, unique=False):
    return hnp.arrays(np.float64, shape, elements=elements, unique=unique)


def leaf(a: np.ndarray) -> tg.Tensor:
    return tg.tensor(a, dtype=tg.float64, requires_grad=True)


@st.composite
def shape_and_dim(draw, min_dims=1):
    """A shape and a valid dim for it: None, an int (maybe negative) or a tuple of them."""
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=3, min_side=1, max_side=3))
    ndim = len(shape)
    if ndim == 0:  # a 0-d tensor accepts dim 0 and -1, as in PyTorch
        return shape, draw(st.sampled_from([None, 0, -1]))
    one = st.integers(-ndim, ndim - 1)
    several = hnp.valid_tuple_axes(ndim, min_size=1)
    return shape, draw(st.one_of(st.none(), one, several))


@st.composite
def shape_and_one_dim(draw):
    shape = draw(nonempty_shapes)
    return shape, draw(st.integers(-len(shape), len(shape) - 1))


# -- the helper itself ----------------------------------------------------------------------


def test_gradcheck_accepts_a_correct_backward_and_restores_grads():
    x = leaf(np.array([0.3, -1.2, 2.0]))
    x.grad = tg.tensor([7.0, 7.0, 7.0], dtype=tg.float64)
    assert gradcheck(lambda a: (a * a).sum(), (x,))
    assert x.grad.tolist() == [7.0, 7.0, 7.0]


def test_gradcheck_catches_a_wrong_backward():
    class WrongSquare(tg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, grad):
            (a,) = ctx.saved_tensors
            return grad * a  # should be 2 * a

    x = leaf(np.array([0.5, 1.5]))
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        gradcheck(WrongSquare.apply, (x,))
    assert gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False


def test_gradcheck_checks_every_output_and_skips_integer_ones():
    x = leaf(np.array([[0.1, 0.9], [0.7, 0.2]]))
    assert gradcheck(lambda a: tg.max(a, dim=1), (x,))  # (values, int64 indices)


def test_gradcheck_needs_an_input_that_requires_grad():
    with pytest.raises(ValueError, match="at least one input tensor with requires_grad=True"):
        gradcheck(lambda a: a * 2, (tg.ones(2, dtype=tg.float64),))


def test_gradcheck_warns_about_float32():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="not float64"):
        gradcheck(lambda a: a * 2, (x,), atol=1e-2, rtol=1e-2, eps=1e-2)


# -- elementwise -------------------------------------------------------------------------------

UNARY = {
    "neg": (lambda a: -a, smooth), "exp": (tg.exp, smooth), "log": (tg.log, positive),
    "sqrt": (tg.sqrt, positive), "sin": (tg.sin, smooth), "cos": (tg.cos, smooth),
    "tanh": (tg.tanh, smooth), "sigmoid": (tg.sigmoid, smooth), "abs": (tg.abs, off_grid),
    "relu": (tg.relu, off_grid), "sign": (tg.sign, off_grid),
    "clamp": (lambda a: tg.clamp(a, -0.5, 0.5), off_grid),
    "clamp_min": (lambda a: a.clamp(min=0.0), off_grid), "clamp_max": (lambda a: a.clamp(max=0.0), off_grid),
    "square": (lambda a: a ** 2, smooth), "cube": (lambda a: tg.pow(a, 3), smooth),
    "root": (lambda a: a ** 0.5, positive), "reciprocal": (lambda a: a ** -1, positive),
    "power_zero": (lambda a: a ** 0, smooth),
    "scalar_plus": (lambda a: 1.5 + a, smooth), "scalar_minus": (lambda a: 1.5 - a, smooth),
    "scalar_times": (lambda a: a * -2.0, smooth), "scalar_over": (lambda a: 3.0 / a, positive),
    "over_scalar": (lambda a: a / 4.0, smooth), "scalar_power": (lambda a: 2.0 ** a, smooth),
}


@pytest.mark.parametrize("name", list(UNARY))
@FAST
@given(data=st.data())
def test_unary(name, data):
    fn, elements = UNARY[name]
    x = leaf(data.draw(values(shapes, elements)))
    assert gradcheck(fn, (x,))


BINARY = {
    "add": (tg.add, smooth, smooth), "sub": (tg.sub, smooth, smooth), "mul": (tg.mul, smooth, smooth),
    "div": (tg.div, smooth, positive), "pow": (tg.pow, positive, smooth),
    "maximum": (tg.maximum, on_grid, off_grid), "minimum": (tg.minimum, on_grid, off_grid),
    "add_alpha": (lambda a, b: tg.add(a, b, alpha=-3), smooth, smooth),
}


@pytest.mark.parametrize("name", list(BINARY))
@FAST
@given(data=st.data(), shape_pair=pairs)
def test_binary_with_broadcasting(name, data, shape_pair):
    fn, left, right = BINARY[name]
    a_shape, b_shape = shape_pair.input_shapes
    a = leaf(data.draw(values(a_shape, left)))
    b = leaf(data.draw(values(b_shape, right)))
    assert gradcheck(fn, (a, b))


@FAST
@given(data=st.data(), shape_pair=pairs)
def test_binary_when_only_one_side_requires_grad(data, shape_pair):
    a_shape, b_shape = shape_pair.input_shapes
    a = leaf(data.draw(values(a_shape)))
    b = tg.tensor(data.draw(values(b_shape, positive)), dtype=tg.float64)
    assert gradcheck(lambda x, y: x * y + x / y - y, (a, b))
    assert gradcheck(lambda x, y: y ** x, (a, b))


@FAST
@given(data=st.data(), shapes3=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3))
def test_where_broadcasts_all_three(data, shapes3):
    c_shape, a_shape, b_shape = shapes3.input_shapes
    cond = tg.tensor(data.draw(hnp.arrays(np.bool_, c_shape)))
    a = leaf(data.draw(values(a_shape)))
    b = leaf(data.draw(values(b_shape)))
    assert gradcheck(lambda x, y: tg.where(cond, x, y), (a, b))
    assert gradcheck(lambda x: tg.where(cond, x, 0.0), (a,))


# -- reductions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sum", "mean"])
@FAST
@given(data=st.data(), case=shape_and_dim(min_dims=0), keepdim=st.booleans())
def test_sum_and_mean(name, data, case, keepdim):
    shape, dim = case
    x = leaf(data.draw(values(shape)))
    assert gradcheck(lambda a: getattr(a, name)(dim=dim, keepdim=keepdim), (x,))


@pytest.mark.parametrize("name", ["amax", "amin"])
@FAST
@given(data=st.data(), case=shape_and_dim(), keepdim=st.booleans())
def test_amax_amin(name, data, case, keepdim):
    shape, dim = case
    x = leaf(data.draw(values(shape, on_grid, unique=True)))  # unique: no ties
    assert gradcheck(lambda a: getattr(tg, name)(a, dim=dim, keepdim=keepdim), (x,))


@pytest.mark.parametrize("name", ["max", "min"])
@FAST
@given(data=st.data(), shape=shapes)
def test_max_min_of_everything(name, data, shape):
    x = leaf(data.draw(values(shape, on_grid, unique=True)))
    assert gradcheck(lambda a: getattr(a, name)(), (x,))


@pytest.mark.parametrize("name", ["max", "min"])
@FAST
@given(data=st.data(), case=shape_and_one_dim(), keepdim=st.booleans())
def test_max_min_along_a_dim(name, data, case, keepdim):
    shape, dim = case
    x = leaf(data.draw(values(shape, on_grid, unique=True)))
    assert gradcheck(lambda a: getattr(tg, name)(a, dim, keepdim=keepdim).values, (x,))


def test_amax_shares_the_gradient_between_ties():
    x = leaf(np.array([1.0, 3.0, 3.0]))
    x.amax().backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5]
    y = leaf(np.array([1.0, 3.0, 3.0]))
    tg.max(y, 0).values.backward()
    assert y.grad.tolist() == [0.0, 1.0, 0.0]  # only the returned index gets it


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@FAST
@given(data=st.data(), case=shape_and_one_dim())
def test_softmax_and_log_softmax(name, data, case):
    shape, dim = case
    x = leaf(data.draw(values(shape)))
    weights = tg.tensor(data.draw(values(shape)), dtype=tg.float64)  # a generic output gradient
    assert gradcheck(lambda a: getattr(tg, name)(a, dim) * weights, (x,))


# -- linear algebra ------------------------------------------------------------------------------


@st.composite
def matmul_shapes(draw):
    n, k, m = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=2)).input_shapes
    a = draw(st.sampled_from([(k,), (n, k), batch[0] + (n, k)]))
    b = draw(st.sampled_from([(k,), (k, m), batch[1] + (k, m)]))
    return a, b


@FAST
@given(data=st.data(), case=matmul_shapes())
def test_matmul(data, case):
    a = leaf(data.draw(values(case[0])))
    b = leaf(data.draw(values(case[1])))
    assert gradcheck(tg.matmul, (a, b))


def test_matmul_with_transposed_operands():
    # x @ W.T (a linear layer) and W.T @ x take a layout-aware path in MatMul's backward
    rng = np.random.default_rng(5)
    x, w, y = (leaf(rng.standard_normal(shape)) for shape in [(3, 4), (2, 4), (3, 2)])
    assert gradcheck(lambda a, b: a @ b.T, (x, w))
    assert gradcheck(lambda a, b: a.T @ b, (x, y))
    batch = leaf(rng.standard_normal((2, 3, 4)))
    assert gradcheck(lambda a: a @ a.mT, (batch,))


@FAST
@given(data=st.data(), lead=st.sampled_from([(), (3,), (2, 3)]), with_bias=st.booleans())
def test_linear(data, lead, with_bias):
    # one Function for x @ W.T + b, with any leading dimensions on x (1-D x included)
    x = leaf(data.draw(values(lead + (4,))))
    w = leaf(data.draw(values((2, 4))))
    args = (x, w, leaf(data.draw(values((2,))))) if with_bias else (x, w)
    assert gradcheck(tg.nn.functional.linear, args)


def test_linear_is_one_node_and_matches_the_separate_operations():
    rng = np.random.default_rng(6)
    x, w, b = (leaf(rng.standard_normal(shape)) for shape in [(5, 3), (4, 3), (4,)])
    out = tg.nn.functional.linear(x, w, b)
    assert out.grad_fn.name() == "LinearBackward"
    np.testing.assert_allclose(out.detach().numpy(), (x @ w.T + b).detach().numpy(), rtol=1e-12)
    out.sum().backward()
    grads = [t.grad.numpy() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    (x @ w.T + b).sum().backward()
    for got, t in zip(grads, (x, w, b)):
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-12)
    assert w.grad.is_contiguous()  # the weight's gradient comes out in the weight's layout


def test_mm_and_bmm():
    rng = np.random.default_rng(0)
    assert gradcheck(tg.mm, (leaf(rng.standard_normal((2, 3))), leaf(rng.standard_normal((3, 2)))))
    assert gradcheck(tg.bmm, (leaf(rng.standard_normal((2, 2, 3))), leaf(rng.standard_normal((2, 3, 2)))))


# -- shapes -------------------------------------------------------------------------------------------


@FAST
@given(data=st.data(), shape=shapes)
def test_reshape_view_flatten(data, shape):
    x = leaf(data.draw(values(shape)))
    assert gradcheck(lambda a: a.reshape(-1), (x,))
    assert gradcheck(lambda a: a.view(1, -1, 1), (x,))
    assert gradcheck(lambda a: a.flatten(), (x,))


@FAST
@given(data=st.data(), case=shape_and_one_dim())
def test_flatten_unsqueeze_squeeze(data, case):
    shape, dim = case
    x = leaf(data.draw(values(shape)))
    assert gradcheck(lambda a: a.flatten(dim), (x,))
    assert gradcheck(lambda a: a.unsqueeze(dim), (x,))
    assert gradcheck(lambda a: a.unsqueeze(dim).squeeze(dim), (x,))
    assert gradcheck(lambda a: a.squeeze(), (x,))


@FAST
@given(data=st.data(), shape=nonempty_shapes, order=st.randoms(use_true_random=False))
def test_permute_transpose(data, shape, order):
    x = leaf(data.draw(values(shape)))
    axes = list(range(len(shape)))
    order.shuffle(axes)
    negative = [d - len(shape) for d in axes]  # the same order, counted from the end
    assert gradcheck(lambda a: a.permute(*axes), (x,))
    assert gradcheck(lambda a: a.permute(negative), (x,))
    assert gradcheck(lambda a: a.transpose(0, -1), (x,))
    assert gradcheck(lambda a: a.T, (x,))


@FAST
@given(data=st.data(), shape=hnp.array_shapes(min_dims=2, max_dims=3, max_side=3))
def test_t_mT_contiguous_clone(data, shape):
    x = leaf(data.draw(values(shape)))
    assert gradcheck(lambda a: a.mT.contiguous(), (x,))
    assert gradcheck(lambda a: a.clone() * 2, (x,))
    if len(shape) == 2:
        assert gradcheck(lambda a: a.t(), (x,))


@FAST
@given(data=st.data(), shape_pair=pairs)
def test_expand(data, shape_pair):
    small, _ = shape_pair.input_shapes
    target = np.broadcast_shapes(*shape_pair.input_shapes)
    x = leaf(data.draw(values(small)))
    assert gradcheck(lambda a: a.expand(*target), (x,))
    assert gradcheck(lambda a: a.expand((2,) + tuple(target)), (x,))


@FAST
@given(data=st.data(), case=shape_and_one_dim(), extra=st.lists(st.integers(1, 3), min_size=1, max_size=2))
def test_cat(data, case, extra):
    shape, dim = case
    inputs = [leaf(data.draw(values(shape)))]
    for size in extra:  # more pieces that differ only along dim
        other = list(shape)
        other[dim] = size
        inputs.append(leaf(data.draw(values(tuple(other)))))
    assert gradcheck(lambda *ts: tg.cat(list(ts), dim), tuple(inputs))


@FAST
@given(data=st.data(), shape=shapes, count=st.integers(1, 3))
def test_stack(data, shape, count):
    inputs = tuple(leaf(data.draw(values(shape))) for _ in range(count))
    dim = data.draw(st.integers(-len(shape) - 1, len(shape)))
    assert gradcheck(lambda *ts: tg.stack(list(ts), dim), inputs)


# -- indexing ------------------------------------------------------------------------------------------


@FAST
@given(data=st.data(), shape=nonempty_shapes)
def test_basic_indexing(data, shape):
    index = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    x = leaf(data.draw(values(shape)))
    assert gradcheck(lambda a: a[index], (x,))


@FAST
@given(data=st.data(), shape=nonempty_shapes)
def test_integer_tensor_indexing_with_repeats(data, shape):
    index_shapes = hnp.array_shapes(max_dims=2, max_side=4)
    arrays = data.draw(hnp.integer_array_indices(shape, result_shape=index_shapes))
    index = tuple(tg.tensor(a.astype(np.int64)) for a in arrays)
    x = leaf(data.draw(values(shape)))
    assert gradcheck(lambda a: a[index], (x,))


def test_mixed_and_mask_indexing():
    rng = np.random.default_rng(3)
    x = leaf(rng.standard_normal((3, 4)))
    rows = tg.tensor([2, 0, 2, -1])
    assert gradcheck(lambda a: a[rows], (x,))
    assert gradcheck(lambda a: a[:, rows], (x,))
    assert gradcheck(lambda a: a[None, 1:, tg.tensor([3, 3])], (x,))
    assert gradcheck(lambda a: a[a.detach() > 0], (x,))


# -- composites ---------------------------------------------------------------------------------------


def test_repeated_inputs_and_shared_subexpressions():
    rng = np.random.default_rng(4)
    x = leaf(rng.standard_normal((2, 3)))
    w = leaf(rng.standard_normal((3, 2)))
    assert gradcheck(lambda a: a * a, (x,))
    assert gradcheck(lambda a: (a @ a.T).tanh(), (x,))

    def net(a, b):
        h = (a @ b).sigmoid()
        return (h * h.exp() + h).log_softmax(-1).sum(0)

    assert gradcheck(net, (x, w))


def test_custom_function():
    class Cube(tg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a * a

        @staticmethod
        def backward(ctx, grad):
            (a,) = ctx.saved_tensors
            return grad * 3 * a * a

    x = leaf(np.array([[-1.5, 0.2], [0.7, 2.0]]))
    assert gradcheck(Cube.apply, (x,))


def test_dtype_casts_pass_gradients_back_in_the_input_dtype():
    x = leaf(np.array([1.0, 2.0]))
    y = (x.float() * tg.tensor([3.0, 4.0])).sum()
    y.backward()
    assert x.grad.dtype is tg.float64
    assert x.grad.tolist() == [3.0, 4.0]


# -- losses ---------------------------------------------------------------------------------

LOSS_SHAPES = [(3,), (4, 3), (2, 3, 2)]  # one sample, a batch, a batch with an extra dim


@FAST
@given(data=st.data(), shape=st.sampled_from(LOSS_SHAPES),
       reduction=st.sampled_from(["mean", "sum", "none"]))
def test_mse_and_l1_loss(data, shape, reduction):
    F = tg.nn.functional
    a = leaf(data.draw(values(shape, off_grid, unique=True)))
    target = tg.tensor(data.draw(values(shape, on_grid)), dtype=tg.float64)  # never equal to a
    assert gradcheck(lambda x: F.mse_loss(x, target, reduction=reduction), (a,))
    assert gradcheck(lambda x: F.l1_loss(x, target, reduction=reduction), (a,))


@FAST
@given(data=st.data(), shape=st.sampled_from(LOSS_SHAPES),
       reduction=st.sampled_from(["mean", "sum", "none"]))
def test_cross_entropy_and_nll_loss(data, shape, reduction):
    F = tg.nn.functional
    scores = leaf(data.draw(values(shape)))
    classes = shape[0] if len(shape) == 1 else shape[1]
    target_shape = () if len(shape) == 1 else (shape[0], *shape[2:])
    target = tg.tensor(data.draw(hnp.arrays(np.int64, target_shape,
                                            elements=st.integers(0, classes - 1))))
    assert gradcheck(lambda x: F.cross_entropy(x, target, reduction=reduction), (scores,))
    assert gradcheck(lambda x: F.nll_loss(x, target, reduction=reduction), (scores,))


@pytest.mark.parametrize("sizes", [(2, 1, 3), (1, 2), (3, 1, 1, 2)])
def test_repeat_gradcheck_and_matches_numpy_tile(sizes):
    x = tg.tensor(np.random.default_rng(0).standard_normal((2, 3)), dtype=tg.float64,
                  requires_grad=True)
    assert gradcheck(lambda t: t.repeat(*sizes), (x,))
    np.testing.assert_array_equal(x.repeat(sizes).detach().numpy(),
                                  np.tile(x.detach().numpy(), sizes))

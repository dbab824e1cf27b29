"""Forward values of every public operation, against numpy.

Each test computes the same thing twice, once with teachgrad and once with the
numpy function (or formula) it is defined by, on inputs that exercise
broadcasting, ``dim``/``keepdim``, negative and tuple dims. The last test checks
that every function in ``teachgrad.ops.functional`` is covered here.
"""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.ops import functional as F

rng = np.random.default_rng(1234)
COVERED: set[str] = set()  # names of the functional ops the tests below exercise


def covers(*names: str):
    """Record which ops a test checks (see test_every_public_op_is_covered)."""
    COVERED.update(names)
    return lambda test: test


def t(a, dtype=None) -> tg.Tensor:
    return tg.tensor(np.asarray(a), dtype=dtype)


def check(result: tg.Tensor, expected, dtype=None, rtol=1e-6, atol=1e-6) -> None:
    """Same shape, same dtype (when given) and same values as the numpy result."""
    expected = np.asarray(expected)
    assert isinstance(result, tg.Tensor)
    assert tuple(result.shape) == expected.shape
    if dtype is not None:
        assert result.dtype is dtype
    np.testing.assert_allclose(result.numpy(), expected, rtol=rtol, atol=atol)


# Pairs of broadcastable shapes: equal, scalar, trailing, both sides stretched, 0-d.
BROADCAST_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((5,), ())]


# -- elementwise, binary ----------------------------------------------------------------

BINARY = {
    "add": (F.add, np.add), "sub": (F.sub, np.subtract), "mul": (F.mul, np.multiply),
    "div": (F.div, np.divide), "maximum": (F.maximum, np.maximum), "minimum": (F.minimum, np.minimum),
}


@covers(*BINARY)
@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("shapes", BROADCAST_SHAPES)
def test_binary_broadcasting(name, shapes):
    ours, ref = BINARY[name]
    a = rng.standard_normal(shapes[0])
    b = rng.standard_normal(shapes[1]) + 3.0  # away from 0 for div
    check(ours(t(a, tg.float64), t(b, tg.float64)), ref(a, b), tg.float64)


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_with_python_scalar_both_sides(name):
    ours, ref = BINARY[name]
    a = rng.standard_normal((2, 3)).astype(np.float32)
    check(ours(t(a), 2.5), ref(a, np.float32(2.5)), tg.float32)
    check(ours(2.5, t(a)), ref(np.float32(2.5), a), tg.float32)


def test_operators_and_reflected_forms():
    a = rng.uniform(0.5, 2.0, (2, 3))
    x = t(a, tg.float64)
    check(x + 1, a + 1)
    check(1 + x, 1 + a)
    check(x - 1, a - 1)
    check(1 - x, 1 - a)
    check(x * 3, a * 3)
    check(3 * x, 3 * a)
    check(x / 4, a / 4)
    check(4 / x, 4 / a)
    check(x ** 2, a ** 2)
    check(2 ** x, 2 ** a)
    check(-x, -a)
    check(x @ x.T, a @ a.T)
    check(abs(-x), a)


@covers("add", "sub")
def test_add_sub_alpha():
    a, b = rng.standard_normal((2, 3)), rng.standard_normal(3)
    check(tg.add(t(a), t(b), alpha=2), a + 2 * b, rtol=1e-5)
    check(tg.sub(t(a), t(b), alpha=0.5), a - 0.5 * b, rtol=1e-5)


@covers("pow")
@pytest.mark.parametrize("shapes", BROADCAST_SHAPES)
def test_pow_tensor_exponent(shapes):
    a = rng.uniform(0.5, 2.0, shapes[0])
    b = rng.standard_normal(shapes[1])
    check(tg.pow(t(a, tg.float64), t(b, tg.float64)), np.power(a, b))


@covers("pow")
def test_pow_scalar_exponents_and_integers():
    a = rng.uniform(0.5, 2.0, (4,))
    check(tg.pow(t(a), 0.5), np.sqrt(a), rtol=1e-5)
    check(t(a) ** 0, np.ones(4))
    check(t(a) ** -1, 1 / a, rtol=1e-5)
    check(tg.arange(4) ** 2, np.arange(4) ** 2, tg.int64)
    check(tg.arange(4) ** 0.5, np.sqrt(np.arange(4)), tg.float32)  # an int tensor lifts to float


def test_dtype_promotion():
    ints, floats = tg.arange(3), tg.tensor([0.5, 1.5, 2.5])
    assert (ints + ints).dtype is tg.int64
    assert (ints + floats).dtype is tg.float32
    assert (ints * 2.5).dtype is tg.float32
    assert (ints / 2).dtype is tg.float32  # true division always gives floats
    check(ints / 2, np.arange(3) / 2)
    assert (floats + tg.tensor([1.0], dtype=tg.float64)).dtype is tg.float64
    assert (floats * 2).dtype is tg.float32  # a Python number never widens a float tensor
    assert (tg.tensor([True, False]) + 1).dtype is tg.int64
    assert (tg.tensor([True]) + tg.tensor([True])).dtype is tg.bool


# -- elementwise, unary ---------------------------------------------------------------

UNARY = {
    "neg": (F.neg, np.negative, "any"), "exp": (F.exp, np.exp, "any"), "log": (F.log, np.log, "positive"),
    "sqrt": (F.sqrt, np.sqrt, "positive"), "abs": (F.abs, np.abs, "any"), "sin": (F.sin, np.sin, "any"),
    "cos": (F.cos, np.cos, "any"), "tanh": (F.tanh, np.tanh, "any"),
    "sigmoid": (F.sigmoid, lambda x: 1 / (1 + np.exp(-x)), "any"),
    "relu": (F.relu, lambda x: np.maximum(x, 0), "any"), "sign": (F.sign, np.sign, "any"),
    "erf": (F.erf, np.vectorize(math.erf), "any"), "log1p": (F.log1p, np.log1p, "positive"),
    "expm1": (F.expm1, np.expm1, "any"),
}


@covers(*UNARY)
@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
def test_unary(name, shape, dtype):
    ours, ref, domain = UNARY[name]
    a = rng.uniform(0.1, 3.0, shape) if domain == "positive" else rng.standard_normal(shape) * 2
    a = a.astype(dtype.numpy)
    check(ours(t(a, dtype)), ref(a), dtype, rtol=1e-5)


def test_unary_on_integers_gives_float_like_pytorch():
    ints = tg.arange(1, 4)
    check(tg.exp(ints), np.exp(np.arange(1, 4)), tg.float32, rtol=1e-6)
    check(tg.sqrt(ints), np.sqrt(np.arange(1, 4)), tg.float32)
    check(tg.abs(-ints), np.arange(1, 4), tg.int64)  # abs and neg keep integers
    check(tg.sign(tg.tensor([-3, 0, 2])), [-1, 0, 1], tg.int64)


def test_sigmoid_does_not_overflow_at_extremes():
    x = tg.tensor([-1000.0, -50.0, 0.0, 50.0, 1000.0])
    check(tg.sigmoid(x), [0.0, 1 / (1 + np.exp(50.0)), 0.5, 1 / (1 + np.exp(-50.0)), 1.0])


@covers("clamp", "clip")
def test_clamp_and_clip():
    a = rng.standard_normal((3, 4))
    check(tg.clamp(t(a), -0.5, 0.5), np.clip(a, -0.5, 0.5))
    check(tg.clamp(t(a), min=0.1), np.maximum(a, 0.1))
    check(t(a).clamp(max=0.2), np.minimum(a, 0.2))
    check(tg.clip(t(a), -1, 1), np.clip(a, -1, 1))
    check(tg.arange(6).clamp(1, 3), np.clip(np.arange(6), 1, 3), tg.int64)
    with pytest.raises(RuntimeError, match="at least one of 'min' or 'max'"):
        tg.clamp(t(a))


@covers("addcmul", "addcdiv", "lerp")
@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
def test_addcmul_addcdiv_and_lerp(dtype):
    """(tests/engine/test_pointwise_fused.py has their in-place forms, gradients and errors)"""
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    c = rng.uniform(0.5, 2.0, 3)
    check(tg.addcmul(t(a, dtype), t(b, dtype), t(c, dtype), value=-0.5), a - 0.5 * b * c, dtype,
          rtol=1e-5)
    check(t(a, dtype).addcdiv(t(b, dtype), t(c, dtype), value=2), a + 2 * b / c, dtype, rtol=1e-5)
    check(tg.lerp(t(a, dtype), t(b, dtype), 0.3), a + 0.3 * (b - a), dtype, rtol=1e-5)
    check(tg.lerp(t(a, dtype), t(b, dtype), 0.75), b - 0.25 * (b - a), dtype, rtol=1e-5)
    w = rng.uniform(-1, 2, (2, 3))
    check(t(a, dtype).lerp(t(b, dtype), t(w, dtype)), a + w * (b - a), dtype, rtol=1e-5, atol=1e-6)


@covers("where")
@pytest.mark.parametrize("shapes", BROADCAST_SHAPES)
def test_where_broadcasts_all_three(shapes):
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    cond = rng.standard_normal(np.broadcast_shapes(shapes[0], shapes[1])) > 0
    check(tg.where(t(cond), t(a), t(b)), np.where(cond, a, b))
    check(tg.where(t(cond), t(a), 0.0), np.where(cond, a, 0.0))
    check(tg.where(t(cond), 1.0, t(b)), np.where(cond, 1.0, b))


COMPARISONS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
               "gt": np.greater, "ge": np.greater_equal}


@covers(*COMPARISONS)
@pytest.mark.parametrize("name", list(COMPARISONS))
@pytest.mark.parametrize("shapes", BROADCAST_SHAPES)
def test_comparisons_give_bool_tensors(name, shapes):
    a = rng.integers(0, 3, shapes[0]).astype(np.float32)  # small integers: plenty of ties
    b = rng.integers(0, 3, shapes[1]).astype(np.float32)
    result = getattr(tg, name)(t(a), t(b))
    check(result, COMPARISONS[name](a, b), tg.bool)
    assert not result.requires_grad


def test_comparison_operators_with_scalars():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    check(x == 2, [False, True, False], tg.bool)
    check(x != 2, [True, False, True])
    check(x < 2, [True, False, False])
    check(x <= 2, [True, True, False])
    check(x > 2, [False, False, True])
    check(x >= 2, [False, True, True])
    check(2 < x, [False, False, True])  # reflected by Python into x > 2
    assert not (x > 2).requires_grad


# -- reductions --------------------------------------------------------------------------

DIMS = [None, 0, 1, -1, -3, (0, 2), (-1, 0), (0, 1, 2), [1]]


@covers("sum", "mean", "amax", "amin")
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_amax_amin(dim, keepdim):
    a = rng.standard_normal((2, 3, 4))
    axis = tuple(dim) if isinstance(dim, list) else dim
    kw = {} if dim is None and not keepdim else {"dim": dim, "keepdim": keepdim}
    check(tg.sum(t(a), **kw), np.sum(a, axis=axis, keepdims=keepdim), rtol=1e-5)
    check(t(a).mean(**kw), np.mean(a, axis=axis, keepdims=keepdim), rtol=1e-5)
    check(tg.amax(t(a), **kw), np.max(a, axis=axis, keepdims=keepdim))
    check(tg.amin(t(a), **kw), np.min(a, axis=axis, keepdims=keepdim))


def test_empty_dim_reduces_everything_like_pytorch():
    a = rng.standard_normal((2, 3))
    check(t(a).sum(dim=()), a.sum(), rtol=1e-5)
    check(t(a).mean(dim=[]), a.mean(), rtol=1e-5)


def test_zero_dim_results_stay_tensors_of_arrays():
    m = tg.tensor([1.0, 2.0]).mean()
    assert isinstance(m.array, np.ndarray) and m.shape == ()
    out = (m * tg.tensor(2.0)).exp() - 1
    assert isinstance(out.array, np.ndarray)
    assert out.item() == pytest.approx(np.exp(3.0) - 1, rel=1e-6)


def test_sum_of_integers_and_bools():
    check(tg.arange(5).sum(), 10, tg.int64)
    check((tg.arange(5) > 1).sum(), 3, tg.int64)


@covers("max", "min")
def test_max_min_over_everything():
    a = rng.standard_normal((3, 4))
    check(tg.max(t(a)), a.max())
    check(t(a).min(), a.min())


@covers("max", "min")
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_along_dim_return_values_and_indices(dim, keepdim):
    a = rng.permutation(12).reshape(3, 4).astype(np.float32)
    values, indices = tg.max(t(a), dim, keepdim=keepdim)
    check(values, np.max(a, axis=dim, keepdims=keepdim), tg.float32)
    check(indices, np.argmax(a, axis=dim, keepdims=keepdim), tg.int64)
    result = t(a).min(dim=dim, keepdim=keepdim)
    check(result.values, np.min(a, axis=dim, keepdims=keepdim))
    check(result.indices, np.argmin(a, axis=dim, keepdims=keepdim))
    assert result[0] is result.values and result[1] is result.indices


@covers("max", "min")
def test_max_min_of_two_tensors_is_elementwise():
    a, b = rng.standard_normal((2, 3)), rng.standard_normal(3)
    check(tg.max(t(a), t(b)), np.maximum(a, b))
    check(tg.min(t(a), t(b)), np.minimum(a, b))


@covers("argmax", "argmin")
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin(dim, keepdim):
    a = rng.permutation(24).reshape(2, 3, 4)
    expected_max = np.argmax(a, axis=dim, keepdims=keepdim) if dim is not None else np.argmax(a)
    expected_min = np.argmin(a, axis=dim, keepdims=keepdim) if dim is not None else np.argmin(a)
    if dim is None and keepdim:
        expected_max, expected_min = expected_max.reshape(1, 1, 1), expected_min.reshape(1, 1, 1)
    check(tg.argmax(t(a), dim, keepdim), expected_max, tg.int64)
    check(t(a).argmin(dim=dim, keepdim=keepdim), expected_min, tg.int64)


@covers("any", "all")
@pytest.mark.parametrize("dim", [None, 0, -1])
def test_any_all(dim):
    a = rng.integers(0, 2, (3, 4)).astype(bool)
    a[0] = True
    check(tg.any(t(a), dim), np.any(a, axis=dim), tg.bool)
    check(t(a).all(dim), np.all(a, axis=dim), tg.bool)
    check(t(a.astype(np.float32)).any(dim), np.any(a, axis=dim), tg.bool)


# -- softmax ----------------------------------------------------------------------------------


def np_softmax(a: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@covers("softmax", "log_softmax")
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_softmax_and_log_softmax(dim):
    a = rng.standard_normal((3, 4, 5))
    check(tg.softmax(t(a), dim), np_softmax(a, dim), rtol=1e-5)
    check(t(a).log_softmax(dim=dim), np.log(np_softmax(a, dim)), rtol=1e-5)
    np.testing.assert_allclose(tg.softmax(t(a), dim).sum(dim).numpy(), 1.0, rtol=1e-6)


def test_softmax_is_stable_for_large_inputs():
    x = tg.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]])
    check(tg.softmax(x, -1), np_softmax(x.numpy().astype(np.float64), -1), rtol=1e-5)
    logp = tg.log_softmax(x, -1).numpy()
    assert np.all(np.isfinite(logp))
    np.testing.assert_allclose(logp[0], [-2.407606, -1.407606, -0.407606], rtol=1e-5)


# -- linear algebra ---------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
    ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 4, 3)),
]


@covers("matmul")
@pytest.mark.parametrize("shapes", MATMUL_SHAPES)
def test_matmul_like_numpy(shapes):
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    check(tg.matmul(t(a, tg.float64), t(b, tg.float64)), np.matmul(a, b), tg.float64)
    check(t(a).float() @ t(b).float(), np.matmul(a, b), tg.float32, rtol=1e-5, atol=1e-5)


@covers("mm", "bmm")
def test_mm_and_bmm():
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    check(tg.mm(t(a), t(b)), a @ b, rtol=1e-5, atol=1e-6)
    check(t(a).mm(t(b)), a @ b, rtol=1e-5, atol=1e-6)
    c, d = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    check(tg.bmm(t(c), t(d)), c @ d, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="mm: both arguments must be 2-D, got 3-D and 2-D"):
        tg.mm(t(c), t(b))
    with pytest.raises(RuntimeError, match="bmm: both arguments must be 3-D, got 2-D and 3-D"):
        tg.bmm(t(a), t(d))


def test_matmul_refuses_mixed_dtypes_like_pytorch():
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        tg.arange(3) @ tg.ones(3, 2)
    check(tg.arange(3).float() @ tg.ones(3, 2), np.full(2, 3.0), tg.float32)


# -- shapes ---------------------------------------------------------------------------------


@covers("reshape", "view")
def test_reshape_and_view():
    a = rng.standard_normal((2, 3, 4))
    check(tg.reshape(t(a), (4, 6)), a.reshape(4, 6))
    check(t(a).reshape(4, -1), a.reshape(4, -1))
    check(t(a).view(-1), a.reshape(-1))
    check(t(a).view(2, 12), a.reshape(2, 12))
    check(t(a).view_as(t(np.zeros((6, 4)))), a.reshape(6, 4))
    check(t(a).reshape_as(t(np.zeros(24))), a.reshape(24))
    check(tg.tensor(5.0).reshape(1, 1), [[5.0]])


@covers("flatten")
@pytest.mark.parametrize("start,end", [(0, -1), (1, -1), (0, 1), (-2, -1), (1, 1)])
def test_flatten(start, end):
    a = rng.standard_normal((2, 3, 4))
    s, e = start % 3, end % 3
    expected = a.reshape(a.shape[:s] + (-1,) + a.shape[e + 1:])
    check(tg.flatten(t(a), start, end), expected)
    check(t(a).flatten(start_dim=start, end_dim=end), expected)


@covers("unsqueeze", "squeeze")
def test_unsqueeze_and_squeeze():
    a = rng.standard_normal((3, 1, 4, 1))
    check(tg.unsqueeze(t(a), 0), a[None])
    check(t(a).unsqueeze(-1), a[..., None])
    check(t(a).unsqueeze(2), np.expand_dims(a, 2))
    check(tg.squeeze(t(a)), a.squeeze())
    check(t(a).squeeze(1), a.squeeze(1))
    check(t(a).squeeze(-1), a.squeeze(-1))
    check(t(a).squeeze(0), a)  # a dimension that is not 1 stays, as in PyTorch
    check(t(a).squeeze((1, 3)), a.squeeze((1, 3)))


@covers("permute", "transpose", "t")
def test_permute_transpose_t():
    a = rng.standard_normal((2, 3, 4))
    check(tg.permute(t(a), (2, 0, 1)), a.transpose(2, 0, 1))
    check(t(a).permute(1, -1, 0), a.transpose(1, 2, 0))
    check(tg.transpose(t(a), 0, -1), a.swapaxes(0, 2))
    check(t(a).transpose(1, 2), a.swapaxes(1, 2))
    m = rng.standard_normal((3, 5))
    check(tg.t(t(m)), m.T)
    check(t(m).t(), m.T)
    check(t(a).T, a.transpose(2, 1, 0))
    check(t(a).mT, a.swapaxes(-1, -2))
    v = rng.standard_normal(4)
    check(t(v).t(), v)


@covers("expand")
def test_expand():
    a = rng.standard_normal((3, 1))
    check(tg.expand(t(a), 2, 3, 4), np.broadcast_to(a, (2, 3, 4)))
    check(t(a).expand(-1, 5), np.broadcast_to(a, (3, 5)))
    check(t(a).expand((2, 3, 4)), np.broadcast_to(a, (2, 3, 4)))
    check(t(a).expand_as(t(np.zeros((3, 2)))), np.broadcast_to(a, (3, 2)))


@covers("contiguous", "clone")
def test_contiguous_and_clone_copy_values():
    a = rng.standard_normal((3, 4))
    x = t(a)
    check(x.T.contiguous(), a.T)
    check(F.contiguous(x.T), a.T)
    c = tg.clone(x)
    check(c, a)
    c[0, 0] = 100.0
    assert x[0, 0].item() == pytest.approx(a[0, 0])  # the clone owns its data


@covers("cat", "stack")
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_cat_and_stack(dim):
    sizes = [1, 2, 3]
    pieces = []
    for s in sizes:
        shape = [2, 2]
        shape[dim] = s
        pieces.append(rng.standard_normal(shape))
    check(tg.cat([t(p) for p in pieces], dim), np.concatenate(pieces, axis=dim))
    same = [rng.standard_normal((2, 3)) for _ in range(3)]
    check(tg.stack([t(p) for p in same], dim), np.stack(same, axis=dim))


def test_stack_at_the_new_last_dim():
    same = [rng.standard_normal((2, 3)) for _ in range(2)]
    check(tg.stack([t(p) for p in same], 2), np.stack(same, axis=2))
    check(tg.stack([t(p) for p in same], -3), np.stack(same, axis=0))


def test_cat_promotes_dtypes():
    out = tg.cat([tg.arange(2), tg.tensor([0.5])])
    check(out, [0.0, 1.0, 0.5], tg.float32)


# -- indexing ----------------------------------------------------------------------------------

A = np.arange(60.0).reshape(3, 4, 5)
INDICES = [
    1, -1, (0, 2), (-1, -2, -3), slice(1, None), (slice(None), slice(None, None, 2)),
    (Ellipsis, 1), (1, Ellipsis), (None, 0), (slice(None), None, 1), (Ellipsis, None),
    (slice(-2, None), slice(None, -1)), (slice(None, None, -1),), (2, slice(3, 0, -2)),
]


@covers("getitem")
@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_basic_indexing(index):
    check(t(A)[index], A[index])


@covers("getitem")
def test_integer_tensor_and_list_indexing():
    check(t(A)[tg.tensor([2, 0, 2])], A[[2, 0, 2]])
    check(t(A)[tg.tensor([-1, 0])], A[[-1, 0]])
    check(t(A)[:, tg.tensor([3, 1])], A[:, [3, 1]])
    check(t(A)[tg.tensor([0, 2]), tg.tensor([1, 3])], A[[0, 2], [1, 3]])
    check(t(A)[tg.tensor([[0, 1], [2, 2]])], A[[[0, 1], [2, 2]]])
    check(t(A)[[1, 0]], A[[1, 0]])
    check(t(A)[..., tg.tensor([4, 0])], A[..., [4, 0]])
    check(t(A)[tg.tensor(1)], A[1])


@covers("getitem")
def test_bool_mask_indexing():
    mask = A > 30
    check(t(A)[t(mask)], A[mask])
    check(t(A)[t(A) > 30], A[mask])
    row_mask = np.array([True, False, True])
    check(t(A)[t(row_mask)], A[row_mask])


def test_every_public_op_is_covered():
    public = {
        name for name, obj in vars(F).items()
        if inspect.isfunction(obj) and not name.startswith("_")
        and obj.__module__ in (F.__name__, "teachgrad.ops.functional_shapes")
    }
    missing = public - COVERED
    assert not missing, f"functional ops without a value test: {sorted(missing)}"


@covers("isnan", "isinf", "isfinite")
def test_isnan_isinf_isfinite_against_numpy():
    values = np.array([1.0, np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38, 1e-45], np.float32)
    for fn, want in ((F.isnan, np.isnan), (F.isinf, np.isinf), (F.isfinite, np.isfinite)):
        check(fn(t(values)), want(values), dtype=tg.bool)
        check(fn(t([1, -2, 3])), want(np.array([1, -2, 3])), dtype=tg.bool)


@covers("repeat")
def test_repeat_against_numpy_tile():
    a = np.arange(6.0).reshape(2, 3)
    for sizes in [(1, 1), (2, 3), (2, 1, 2), (0, 1)]:
        check(F.repeat(t(a), sizes), np.tile(a, sizes))
    with pytest.raises(RuntimeError, match="can not be smaller"):
        F.repeat(t(a), (2,))

"""The numba CPU backend: every hand-written loop against the numpy reference backend."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad import nn
from teachgrad.backends import numba_matmul
from teachgrad.backends.base import BINARY_OPS, UNARY_OPS
from teachgrad.backends.numba_cpu import NumbaCPUBackend
from teachgrad.backends.numba_loops import BINARY_CODES, CONTIGUOUS, GRAIN, parallel_for, zip_loop
from teachgrad.backends.numpy_backend import NumpyBackend

numba_backend = NumbaCPUBackend()
numpy_backend = NumpyBackend()
DTYPES = [np.float32, np.float64]
RTOL = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-13}


def random(shape, dtype, seed=0, low=-3.0, high=3.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(dtype)


def assert_same(got: np.ndarray, want: np.ndarray, rtol: float | None = None, atol: float = 0.0) -> None:
    """Same type, shape, dtype and values (NaN where numpy has NaN)."""
    assert type(got) is np.ndarray, type(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if want.dtype == np.bool_ or want.dtype.kind == "i":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol or RTOL[want.dtype], atol=atol, equal_nan=True)


# -- elementwise ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", UNARY_OPS)
def test_unary_matches_numpy_on_a_ragged_array_with_edge_values(op, dtype):
    x = random((7, 13), dtype)
    x[0, :6] = [0.0, -0.0, np.nan, 800.0, -800.0, 1e-30]  # log(0), sqrt(<0), exp overflow, NaN ...
    with np.errstate(all="ignore"):
        want = numpy_backend.unary(op, x)
    assert_same(numba_backend.unary(op, x), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_reads_transposed_and_reversed_views_in_place(dtype):
    x = random((6, 9), dtype)
    for view in (x.T, x[::-1, ::2], x[:, 3]):
        assert_same(numba_backend.unary("tanh", view), np.tanh(view))


def test_unary_keeps_integers_for_integer_operations():
    x = np.array([-3, 0, 5, -1], dtype=np.int64)
    for op in ("neg", "abs", "relu", "sign", "step"):
        assert_same(numba_backend.unary(op, x), numpy_backend.unary(op, x))


def test_unary_of_a_0d_array_is_a_0d_array():
    out = numba_backend.unary("exp", np.array(1.5))
    assert type(out) is np.ndarray and out.shape == () and out == pytest.approx(np.exp(1.5))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", BINARY_OPS)
def test_binary_broadcasts_like_numpy(op, dtype):
    a = random((5, 1, 7), dtype, seed=1)
    b = random((3, 7), dtype, seed=2)
    if op == "pow":
        a = np.abs(a)  # keep real answers; NaN handling is checked below
    b[0, 0] = a[0, 0, 0]  # one exact tie for the comparisons
    with np.errstate(all="ignore"):
        want = numpy_backend.binary(op, a, b)
    assert_same(numba_backend.binary(op, a, b), want)


LAYOUTS = ["contiguous", "transposed", "broadcast", "scalar", "reversed"]


@pytest.mark.parametrize("layout, other", [(a, b) for a in LAYOUTS for b in LAYOUTS
                                           if "scalar" not in (a, b) or a != b])
def test_binary_reads_every_layout(layout, other):
    shape = (4, 6)

    def make(kind: str, seed: int):
        base = random((6, 4) if kind == "transposed" else shape, np.float64, seed=seed)
        return {"contiguous": base, "transposed": base.T, "broadcast": base[:1, :],
                "scalar": 2.5, "reversed": base[::-1, ::-1]}[kind]

    a, b = make(layout, 3), make(other, 4)
    assert_same(numba_backend.binary("sub", a, b), np.asarray(np.subtract(a, b)))


def test_binary_with_a_fractional_scalar_compares_integers_exactly():
    x = np.array([0, 1, 2], dtype=np.int64)
    assert_same(numba_backend.binary("lt", x, 0.5), np.array([True, False, False]))
    assert_same(numba_backend.binary("add", x, 2), np.array([2, 3, 4], dtype=np.int64))


def test_binary_nan_and_division_by_zero_follow_numpy():
    a = np.array([np.nan, 1.0, -1.0, 0.0, 2.0])
    b = np.array([1.0, np.nan, 0.0, 0.0, np.nan])
    with np.errstate(all="ignore"):
        for op in ("maximum", "minimum", "div", "pow", "eq", "ne"):
            assert_same(numba_backend.binary(op, a, b), numpy_backend.binary(op, a, b))


def test_bool_operands_take_numpys_path():
    a, b = np.array([True, False, True]), np.array([True, True, False])
    assert_same(numba_backend.binary("eq", a, b), np.array([True, False, False]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_inplace_writes_into_the_array_like_numpy(dtype):
    others = [("add", random((5,), dtype, seed=13)), ("mul", 0.5),
              ("sub", random((5, 4), dtype, seed=14).T), ("div", random((4, 1), dtype, seed=15))]
    for op, other in others:
        x = random((4, 5), dtype, seed=16)
        want = x.copy()
        numpy_backend.binary_inplace(op, want, other)
        buffer = x
        numba_backend.binary_inplace(op, x, other)
        assert x is buffer  # the same array, changed in place
        assert_same(x, want)


def test_binary_inplace_with_an_overlapping_view_matches_numpy():
    x = random((6, 6), np.float64, seed=17)
    want = x.copy()
    numpy_backend.binary_inplace("add", want, want.T)  # numpy buffers the overlap
    numba_backend.binary_inplace("add", x, x.T)
    assert_same(x, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_where_broadcasts_condition_and_scalars(dtype):
    x = random((4, 5), dtype)
    cond = x[:1, :] > 0  # broadcast along rows
    assert_same(numba_backend.where(cond, x, 0.0), np.where(cond, x, 0.0).astype(dtype))
    assert_same(numba_backend.where(x > 1, -1.0, x.T.T), np.where(x > 1, -1.0, x).astype(dtype))


def test_empty_arrays_give_empty_results():
    x = np.zeros((0, 3), dtype=np.float32)
    assert numba_backend.unary("exp", x).shape == (0, 3)
    assert numba_backend.binary("add", x, np.ones(3, dtype=np.float32)).shape == (0, 3)


# -- reductions -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("axes", [None, (0,), (1,), (2,), (0, 2), (0, 1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_matches_numpy_over_any_axes(op, axes, keepdims, dtype):
    x = random((3, 1001, 5), dtype, low=0.0, high=1.0)
    want = numpy_backend.reduce(op, x, axes, keepdims)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    assert_same(numba_backend.reduce(op, x, axes, keepdims), want, rtol=rtol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_long_row_is_summed_in_pieces_correctly(dtype):
    x = random(300_007, dtype, low=0.0, high=1.0)  # several pieces, the last one short
    exact = np.asarray(x.astype(np.float64).sum(), dtype=dtype)
    assert_same(numba_backend.reduce("sum", x, None, False), exact,
                rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert_same(numba_backend.reduce("max", x, None, False), np.asarray(x.max()))


def test_max_and_min_propagate_nan_like_numpy():
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])
    for op in ("max", "min"):
        assert_same(numba_backend.reduce(op, x, (1,), False), numpy_backend.reduce(op, x, (1,), False))


def test_reduce_of_an_int_array_and_of_an_empty_one():
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    assert_same(numba_backend.reduce("sum", x, (0,), False), x.sum(axis=0))
    empty = np.zeros((0, 4))
    assert_same(numba_backend.reduce("sum", empty, (0,), False), np.zeros(4))


# -- matmul ---------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((13, 9), (9, 11)),  # ragged: 4 x 4 blocks plus edges
    ((67, 70), (70, 131)),  # ragged edges on both sides, several tasks
    ((3, 13, 9), (9, 11)),  # a batch against one shared matrix
    ((2, 1, 5, 4), (3, 4, 6)),  # batch dimensions broadcast
    ((9,), (9, 5)),  # 1-D operands, as numpy promotes them
    ((5, 9), (9,)),
    ((9,), (9,)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", list(numba_matmul.KERNELS))
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul_kernels_match_numpy(shapes, kernel, dtype):
    a, b = random(shapes[0], dtype, seed=5), random(shapes[1], dtype, seed=6)
    want = np.asarray(np.matmul(a.astype(np.float64), b.astype(np.float64))).astype(dtype)
    got = numba_matmul.matmul(a, b, kernel)
    single = dtype == np.float32
    assert_same(got, want, rtol=1e-4 if single else 1e-11, atol=1e-5 if single else 1e-12)


def test_backend_matmul_uses_the_chosen_kernel_and_reads_views():
    a = random((8, 6), np.float64, seed=7)
    backend = NumbaCPUBackend()
    backend.matmul_kernel = "naive"
    assert_same(backend.matmul(a.T, a), a.T @ a)
    backend.matmul_kernel = "no such kernel"
    with pytest.raises(ValueError, match="unknown matmul kernel 'no such kernel': choose one of naive"):
        backend.matmul(a.T, a)


def test_matmul_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"shapes \(2, 3\) and \(4, 5\) do not fit"):
        numba_backend.matmul(np.ones((2, 3)), np.ones((4, 5)))


# -- one core or all of them ------------------------------------------------------------

@pytest.mark.parametrize("n", [GRAIN - 1, GRAIN])
def test_the_size_picks_the_one_core_or_the_parallel_build_and_both_agree(n):
    x, y = random(n, np.float32, seed=9), random(n, np.float32, seed=10)
    assert parallel_for(n) == (n >= GRAIN)
    loop = zip_loop(BINARY_CODES["mul"], CONTIGUOUS, CONTIGUOUS, parallel_for(n))
    assert loop.targetoptions["parallel"] == (n >= GRAIN)
    assert_same(numba_backend.binary("mul", x, y), x * y)
    assert_same(numba_backend.unary("neg", x), -x)
    assert_same(numba_backend.where(x > 0, x, y), np.where(x > 0, x, y))
    assert_same(numba_backend.reduce("sum", x, None, False),
                np.asarray(x.astype(np.float64).sum(), dtype=np.float32), rtol=1e-5)


@pytest.mark.parametrize("n", [63, 64])  # 63^3 / 8 multiply-adds is under GRAIN, 64^3 / 8 is not
def test_small_and_large_matmuls_agree_with_numpy(n):
    a, b = random((n, n), np.float64, seed=11), random((n, n), np.float64, seed=12)
    for kernel in numba_matmul.KERNELS:
        assert_same(numba_matmul.matmul(a, b, kernel), a @ b, rtol=1e-12, atol=1e-12)


# -- the whole engine on the numba backend ------------------------------------------------

def _mlp_grads(backend: str) -> dict[str, np.ndarray]:
    tg.backends.set_cpu_backend(backend, wait=True)
    try:
        tg.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3))
        x = tg.tensor(random((10, 5), np.float32, seed=8))
        target = tg.tensor(np.arange(10) % 3)
        loss = nn.functional.cross_entropy(model(x), target)
        loss.backward()
        grads = {name: p.grad.numpy() for name, p in model.named_parameters()}
        grads["loss"] = loss.detach().numpy()
        assert isinstance(tg.backends.get_backend("cpu"), NumbaCPUBackend) == (backend == "numba")
        return grads
    finally:
        tg.backends.set_cpu_backend("numpy")


def test_mlp_forward_and_backward_on_numba_match_numpy():
    on_numba, on_numpy = _mlp_grads("numba"), _mlp_grads("numpy")
    assert tg.backends.get_cpu_backend() == "numpy"
    assert on_numba.keys() == on_numpy.keys()
    for name in on_numpy:
        np.testing.assert_allclose(on_numba[name], on_numpy[name], rtol=1e-5, atol=1e-6, err_msg=name)

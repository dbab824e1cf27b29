"""Every CudaBackend primitive against the numpy reference backend (in the simulator)."""
import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import numpy as np
import pytest

from teachgrad.backends.base import BINARY_OPS, UNARY_OPS
from teachgrad.backends.cuda_backend import CudaBackend
from teachgrad.backends.numpy_backend import NumpyBackend

cuda, ref = CudaBackend(), NumpyBackend()
rng = np.random.default_rng(4)
A = rng.standard_normal((3, 4, 5))


def same(got, expected, tol=1e-12):
    host = cuda.to_numpy(got)
    expected = np.asarray(expected)
    assert host.shape == expected.shape and host.dtype == expected.dtype, (host.shape, expected.shape,
                                                                         host.dtype, expected.dtype)
    np.testing.assert_allclose(host, expected, rtol=tol, atol=tol, equal_nan=True)


def dev(a):
    return cuda.from_numpy(np.asarray(a))


def test_round_trip_keeps_shape_dtype_and_values():
    for a in (A, A.astype(np.float32), np.arange(6, dtype=np.int64), np.array(True), np.zeros((0, 3))):
        back = cuda.to_numpy(cuda.from_numpy(a))
        assert back.dtype == a.dtype and back.shape == a.shape
        np.testing.assert_array_equal(back, a)


@pytest.mark.parametrize("op", UNARY_OPS)
def test_unary(op):
    a = np.abs(A) + 0.1 if op in ("log", "sqrt", "log1p") else A
    same(cuda.unary(op, dev(a)), ref.unary(op, a))


@pytest.mark.parametrize("op", BINARY_OPS)
def test_binary_broadcasting_and_scalars(op):
    a = np.abs(A) + 0.5 if op == "pow" else A
    b = rng.standard_normal((4, 1))
    same(cuda.binary(op, dev(a), dev(b)), ref.binary(op, a, b))
    same(cuda.binary(op, dev(a), 0.5), ref.binary(op, a, 0.5))
    same(cuda.binary(op, 2.0, dev(a)), ref.binary(op, 2.0, a))


def test_binary_float32_stays_float32():
    a = A.astype(np.float32)
    same(cuda.binary("mul", dev(a), 3.0), ref.binary("mul", a, 3.0), tol=1e-6)


def test_where_and_astype():
    cond = A > 0
    same(cuda.where(dev(cond), dev(A), 0.0), ref.where(cond, A, 0.0))
    same(cuda.where(dev(cond[0]), 1.0, dev(A)), ref.where(cond[0], 1.0, A))
    for dtype in (np.float32, np.int64, np.bool_):
        same(cuda.astype(dev(A * 3), dtype), ref.astype(A * 3, dtype), tol=1e-6)


@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("axes", [None, (0,), (1,), (2,), (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce(op, axes, keepdims):
    same(cuda.reduce(op, dev(A), axes, keepdims), ref.reduce(op, A, axes, keepdims))


def test_reduce_of_a_view_and_of_empty_axes():
    view = cuda.permute(dev(A), (2, 0, 1))
    same(cuda.reduce("sum", view, (1,), False), ref.reduce("sum", np.transpose(A, (2, 0, 1)), (1,), False))
    empty = np.zeros((0, 3))
    same(cuda.reduce("sum", dev(empty), (0,), False), ref.reduce("sum", empty, (0,), False))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 2])
@pytest.mark.parametrize("keepdims", [False, True])
def test_arg_reduce(op, axis, keepdims):
    same(cuda.arg_reduce(op, dev(A), axis, keepdims), ref.arg_reduce(op, A, axis, keepdims))


@pytest.mark.parametrize("kernel", ["naive", "tiled", "register"])
def test_matmul_every_kernel_and_numpy_promotion(kernel, monkeypatch):
    from teachgrad.backends import cuda_backend

    monkeypatch.setattr(cuda_backend, "MATMUL_KERNEL", kernel)
    W = rng.standard_normal((5, 6))
    v = rng.standard_normal(5)
    same(cuda.matmul(dev(A), dev(W)), ref.matmul(A, W))          # batch x shared matrix
    same(cuda.matmul(dev(A), dev(v)), ref.matmul(A, v))          # matrix-vector
    same(cuda.matmul(dev(v), dev(W)), ref.matmul(v, W))          # vector-matrix
    same(cuda.matmul(dev(v), dev(v)), ref.matmul(v, v))          # dot product: a 0-d result
    B = rng.standard_normal((2, 1, 5, 2))
    same(cuda.matmul(dev(A), dev(B)), ref.matmul(A, B))          # broadcast batch axes
    same(cuda.matmul(cuda.permute(dev(W), (1, 0)), cuda.permute(dev(A[0]), (1, 0))), W.T @ A[0].T)


def test_matmul_shape_error_names_both_shapes():
    with pytest.raises(ValueError, match=r"matmul: shapes \(3, 4, 5\) and \(4, 2\) do not fit"):
        cuda.matmul(dev(A), dev(np.ones((4, 2))))


def test_layout_views():
    x = dev(A)
    same(cuda.reshape(x, (12, 5)), ref.reshape(A, (12, 5)))
    same(cuda.reshape(cuda.permute(x, (2, 1, 0)), (5, -1)), np.transpose(A, (2, 1, 0)).reshape(5, -1))
    same(cuda.permute(x, (1, 2, 0)), ref.permute(A, (1, 2, 0)))
    same(cuda.broadcast_to(dev(A[:, :1]), (2, 3, 4, 5)), ref.broadcast_to(A[:, :1], (2, 3, 4, 5)))
    t = cuda.permute(x, (2, 0, 1))
    c = cuda.contiguous(t)
    assert c.is_contiguous() and cuda.contiguous(c) is c
    same(c, np.ascontiguousarray(np.transpose(A, (2, 0, 1))))


def test_permute_and_broadcast_are_views():
    x = dev(A)
    assert cuda.permute(x, (2, 0, 1)).buffer is x.buffer
    assert cuda.broadcast_to(x, (2, 3, 4, 5)).buffer is x.buffer
    assert cuda.reshape(x, (60,)).buffer is x.buffer


def test_concatenate():
    B = rng.standard_normal((3, 2, 5))
    same(cuda.concatenate([dev(A), dev(B), dev(A)], 1), ref.concatenate([A, B, A], 1))


def test_getitem_index_add_setitem():
    idx = np.array([2, 0, 2, 1], dtype=np.int64)
    for index in [(1,), (slice(None), slice(1, None, 2)), (idx,), (slice(None), idx, 3), (Ellipsis, 1)]:
        dev_index = tuple(dev(i) if isinstance(i, np.ndarray) else i for i in index)
        same(cuda.getitem(dev(A), dev_index), ref.getitem(A, index))
        values = rng.standard_normal(A[index].shape)
        same(cuda.index_add(A.shape, A.dtype, dev_index, dev(values)),
             ref.index_add(A.shape, A.dtype, index, values))
    x, expected = dev(A), A.copy()
    cuda.setitem(x, (slice(None), dev(idx[:2])), dev(np.ones(5)))
    ref.setitem(expected, (slice(None), idx[:2]), np.ones(5))
    cuda.setitem(x, (0, slice(1, None)), cuda.getitem(x, (0, slice(None, -1))))  # overlapping
    ref.setitem(expected, (0, slice(1, None)), expected[0, :-1].copy())
    same(x, expected)
    cuda.setitem(x, (Ellipsis,), 7.0)
    same(x, np.full_like(A, 7.0))


def test_full():
    same(cuda.full((2, 3), 2.5, np.float32), ref.full((2, 3), 2.5, np.float32))
    same(cuda.full((), 1, np.int64), ref.full((), 1, np.int64))
    same(cuda.zeros((4,), np.bool_), ref.zeros((4,), np.bool_))

"""Calls that once crashed or hung, now answered as PyTorch answers them (values against numpy)."""
from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import teachgrad as tg
from teachgrad.kernels import reduce as reduce_kernels


@pytest.mark.parametrize("op, spec", [("sum", np.sum), ("max", np.max), ("min", np.min)])
@pytest.mark.parametrize("n", [1, 2, 5, 33])
def test_reduce_rows_with_one_thread_per_block_finishes(op, spec, n):
    x = np.arange(3 * n, dtype=np.float32).reshape(3, n) % 7
    got = reduce_kernels.reduce_rows(op, cuda.to_device(x), threads=1).copy_to_host()
    np.testing.assert_array_equal(got, spec(x, axis=1))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_empty_reductions_follow_pytorch(device):
    x = tg.zeros(0, 3, device=device)
    values, indices = x.max(1)
    assert values.shape == (0,) and indices.shape == (0,) and indices.dtype is tg.int64
    assert x.min(1, keepdim=True).values.shape == (0, 1)
    assert x.argmax(1).shape == (0,) and x.argmin(dim=-1).shape == (0,)
    assert x.amax(1).shape == (0,)
    assert x.sum(0).tolist() == [0., 0., 0.]
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        x.max(0)
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        x.amax(0)
    with pytest.raises(RuntimeError, match="Specify the reduction dim"):
        x.max()
    with pytest.raises(IndexError, match="Specify the reduction dim"):
        x.argmax()


def test_comparing_with_none():
    t = tg.ones(3)
    assert (t == None) is False  # noqa: E711 (the comparison under test)
    assert (t != None) is True  # noqa: E711
    assert t in [None, t]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_numpy_empty_and_bool_indices(device):
    a = np.arange(4.)
    x = tg.tensor(a, device=device)
    np.testing.assert_array_equal(x[np.array([0, 2])].cpu().numpy(), a[[0, 2]])
    np.testing.assert_array_equal(x[np.array([True, False, True, False])].cpu().numpy(), a[a % 2 == 0])
    assert x[[]].shape == (0,)
    assert tg.zeros(1, device=device)[True].shape == (1, 1)
    assert x[tg.tensor(2, device=device)].item() == 2.0
    with pytest.raises(IndexError, match="does not support indexing with False"):
        x[False]


def test_sizes_may_be_int_tensors():
    assert tg.zeros(tg.tensor(3)).shape == (3,)
    assert tg.ones((tg.tensor(2), 3)).shape == (2, 3)
    assert tg.ones(3).reshape(tg.tensor(3), 1).shape == (3, 1)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_relu_inplace_trains_like_out_of_place(device):
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(2, 4), tg.nn.ReLU(inplace=True), tg.nn.Linear(4, 1)).to(device)
    reference = tg.nn.Sequential(tg.nn.Linear(2, 4), tg.nn.ReLU(), tg.nn.Linear(4, 1)).to(device)
    reference.load_state_dict(model.state_dict())
    x = tg.randn(5, 2).to(device)
    for m in (model, reference):
        m(x).sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.cpu().numpy(), rtol=1e-6)
    with tg.no_grad():  # outside the graph it really writes in place
        y = x.clone() - 0.5
        out = tg.nn.ReLU(inplace=True)(y)
    assert out is y and (y.cpu().numpy() >= 0).all()
    leaf = tg.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="inplace=True would overwrite a leaf"):
        tg.nn.functional.relu(leaf, inplace=True)


def test_kernel_reductions_of_empty_rows():
    empty = cuda.to_device(np.zeros((3, 0), np.float32))
    np.testing.assert_array_equal(reduce_kernels.reduce_rows("sum", empty).copy_to_host(), [0., 0., 0.])
    for op, reduce in (("max", reduce_kernels.reduce_rows), ("argmin", reduce_kernels.arg_reduce_rows)):
        with pytest.raises(ValueError, match=f"{op} of an empty row has no value"):
            reduce(op, empty)

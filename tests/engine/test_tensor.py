"""The Tensor itself: creation, dtypes, properties, printing, conversion, in-place
updates with PyTorch's leaf rules, indexing and comparisons."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg

# -- creation ------------------------------------------------------------------------------


def test_tensor_from_nested_lists_numbers_and_numpy():
    t = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.dtype is tg.float32 and t.shape == (2, 2) and t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert tg.tensor(3).dtype is tg.int64 and tg.tensor(3).shape == ()
    assert tg.tensor(2.5).dtype is tg.float32  # Python floats become the default dtype
    assert tg.tensor(True).dtype is tg.bool
    assert tg.tensor([]).dtype is tg.float32 and tg.tensor([]).shape == (0,)
    assert tg.tensor(np.array([1.0, 2.0])).dtype is tg.float64  # numpy keeps its dtype
    assert tg.tensor(np.array([1, 2], dtype=np.int32)).dtype is tg.int64  # closest supported
    assert tg.tensor([1, 2], dtype=tg.float64).dtype is tg.float64


def test_tensor_copies_its_data():
    a = np.array([1.0, 2.0])
    t = tg.tensor(a)
    a[0] = 100.0
    assert t.tolist() == [1.0, 2.0]
    u = tg.tensor(t)  # from a tensor: a copy too
    t.add_(1)
    assert u.tolist() == [1.0, 2.0]


def test_tensor_constructor_class():
    t = tg.Tensor([1, 2])
    assert t.dtype is tg.float32 and t.tolist() == [1.0, 2.0]
    assert isinstance(t, tg.Tensor) and not t.requires_grad


@pytest.mark.parametrize("make,value", [(tg.zeros, 0.0), (tg.ones, 1.0), (tg.empty, 0.0)])
def test_zeros_ones_empty(make, value):
    for t in (make(2, 3), make((2, 3)), make([2, 3])):
        assert t.shape == (2, 3) and t.dtype is tg.float32
        assert np.all(t.numpy() == value)
    assert make(2, dtype=tg.int64).dtype is tg.int64
    assert make(2, requires_grad=True).requires_grad
    assert make().shape == ()


def test_full_and_like_functions():
    assert tg.full((2,), 3.5).tolist() == [3.5, 3.5] and tg.full((2,), 3.5).dtype is tg.float32
    assert tg.full((2,), 3).dtype is tg.int64  # like PyTorch: the fill value decides
    assert tg.full((1,), True).dtype is tg.bool
    base = tg.ones(2, 3, dtype=tg.float64)
    assert tg.zeros_like(base).dtype is tg.float64 and tg.zeros_like(base).shape == (2, 3)
    assert tg.ones_like(tg.arange(3)).tolist() == [1, 1, 1]
    assert tg.ones_like(base, dtype=tg.int64).dtype is tg.int64
    assert tg.full_like(base, 7).tolist() == [[7.0] * 3] * 2


def test_arange_linspace_eye():
    assert tg.arange(5).tolist() == [0, 1, 2, 3, 4] and tg.arange(5).dtype is tg.int64
    assert tg.arange(1, 4).tolist() == [1, 2, 3]
    assert tg.arange(1.0, 2.0, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert tg.arange(1.0, 4.0).dtype is tg.float32
    assert tg.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert tg.arange(3, dtype=tg.float64).dtype is tg.float64
    np.testing.assert_allclose(tg.linspace(0, 1, 5).numpy(), [0, 0.25, 0.5, 0.75, 1])
    assert tg.linspace(0, 1, 5).dtype is tg.float32
    assert tg.eye(3).tolist() == np.eye(3).tolist()
    assert tg.eye(2, 3).tolist() == np.eye(2, 3).tolist()
    with pytest.raises(RuntimeError, match="arange: step must be nonzero"):
        tg.arange(0, 1, 0)


def test_random_creation_is_seeded_and_in_range():
    tg.manual_seed(0)
    a, b, c = tg.rand(2, 3), tg.randn(4), tg.randint(0, 5, (100,))
    tg.manual_seed(0)
    assert tg.rand(2, 3).tolist() == a.tolist() and tg.randn(4).tolist() == b.tolist()
    assert tg.randint(0, 5, (100,)).tolist() == c.tolist()
    assert a.dtype is tg.float32 and 0 <= a.numpy().min() and a.numpy().max() < 1
    assert c.dtype is tg.int64 and set(c.tolist()) <= set(range(5))
    assert tg.randint(3, (2, 2)).shape == (2, 2)  # randint(high, size), as in PyTorch
    assert tg.randint(10, size=(3,)).shape == (3,)
    assert tg.rand((2, 2)).shape == (2, 2) and tg.randn(3, dtype=tg.float64).dtype is tg.float64
    assert sorted(tg.randperm(6).tolist()) == list(range(6))


def test_bad_sizes():
    with pytest.raises(RuntimeError, match=r"Trying to create tensor with negative dimension: \[-1\]"):
        tg.zeros(-1)


# -- dtypes ------------------------------------------------------------------------------------


def test_dtype_attributes_and_aliases():
    assert tg.float is tg.float32 and tg.double is tg.float64 and tg.long is tg.int64
    assert repr(tg.float32) == "teachgrad.float32" and str(tg.bool) == "teachgrad.bool"
    assert tg.float32.is_floating_point and not tg.int64.is_floating_point
    assert tg.float64.itemsize == 8
    assert tg.zeros(2, dtype="float64").dtype is tg.float64
    assert tg.zeros(2, dtype=np.float64).dtype is tg.float64
    assert tg.zeros(2, dtype=float).dtype is tg.float32 and tg.zeros(2, dtype=int).dtype is tg.int64


def test_default_dtype_can_be_changed():
    assert tg.get_default_dtype() is tg.float32
    tg.set_default_dtype(tg.float64)
    try:
        assert tg.tensor([1.5]).dtype is tg.float64 and tg.zeros(1).dtype is tg.float64
        assert repr(tg.tensor([1.5])) == "tensor([1.5000])"  # the default needs no label
    finally:
        tg.set_default_dtype(tg.float32)
    with pytest.raises(TypeError, match="the default dtype must be a floating-point type"):
        tg.set_default_dtype(tg.int64)


# -- properties --------------------------------------------------------------------------------


def test_shape_and_friends():
    t = tg.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and isinstance(t.shape, tg.Size)
    assert repr(t.shape) == "teachgrad.Size([2, 3, 4])"
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.ndim == 3 and t.dim() == 3 and t.numel() == 24 and t.shape.numel() == 24 and len(t) == 2
    assert t.device == tg.device("cpu") and t.device == "cpu" and str(t.device) == "cpu"
    assert repr(t.device) == "device(type='cpu')"
    assert t.is_leaf and not t.requires_grad and t.grad is None and t.grad_fn is None
    assert not t.is_cuda and t.is_floating_point() and t.element_size() == 4
    assert t.array.shape == (2, 3, 4) and isinstance(t.array, np.ndarray)
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(tg.tensor(1.0))


def test_iteration_gives_rows():
    rows = list(tg.arange(6).reshape(3, 2))
    assert [r.tolist() for r in rows] == [[0, 1], [2, 3], [4, 5]]


# -- printing like PyTorch ----------------------------------------------------------------------

# expected strings are PyTorch 2.x's output for the same data
REPRS = [
    ([1.0, 2.0, 3.0], "tensor([1., 2., 3.])"),
    ([1.5, -2.25, 100.0], "tensor([  1.5000,  -2.2500, 100.0000])"),
    ([[1, 2], [3, 4]], "tensor([[1, 2],\n        [3, 4]])"),
    ([True, False], "tensor([ True, False])"),
    (3.0, "tensor(3.)"),
    (7, "tensor(7)"),
    ([1e-5, 1.0], "tensor([1.0000e-05, 1.0000e+00])"),
    ([1e10, 1.0], "tensor([1.0000e+10, 1.0000e+00])"),
    ([123456.7, 1.0], "tensor([1.2346e+05, 1.0000e+00])"),
    ([1e8], "tensor([100000000.])"),
    ([1.0, float("nan"), float("inf")], "tensor([1., nan, inf])"),
    ([-0.0, 1.0], "tensor([-0., 1.])"),
    (list(range(2000)), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
    (np.arange(24.0).reshape(2, 3, 4).tolist(),
     "tensor([[[ 0.,  1.,  2.,  3.],\n         [ 4.,  5.,  6.,  7.],\n         [ 8.,  9., 10., 11.]],\n\n"
     "        [[12., 13., 14., 15.],\n         [16., 17., 18., 19.],\n         [20., 21., 22., 23.]]])"),
    ([], "tensor([])"),
    (np.zeros((2, 0)).tolist(), "tensor([], size=(2, 0))"),
    ((np.arange(16.0) / 3).tolist(),
     "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,\n"
     "        3.0000, 3.3333, 3.6667, 4.0000, 4.3333, 4.6667, 5.0000])"),
    (np.arange(1200.0).reshape(30, 40).tolist(),
     "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 3.7000e+01, 3.8000e+01,\n"
     "         3.9000e+01],\n"
     "        [4.0000e+01, 4.1000e+01, 4.2000e+01,  ..., 7.7000e+01, 7.8000e+01,\n"
     "         7.9000e+01],\n"
     "        [8.0000e+01, 8.1000e+01, 8.2000e+01,  ..., 1.1700e+02, 1.1800e+02,\n"
     "         1.1900e+02],\n"
     "        ...,\n"
     "        [1.0800e+03, 1.0810e+03, 1.0820e+03,  ..., 1.1170e+03, 1.1180e+03,\n"
     "         1.1190e+03],\n"
     "        [1.1200e+03, 1.1210e+03, 1.1220e+03,  ..., 1.1570e+03, 1.1580e+03,\n"
     "         1.1590e+03],\n"
     "        [1.1600e+03, 1.1610e+03, 1.1620e+03,  ..., 1.1970e+03, 1.1980e+03,\n"
     "         1.1990e+03]])"),
]


@pytest.mark.parametrize("data,expected", REPRS)
def test_repr_matches_pytorch(data, expected):
    assert repr(tg.tensor(data)) == expected


def test_repr_suffixes():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "tensor([1., 2.], requires_grad=True)"
    assert repr(x * 2) == "tensor([2., 4.], grad_fn=<MulBackward>)"
    assert repr((x * 2).detach()) == "tensor([2., 4.])"
    assert repr(tg.tensor([1.0, 2.0], dtype=tg.float64)) == "tensor([1., 2.], dtype=teachgrad.float64)"
    assert repr(tg.zeros(0, dtype=tg.int64)) == "tensor([], dtype=teachgrad.int64)"
    assert repr(tg.ones(2, device="cuda")) == "tensor([1., 1.], device='cuda:0')"
    long_row = tg.tensor(np.arange(7.0) / 3, dtype=tg.float64, requires_grad=True)
    assert repr(long_row) == (  # a suffix that would pass 80 characters moves to its own line
        "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000],\n"
        "       dtype=teachgrad.float64, requires_grad=True)"
    )


# -- getting values out ---------------------------------------------------------------------------


def test_item_tolist_numpy():
    assert tg.tensor([[2.5]]).item() == 2.5 and isinstance(tg.tensor([[2.5]]).item(), float)
    assert tg.tensor(3).item() == 3 and isinstance(tg.tensor(3).item(), int)
    assert tg.tensor(True).item() is True
    assert tg.tensor([[1, 2]]).tolist() == [[1, 2]] and tg.tensor(2.5).tolist() == 2.5
    a = tg.tensor([1.0, 2.0])
    n = a.numpy()
    assert isinstance(n, np.ndarray) and n.dtype == np.float32 and n.tolist() == [1.0, 2.0]
    assert float(tg.tensor(1.5)) == 1.5 and int(tg.tensor(7)) == 7 and bool(tg.tensor(1))
    assert [10, 20, 30][tg.tensor(1)] == 20  # __index__
    assert np.asarray(a).tolist() == [1.0, 2.0]
    x = tg.tensor([1.0], requires_grad=True)
    assert x.detach().numpy().tolist() == [1.0]


# -- moving and converting ---------------------------------------------------------------------------


def test_dtype_conversions():
    t = tg.tensor([1.7, -2.2])
    assert t.long().tolist() == [1, -2] and t.long().dtype is tg.int64  # truncation, like PyTorch
    assert t.long().float().dtype is tg.float32
    assert t.double().dtype is tg.float64 and t.to(tg.float64).dtype is tg.float64
    assert t.bool().tolist() == [True, True]
    assert t.type() == "teachgrad.float32" and t.type(tg.float64).dtype is tg.float64


def test_to_and_cpu_return_self_when_nothing_changes():
    t = tg.tensor([1.0])
    assert t.to(tg.float32) is t and t.cpu() is t and t.to("cpu") is t
    assert t.to("cpu", copy=True) is not t
    other = tg.zeros(1, dtype=tg.float64)
    assert t.to(other).dtype is tg.float64  # like another tensor
    assert t.to(device="cpu", dtype=tg.float64).dtype is tg.float64


def test_device_round_trip_is_differentiable():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x.to("cuda")
    assert y.device == "cuda" and y.is_cuda and y.grad_fn.name() == "ToDeviceBackward"
    back = y.cpu()
    assert back.device == "cpu" and back.tolist() == [1.0, 2.0]
    (back * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0] and x.grad.device == "cpu"


def test_conversion_to_integer_leaves_the_graph():
    x = tg.tensor([1.5], requires_grad=True)
    assert not x.long().requires_grad
    y = x.double()
    assert y.requires_grad and y.grad_fn.name() == "CastBackward"


def test_detach_shares_data_and_leaves_the_graph():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    d[0] = 5.0  # same storage, as in PyTorch
    assert x.tolist() == [5.0, 2.0]
    assert x.data.tolist() == [5.0, 2.0] and not x.data.requires_grad


def test_detach_in_place():
    y = tg.tensor([1.0], requires_grad=True) * 2
    y.detach_()
    assert y.grad_fn is None and not y.requires_grad and y.is_leaf


def test_clone_copies_and_stays_in_the_graph():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    c = x.clone()
    assert c.grad_fn.name() == "CloneBackward"
    with tg.no_grad():
        c[0] = 9.0
    assert x.tolist() == [1.0, 2.0]
    c.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_requires_grad_underscore_returns_self():
    t = tg.zeros(2)
    assert t.requires_grad_() is t and t.requires_grad
    assert t.requires_grad_(False) is t and not t.requires_grad


# -- in place ---------------------------------------------------------------------------------------


def test_in_place_arithmetic_updates_the_same_tensor_and_its_version():
    t = tg.tensor([1.0, 2.0])
    array = t.array
    t += 1
    t -= 0.5
    t *= 4
    t /= 2
    assert t.tolist() == [3.0, 5.0] and t._version == 4
    assert t.array is array  # same storage
    t.add_(tg.tensor([1.0, 1.0]), alpha=2).sub_(1, alpha=3).mul_(2).div_(4)
    assert t.tolist() == [1.0, 2.0] and t._version == 8
    t.clamp_(1.5, 1.8)
    assert t.tolist() == [1.5, 1.7999999523162842]


def test_in_place_keeps_the_dtype_and_writes_into_the_same_storage():
    t = tg.tensor([1.0, 2.0])
    array = t.array
    t += tg.tensor([0.5, 0.25], dtype=tg.float64)  # a wider operand: the result stays float32
    t.mul_(tg.tensor([2, 2]))  # an integer operand
    assert t.dtype is tg.float32 and t.array is array and t.tolist() == [3.0, 4.5]
    n = tg.arange(3)
    n *= 2
    n.add_(True)
    assert n.dtype is tg.int64 and n.tolist() == [1, 3, 5]


def test_in_place_broadcasts_the_other_operand():
    t = tg.zeros(2, 3)
    t += tg.tensor([1.0, 2.0, 3.0])
    assert t.tolist() == [[1.0, 2.0, 3.0]] * 2


def test_copy_fill_zero():
    t = tg.zeros(2, 3)
    t.copy_(tg.tensor([1, 2, 3]))  # broadcasting and converting the dtype
    assert t.tolist() == [[1.0, 2.0, 3.0]] * 2 and t.dtype is tg.float32
    t.copy_([[1, 1, 1], [2, 2, 2]])
    assert t.tolist() == [[1.0] * 3, [2.0] * 3]
    assert t.fill_(7).tolist() == [[7.0] * 3] * 2
    assert t.zero_().tolist() == [[0.0] * 3] * 2
    assert t._version == 4


def test_in_place_through_a_view_changes_the_base():
    t = tg.zeros(2, 3)
    t[0].fill_(1.0)
    t[:, 2] = 5.0
    assert t.tolist() == [[1.0, 1.0, 5.0], [0.0, 0.0, 5.0]]


def test_parameter_style_update_under_no_grad():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    with tg.no_grad():
        w -= 0.1 * w.grad
    assert w.is_leaf and w.requires_grad and w.grad_fn is None
    np.testing.assert_allclose(w.detach().numpy(), [0.8, 1.6], rtol=1e-6)


# -- indexing -------------------------------------------------------------------------------------------

A = np.arange(24).reshape(2, 3, 4)


@pytest.mark.parametrize("index", [
    0, -1, (1, 2), (-1, -1, -1), slice(None, 1), (slice(None), -2), (Ellipsis, 0), (0, Ellipsis, 1),
    (None,), (None, 1, None), (slice(None), None, slice(1, 3)), (Ellipsis, None),
    (slice(None, None, 2), slice(None, None, -1)),
], ids=repr)
def test_basic_indexing_like_numpy(index):
    assert tg.tensor(A)[index].tolist() == A[index].tolist()


def test_integer_tensor_list_and_mask_indexing():
    t = tg.tensor(A)
    assert t[tg.tensor([1, 0, 1])].tolist() == A[[1, 0, 1]].tolist()
    assert t[tg.tensor([-1])].tolist() == A[[-1]].tolist()
    assert t[0, tg.tensor([2, 0])].tolist() == A[0, [2, 0]].tolist()
    assert t[:, tg.tensor([0, 2]), tg.tensor([1, 3])].tolist() == A[:, [0, 2], [1, 3]].tolist()
    assert t[[0, 1], [2, 0]].tolist() == A[[0, 1], [2, 0]].tolist()
    assert t[t > 20].tolist() == [21, 22, 23]
    assert t[tg.tensor(1)].tolist() == A[1].tolist()


def test_indexing_is_differentiable_and_repeats_add_up():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x[tg.tensor([0, 2, 0])]
    assert y.grad_fn.name() == "IndexBackward"
    (y * tg.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert x.grad.tolist() == [101.0, 0.0, 10.0]


def test_setitem_variants():
    t = tg.zeros(2, 3)
    t[0] = 1
    t[1, 1:] = tg.tensor([5.0, 6.0])
    t[:, 0] += 2
    t[tg.tensor([1]), 0] = 9.0
    t[t == 6] = -1
    t[0] = [7, 8, 9]
    assert t.tolist() == [[7.0, 8.0, 9.0], [9.0, 5.0, -1.0]]


# -- comparisons ------------------------------------------------------------------------------------------


def test_comparisons_broadcast_and_give_bools():
    a = tg.tensor([[1, 2, 3], [3, 2, 1]])
    b = tg.tensor([2, 2, 2])
    assert (a == b).tolist() == [[False, True, False], [False, True, False]]
    assert (a != b).dtype is tg.bool
    assert (a < b).tolist() == [[True, False, False], [False, False, True]]
    assert (a >= 2).tolist() == [[False, True, True], [True, True, False]]
    assert (a > 1.5).tolist() == [[False, True, True], [True, True, False]]
    assert (tg.tensor([0.5]) == tg.tensor([0.5], dtype=tg.float64)).tolist() == [True]


def test_tensors_hash_by_identity():
    a, b = tg.tensor([1.0]), tg.tensor([1.0])
    assert len({a, b}) == 2 and {a: 1}[a] == 1

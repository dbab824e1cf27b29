"""Results that were once quietly wrong: one test per case, against numpy or PyTorch's value.

Values marked "PyTorch 2.13" were printed by ``torch`` 2.13 (CPU) for the same
call; the differential suite (tests/engine/test_differential.py) covers many more.
Each test runs on every backend that the case concerns: ``cpu`` (numpy),
the numba CPU backend and ``cuda`` (the simulator here).
"""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg



def values(t: tg.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


# 1. boolean masks select (and assign, and take gradients) like numpy on every device
def test_bool_mask_selects_assigns_and_backpropagates(device):
    a = np.array([1., -2., 3., -4.], np.float32)
    x = tg.tensor(a, device=device)
    np.testing.assert_array_equal(values(x[x > 0]), a[a > 0])
    x[x < 0] = 0.0
    np.testing.assert_array_equal(values(x), np.where(a < 0, 0, a))
    w = tg.tensor(a, device=device, requires_grad=True)
    (w[w > 0] * tg.tensor([2., 3.], device=device)).sum().backward()
    np.testing.assert_array_equal(values(w.grad), [2., 0., 3., 0.])
    one = tg.tensor([5.], device=device)
    np.testing.assert_array_equal(values(one[one > 0]), [5.])
    m = np.arange(12.).reshape(3, 4)
    t = tg.tensor(m, device=device)
    np.testing.assert_array_equal(values(t[t > 4]), m[m > 4])
    np.testing.assert_array_equal(values(t[:, tg.tensor([True, False, True, False], device=device)]),
                                  m[:, [True, False, True, False]])


# 2. index arrays are bounds-checked (reads and writes), negative ones wrap
def test_index_arrays_are_bounds_checked(device):
    x = tg.arange(9.).reshape(3, 3).to(device)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        x[:2][:, [3]]
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 0 with size 3"):
        x[tg.tensor([-4], device=device)]
    with pytest.raises(IndexError, match="out of bounds"):
        x[:, [0, 5]] = 1.0
    np.testing.assert_array_equal(values(x), np.arange(9.).reshape(3, 3))  # untouched
    np.testing.assert_array_equal(values(x[[-1, 0, -1]]), np.arange(9.).reshape(3, 3)[[-1, 0, -1]])
    x[:, [2, -3]] = tg.tensor([7., 8.], device=device)
    want = np.arange(9.).reshape(3, 3)
    want[:, [2, -3]] = [7., 8.]
    np.testing.assert_array_equal(values(x), want)


# 3. optimizer.step() is all or nothing, and .grad is checked when assigned
@pytest.mark.parametrize("make", [
    lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: tg.optim.Adam(ps, lr=0.1),
    lambda ps: tg.optim.RMSprop(ps, lr=0.1, momentum=0.5),
])
def test_optimizer_step_changes_nothing_when_a_gradient_is_bad(make):
    p1, p2 = tg.nn.Parameter(tg.ones(2)), tg.nn.Parameter(tg.ones(3))
    opt = make([p1, p2])
    p1.grad = tg.ones(2)
    p2.grad = tg.ones(3)
    p2.data = tg.ones(4)  # the parameter changed shape after backward
    with pytest.raises(RuntimeError, match="nothing was updated"):
        opt.step()
    assert p1.tolist() == [1., 1.] and p1._version == 0
    assert not opt.state[p1]


def test_grad_assignment_is_checked():
    p = tg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="assigning|assign a gradient of size \\[3\\]"):
        p.grad = tg.ones(3)
    with pytest.raises(RuntimeError, match="with dtype teachgrad.float64"):
        p.grad = tg.ones(2, dtype=tg.float64)
    with pytest.raises(RuntimeError, match="on cuda"):
        p.grad = tg.ones(2, device="cuda")
    with pytest.raises(TypeError, match="Tensor or None but got grad of type list"):
        p.grad = [1., 1.]
    assert p.grad is None


# 4. a float bound lifts an integer tensor to float (PyTorch 2.13: [1.5, 2., 3.])
def test_clamp_float_bound_promotes_int_tensor(device):
    out = tg.tensor([1, 2, 3], device=device).clamp(min=1.5)
    assert out.dtype is tg.float32
    np.testing.assert_array_equal(values(out), [1.5, 2., 3.])
    assert tg.tensor([1, 2, 3], device=device).clamp(min=2).dtype is tg.int64


# 5. tensor bounds get gradients, on every backend (PyTorch 2.13's masks)
def test_clamp_tensor_bounds_gradients(device):
    x = tg.tensor([1., 5., 3., 0.], device=device, requires_grad=True)
    lo = tg.tensor([2., 2., 2., 4.], device=device, requires_grad=True)
    hi = tg.tensor([4., 4., 4., 1.], device=device, requires_grad=True)
    out = x.clamp(min=lo, max=hi)
    np.testing.assert_array_equal(values(out), [2., 4., 3., 1.])
    out.sum().backward()
    np.testing.assert_array_equal(values(x.grad), [0., 0., 1., 0.])
    np.testing.assert_array_equal(values(lo.grad), [1., 0., 0., 0.])
    np.testing.assert_array_equal(values(hi.grad), [0., 1., 0., 1.])


def test_clamp_tensor_bound_gradcheck():
    x = tg.tensor([0.3, 1.7, -0.4], dtype=tg.float64, requires_grad=True)
    lo = tg.tensor([0.5, 0.1, -1.0], dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradcheck(lambda a, b: a.clamp(min=b, max=1.2), (x, lo))


# 6. pow at base 0 and negative bases: PyTorch 2.13's gradients
def test_pow_gradients_at_zero_and_negative_bases(device):
    a = tg.tensor([0., 0., 0.], device=device, requires_grad=True)
    e = tg.tensor([2., 0., -1.], device=device, requires_grad=True)
    (a ** e).sum().backward()
    np.testing.assert_array_equal(values(a.grad), [0., 0., -np.inf])
    np.testing.assert_array_equal(values(e.grad), [0., 0., -np.inf])
    x = tg.tensor([1., 2., -1.], device=device, requires_grad=True)
    (0.0 ** x).sum().backward()
    np.testing.assert_array_equal(values(x.grad), [0., 0., -np.inf])
    y = tg.tensor([2., 3.], device=device, requires_grad=True)
    out = (-2.0) ** y
    out.sum().backward()
    np.testing.assert_array_equal(values(out), [4., -8.])
    assert np.isnan(values(y.grad)).all()


# 7. copy_ from a tensor in the graph is recorded (PyTorch 2.13: w.grad [2., 2.], x.grad [0, 0])
def test_copy_from_tensor_requiring_grad_is_recorded(device):
    w = tg.ones(2, device=device, requires_grad=True)
    t = tg.zeros(2, device=device)
    t.copy_(w * 2)
    assert t.requires_grad and t.grad_fn is not None
    t.sum().backward()
    np.testing.assert_array_equal(values(w.grad), [2., 2.])
    x = tg.ones(2, device=device, requires_grad=True)
    y = x * 5
    y.copy_(tg.tensor([1.0], device=device))  # broadcast; x's gradient is 0, as in PyTorch
    y.sum().backward()
    np.testing.assert_array_equal(values(x.grad), [0., 0.])
    u = tg.zeros(2)
    with tg.no_grad():
        u.copy_(tg.ones(2, requires_grad=True) * 3)
    assert u.tolist() == [3., 3.] and not u.requires_grad


# 8. Sequential renumbers after del, so append adds instead of overwriting
def test_sequential_del_then_append():
    relu, tanh, sigmoid, last = tg.nn.ReLU(), tg.nn.Tanh(), tg.nn.Sigmoid(), tg.nn.ReLU()
    s = tg.nn.Sequential(relu, tanh, sigmoid)
    del s[0]
    s.append(last)
    assert list(s) == [tanh, sigmoid, last]
    assert [name for name, _ in s.named_children()] == ["0", "1", "2"]


# 9. alpha scales list operands too (PyTorch 2.13: [4.])
def test_add_alpha_with_list_operand():
    assert tg.add(tg.ones(1), [1.0], alpha=3).tolist() == [4.0]
    assert tg.sub(tg.ones(2), [1.0, 2.0], alpha=2).tolist() == [-1.0, -3.0]
    t = tg.ones(2)
    t.add_([1.0, 2.0], alpha=3)
    assert t.tolist() == [4.0, 7.0]


# 10. a Parameter shares its data's version counter
def test_parameter_shares_version_counter():
    t = tg.ones(2)
    p = tg.nn.Parameter(t)
    loss = (p * p).sum()
    t.add_(1.0)  # changes p's storage after p was saved for backward
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


# 11. a root gradient is converted to the root's dtype and must be on its device
def test_backward_gradient_dtype_and_device():
    x = tg.ones(2, requires_grad=True)
    x.backward(tg.tensor([1, 2]))
    assert x.grad.dtype is tg.float32 and x.grad.tolist() == [1., 2.]
    y = tg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="expected device cpu but got cuda"):
        y.backward(tg.ones(2, device="cuda"))
    assert y.grad is None


# 12. division's gradient does not overflow where (a/b)/b is finite (PyTorch 2.13: -1e16)
def test_div_gradient_does_not_overflow(device):
    a = tg.tensor([1e-30], device=device, requires_grad=True)
    b = tg.tensor([1e-23], device=device, requires_grad=True)
    (a / b).sum().backward()
    np.testing.assert_allclose(values(b.grad), [-1e16], rtol=1e-5)


# 13. PyTorch's type promotion: dimensioned tensors win over 0-d ones of the same kind
@pytest.mark.parametrize("a_dtype, a_shape, b_dtype, b_shape, want", [
    (tg.float32, (2,), tg.float64, (), tg.float32),
    (tg.int64, (2,), tg.float64, (), tg.float64),
    (tg.bool, (2,), tg.int64, (), tg.int64),
    (tg.int64, (2,), tg.bool, (), tg.int64),
    (tg.float32, (), tg.float64, (), tg.float64),
    (tg.float32, (2,), tg.float64, (1,), tg.float64),
])
def test_zero_dim_type_promotion(a_dtype, a_shape, b_dtype, b_shape, want):
    a, b = tg.ones(a_shape, dtype=a_dtype), tg.ones(b_shape, dtype=b_dtype)
    assert (a + b).dtype is want and (b * a).dtype is want


# 14. tg.Tensor(sizes) makes a tensor of that shape (PyTorch's legacy constructor)
def test_tensor_class_constructor_takes_sizes():
    assert tg.Tensor(3).shape == (3,)
    t = tg.Tensor(2, 3)
    assert t.shape == (2, 3) and t.dtype is tg.float32
    assert tg.Tensor([1, 2]).dtype is tg.float32
    assert tg.Tensor().shape == (0,)
    with pytest.raises(TypeError, match="data must be a sequence"):
        tg.Tensor(3.0)


# 15. .view() refuses a layout that would need a copy; allowed views write through
def test_view_refuses_non_contiguous_and_writes_through(device):
    x = tg.zeros(2, 3, device=device).t()
    with pytest.raises(RuntimeError, match=r"Use \.reshape\(\.\.\.\) instead"):
        x.view(6)
    base = tg.zeros(4, 6, device=device)
    part = base[:, :3]  # not contiguous, but each row is: this view is allowed
    v = part.view(4, 3, 1)
    assert v.stride() == (6, 1, 1)
    v[1, 2, 0] = 5.0
    assert base[1, 2].item() == 5.0
    assert x.reshape(6).shape == (6,)  # reshape copies when it must

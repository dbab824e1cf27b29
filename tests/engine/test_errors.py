"""Every promised error message, and that each is raised before anything changes.

A failed call must leave the world as it was: values, ``_version`` counters and
``.grad`` all untouched.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import teachgrad as tg


def raises(kind: type, text: str):
    """``pytest.raises`` for an exact piece of the message (not a regular expression)."""
    return pytest.raises(kind, match=re.escape(text))


def snapshot(t: tg.Tensor) -> tuple:
    """What a failed operation must not change."""
    grad = None if t.grad is None else t.grad.tolist()
    return t.detach().numpy().tolist(), t._version, grad, t.dtype, tuple(t.shape)


# -- shapes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum"])
def test_broadcasting_mismatch_names_both_shapes(op):
    a, b = tg.ones(2, 3), tg.ones(4)
    message = ("The size of tensor a (3) must match the size of tensor b (4) at non-singleton "
               f"dimension 1 (in {op}: shapes [2, 3] and [4] cannot broadcast). Fix: reshape or "
               "unsqueeze one of them so that each dimension is equal or 1.")
    with raises(RuntimeError, message):
        getattr(tg, op)(a, b)


def test_broadcasting_mismatch_in_operators_and_where():
    with raises(RuntimeError, "(in mul: shapes [3, 1, 2] and [4, 3] cannot broadcast)"):
        tg.ones(3, 1, 2) * tg.ones(4, 3)
    with raises(RuntimeError, "(in where: shapes [2] and [3] cannot broadcast)"):
        tg.where(tg.ones(2) > 0, tg.ones(3), 0.0)


def test_matmul_shape_mismatch_names_both_shapes():
    message = ("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5): the last dimension of "
               "the first (3) must equal the second-to-last dimension of the second (4).")
    with raises(RuntimeError, message):
        tg.ones(2, 3) @ tg.ones(4, 5)
    message = ("(3 and 4): the last dimension of the first (3) must equal the first dimension "
               "of the second (4)")
    with raises(RuntimeError, message):
        tg.matmul(tg.ones(3), tg.ones(4))
    with raises(RuntimeError, "in matmul (batch dimensions): shapes [2] and [3] cannot broadcast"):
        tg.ones(2, 3, 4) @ tg.ones(3, 4, 2)
    with raises(RuntimeError, "both arguments to matmul need at least 1 dimension, but got 2D and 0D"):
        tg.ones(2, 2) @ tg.tensor(2.0)


def test_reshape_expand_cat_stack_permute_messages():
    t = tg.zeros(2, 3)
    with raises(RuntimeError, "shape '[4, 2]' is invalid for input of size 6"):
        t.reshape(4, 2)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        t.view(-1, -1)
    message = ("The expanded size of the tensor (3) must match the existing size (2) at "
               "non-singleton dimension 0")
    with raises(RuntimeError, message):
        t.expand(3, 3)
    # a new leading dimension has no size to keep: -1 there is refused (PyTorch's message),
    # also for a 0-d tensor, and not read from the far end of the shape
    for x, sizes, dim in ((tg.ones(3), (-1, 3), 0), (tg.tensor(1.0), (-1,), 0),
                          (tg.ones(3), (-1, -1, 3), 1)):
        with raises(RuntimeError, "The expanded size of the tensor (-1) isn't allowed in a "
                                  f"leading, non-existing dimension {dim}"):
            x.expand(*sizes)
    with raises(RuntimeError, "Trying to create tensor with negative dimension -2: [-2, 3]"):
        tg.ones(3).expand(-2, 3)
    assert tg.ones(3).expand(2, -1).shape == (2, 3)
    message = ("cat(): sizes of tensors must match except in dimension 0: tensor 0 has shape [2, 3] "
               "but tensor 1 has shape [2, 2]")
    with raises(RuntimeError, message):
        tg.cat([t, tg.zeros(2, 2)])
    message = ("stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [3, 2] at "
               "entry 1")
    with raises(RuntimeError, message):
        tg.stack([t, tg.zeros(3, 2)])
    with raises(RuntimeError, "permute(): dims [0, 0] must be a reordering of all 2 dimensions"):
        t.permute(0, 0)
    with raises(RuntimeError, "flatten() has invalid args: start_dim cannot come after end_dim"):
        t.flatten(1, 0)


def test_dim_and_index_out_of_range():
    t = tg.zeros(2, 3)
    with raises(IndexError, "Dimension out of range (expected to be in range of [-2, 1], but got 2)"):
        t.sum(dim=2)
    with raises(IndexError, "Dimension out of range (expected to be in range of [-2, 1], but got -3)"):
        t.softmax(-3)
    with raises(RuntimeError, "dim (0, 0) names the same dimension twice"):
        t.mean(dim=(0, 0))
    with pytest.raises(IndexError, match="index 2 is out of bounds for dimension 0 with size 2"):
        t[2]
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 1 with size 3"):
        t[0, -4]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        t[0, 0, 0]
    with raises(IndexError, "tensors used as indices must be long or bool, not teachgrad.float32"):
        t[tg.tensor([0.0])]


# -- devices and dtypes -------------------------------------------------------------------------


def test_device_mismatch_names_both_devices():
    gpu, cpu = tg.ones(2, device="cuda"), tg.ones(2)
    message = ("Expected all tensors to be on the same device, but found at least two devices, "
               "cuda:0 and cpu (in Add). Fix: move one with .to('cuda:0') or .to('cpu') first.")
    with raises(RuntimeError, message):
        gpu + cpu
    with raises(RuntimeError, "found at least two devices, cpu and cuda:0 (in Mul)"):
        cpu * gpu
    with raises(RuntimeError, "found at least two devices, cuda:0 and cpu (in matmul)"):
        gpu @ tg.ones(2, 2)
    with raises(RuntimeError, "found at least two devices, cuda:0 and cpu (in cat)"):
        tg.cat([gpu, cpu])
    with raises(RuntimeError, "indices are on cuda:0 but the tensor is on cpu"):
        cpu[tg.tensor([0], device="cuda")]


def test_unknown_device():
    message = ("unknown device 'tpu': teachgrad has 'cpu' (numpy) and 'cuda' (numba.cuda kernels, "
               "on a GPU or in the CUDA simulator)")
    with raises(RuntimeError, message):
        tg.zeros(2, device="tpu")
    with pytest.raises(RuntimeError, match="unknown device 'tpu'"):
        tg.ones(2).to("tpu")
    with raises(RuntimeError, "invalid device 'cuda:x': the index after ':' must be a number"):
        tg.device("cuda:x")


@pytest.mark.parametrize("bad", ["float8", "complex64", np.complex64, object])
def test_unknown_dtype(bad):
    with pytest.raises(TypeError, match=re.escape(
            f"unknown dtype {bad!r}: teachgrad supports tg.float32, tg.float64, tg.int64, tg.bool")):
        tg.zeros(2, dtype=bad)


def test_requires_grad_on_an_integer_tensor():
    with pytest.raises(RuntimeError, match=re.escape(
            "only tensors of floating point dtype can require gradients, not teachgrad.int64. "
            "Fix: convert first, e.g. t.float().requires_grad_()")):
        tg.tensor([1, 2], requires_grad=True)


def test_mean_of_integers():
    message = ("mean(): could not infer output dtype. Input dtype must be floating point, got "
               "teachgrad.int64")
    with raises(RuntimeError, message):
        tg.arange(3).mean()


def test_bad_data_for_a_tensor():
    with pytest.raises(ValueError, match="can't make a tensor from list: the nesting is ragged"):
        tg.tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match="unsupported operand type for add: tensor and str"):
        tg.ones(2) + "a"


# -- getting values out ------------------------------------------------------------------------


def test_item_on_more_than_one_element():
    message = ("a tensor with 2 elements cannot be converted to a Python number: item() needs "
               "exactly one element (shape [2]). Fix: index one element first (t[0].item()) or use tolist().")
    with raises(RuntimeError, message):
        tg.tensor([1.0, 2.0]).item()


def test_truth_value_of_many_elements_and_numpy_of_a_grad_tensor():
    with pytest.raises(RuntimeError, match="the truth value of a tensor with 3 elements is ambiguous"):
        bool(tg.ones(3))
    with raises(RuntimeError, "Can't call numpy() on a tensor that requires grad"):
        tg.ones(2, requires_grad=True).numpy()


# -- backward --------------------------------------------------------------------------------------


def test_backward_on_a_non_scalar_without_gradient():
    x = tg.ones(2, 3, requires_grad=True)
    message = ("grad can be implicitly created only for scalar outputs, but this tensor has shape "
               "[2, 3]. Fix: reduce it first (loss.sum() or loss.mean()), or pass gradient= with a "
               "tensor of the same shape.")
    with raises(RuntimeError, message):
        (x * 2).backward()
    assert x.grad is None


def test_backward_gradient_of_the_wrong_shape():
    x = tg.ones(2, requires_grad=True)
    with raises(RuntimeError, "gradient has shape [3] but the tensor has shape [2]: they must match"):
        (x * 2).backward(tg.ones(3))
    assert x.grad is None


def test_second_backward_through_a_freed_graph():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    loss = (x * x).sum()
    loss.backward()
    before = snapshot(x)
    with pytest.raises(RuntimeError, match=re.escape(
            "Trying to backward through the graph a second time (or to use saved tensors after they "
            "were freed).")) as info:
        loss.backward()
    assert "Fix: pass retain_graph=True to the first backward()" in str(info.value)
    assert snapshot(x) == before


def test_backward_of_a_tensor_that_does_not_require_grad():
    with raises(RuntimeError, "element 0 of tensors does not require grad and does not have a grad_fn"):
        tg.ones(1).backward()


# -- in place ----------------------------------------------------------------------------------------

LEAF_MESSAGE = re.escape(
    "a leaf Variable that requires grad is being used in an in-place operation. Fix: update "
    "parameters inside `with tg.no_grad():`, or use an out-of-place operation (w = w - lr * g) "
    "if you want the update recorded."
)

IN_PLACE = {
    "+=": lambda t: t.__iadd__(1.0), "-=": lambda t: t.__isub__(1.0), "*=": lambda t: t.__imul__(2.0),
    "/=": lambda t: t.__itruediv__(2.0), "add_": lambda t: t.add_(1.0), "sub_": lambda t: t.sub_(1.0),
    "mul_": lambda t: t.mul_(2.0), "div_": lambda t: t.div_(2.0), "clamp_": lambda t: t.clamp_(0, 1),
    "copy_": lambda t: t.copy_(tg.zeros(2)), "fill_": lambda t: t.fill_(3.0), "zero_": lambda t: t.zero_(),
    "setitem": lambda t: t.__setitem__(0, 5.0), "uniform_": lambda t: t.uniform_(),
    "normal_": lambda t: t.normal_(),
}


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_in_place_on_a_leaf_that_requires_grad(name):
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    before = snapshot(w)
    with pytest.raises(RuntimeError, match=LEAF_MESSAGE):
        IN_PLACE[name](w)
    assert snapshot(w) == before


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_in_place_on_a_leaf_is_allowed_under_no_grad(name):
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.no_grad():
        IN_PLACE[name](w)
    assert w._version == 1 and w.requires_grad and w.is_leaf


def test_in_place_on_a_non_leaf_in_the_graph():
    # recorded, as in PyTorch (more values in tests/engine/test_differential.py); a view is refused
    x = tg.ones(2, requires_grad=True)
    y = x * 2
    y += x
    y.mul_(3.0)
    y.sum().backward()
    assert y.tolist() == [9.0, 9.0] and x.grad.tolist() == [9.0, 9.0]
    view = (tg.ones(2, 2, requires_grad=True) * 2)[0]
    before = snapshot(view)
    message = ("an in-place operation that autograd must record, on a view of another tensor, "
               "is not supported by teachgrad")
    with raises(RuntimeError, message):
        view += 1
    assert snapshot(view) == before


def test_failed_in_place_ops_leave_value_and_version_alone():
    t = tg.zeros(3)
    before = snapshot(t)
    with raises(RuntimeError, "output with shape [3] doesn't match the broadcast shape [2, 3]"):
        t += tg.ones(2, 3)
    with raises(RuntimeError, "The size of tensor a (3) must match the size of tensor b (2)"):
        t.mul_(tg.ones(2))
    with raises(RuntimeError, "(in copy_: shapes [3] and [4] cannot broadcast)"):
        t.copy_(tg.ones(4))
    message = ("shape mismatch: value tensor of shape [2] cannot be broadcast to indexing result of "
               "shape [3]")
    with raises(RuntimeError, message):
        t[:] = tg.ones(2)
    with pytest.raises(IndexError, match="index 3 is out of bounds"):
        t[3] = 1.0
    assert snapshot(t) == before


def test_in_place_with_an_operand_that_requires_grad():
    t = tg.zeros(2)
    w = tg.ones(2, requires_grad=True)
    t += w * 3  # t joins the graph, as in PyTorch
    assert t.requires_grad and not t.is_leaf
    (t * t).sum().backward()
    assert w.grad.tolist() == [18.0, 18.0]
    part = tg.zeros(2, 2)[0]  # a view of a plain tensor: its base would miss the gradient
    with raises(RuntimeError, "on a view of another tensor, is not supported"):
        part += w
    u = tg.zeros(2)
    with tg.no_grad():
        u += w  # no gradient wanted: fine
    assert u.tolist() == [1.0, 1.0] and not u.requires_grad


def test_in_place_on_different_devices():
    t = tg.zeros(2, device="cuda")
    with raises(RuntimeError, "found at least two devices, cuda:0 and cpu (in add)"):
        t += tg.ones(2)
    assert t.tolist() == [0.0, 0.0] and t._version == 0


def test_in_place_result_that_needs_a_wider_dtype():
    t = tg.zeros(3, dtype=tg.int64)
    before = snapshot(t)
    message = ("result type teachgrad.float32 can't be cast to the desired output type "
               "teachgrad.int64")
    with raises(RuntimeError, message):
        t += 1.5
    with raises(RuntimeError, "result type teachgrad.float32 can't be cast"):
        t /= 2  # true division gives floats, even for integers
    with raises(RuntimeError, "result type teachgrad.float32 can't be cast"):
        t.add_(tg.ones(3))
    assert snapshot(t) == before
    t += 2  # same kind: fine
    assert t.tolist() == [2, 2, 2] and t._version == 1


def test_assigning_into_a_graph_tensor():
    # recorded like PyTorch's index_put (values in tests/engine/test_differential.py); a view is refused
    x = tg.ones(2, requires_grad=True)
    y = x * 2
    y[0] = 1.0
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 2.0]
    view = (tg.ones(2, 2, requires_grad=True) * 2)[0]
    with raises(RuntimeError, "assigning into a view (made by IndexBackward) while autograd "
                              "records is not supported by teachgrad"):
        view[0] = 1.0
    assert view.tolist() == [2.0, 2.0] and view._version == 0

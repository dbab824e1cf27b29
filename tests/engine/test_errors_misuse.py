"""Misuse that used to pass silently or fail with numpy's or Python's words.

Each call must raise before anything changes, with a message that names the
problem and the fix; PyTorch options teachgrad lacks are refused by name.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import teachgrad as tg
import teachgrad.nn.functional as F
from teachgrad.kernels.elementwise import copy_kernel
from teachgrad.kernels.launch import launch


def raises(kind: type, text: str):
    """``pytest.raises`` for an exact piece of the message (not a regular expression)."""
    return pytest.raises(kind, match=re.escape(text))


# -- numpy's and Python's words replaced ----------------------------------------------------


def test_inplace_into_expanded_view():
    base = tg.ones(1)
    view = base.expand(3)
    with raises(RuntimeError, "refers to a single memory location (it is an expand()ed view). "
                              "Fix: clone() the tensor"):
        view.add_(1.0)
    with raises(RuntimeError, "Fix: clone() the tensor"):
        view[0] = 2.0
    assert base.tolist() == [1.0] and base._version == 0
    assert view.clone().add_(1.0).tolist() == [2.0, 2.0, 2.0]


def test_cat_and_stack_arguments():
    with raises(RuntimeError, "zero-dimensional tensor (at position 0) cannot be concatenated. "
                              "Fix: use tg.stack"):
        tg.cat([tg.tensor(1.), tg.tensor(2.)])
    with raises(TypeError, "cat(): argument 'tensors' must be a list or tuple of Tensors, not Tensor"):
        tg.cat(tg.ones(2, 2))
    with raises(TypeError, "stack(): argument 'tensors' must be a list or tuple of Tensors, not Tensor"):
        tg.stack(tg.ones(2, 2))
    with raises(TypeError, "expected Tensor as element 1 in argument 'tensors', but got list"):
        tg.cat([tg.ones(2), [1.0]])
    assert tg.stack([tg.tensor(1.), tg.tensor(2.)]).tolist() == [1.0, 2.0]


def test_clamp_bounds_must_be_numbers_or_tensors():
    with raises(TypeError, "clamp: min and max must be numbers or tensors, not str 'a'"):
        tg.ones(2).clamp(min="a")
    with raises(RuntimeError, "clamp: at least one of 'min' or 'max' must not be None"):
        tg.ones(2).clamp()


def test_dims_and_sizes_must_be_ints():
    with raises(TypeError, "dim must be an int or a tuple of ints, not float 1.5"):
        tg.ones(2, 2).sum(dim=1.5)
    with raises(TypeError, "dim must be an int, not float 1.5"):
        tg.ones(2, 2).softmax(dim=1.5)
    with raises(RuntimeError, "invalid shape dimension -2 at index 0 of shape [-2, -2]"):
        tg.ones(4).reshape(-2, -2)
    with raises(TypeError, "sizes must be ints, got 2.5 (float)"):
        tg.ones(4).reshape(2.5, 2)
    with raises(TypeError, "sizes must be integers, got 2.5 (float)"):
        tg.zeros(2.5)


def test_tensor_data_must_be_numbers():
    with raises(TypeError, "can't make a tensor from a string ('abc'): tensors hold numbers"):
        tg.tensor("abc")
    with raises(ValueError, "does not fit in int64"):
        tg.tensor([1, 2**70])
    with raises(RuntimeError, "Could not infer dtype of NoneType"):
        tg.tensor([1.0, None])
    with raises(ValueError, "the nesting is ragged"):
        tg.tensor([[1, 2], [3]])
    with raises(TypeError, "requires_grad must be True or False, not str 'yes'"):
        tg.tensor([1.0], requires_grad="yes")
    with raises(TypeError, "requires_grad must be True or False, not str 'yes'"):
        tg.ones(2, requires_grad="yes")
    with raises(TypeError, "requires_grad must be True or False"):
        tg.ones(2).requires_grad_("yes")


def test_hook_must_return_a_tensor_or_none():
    x = tg.ones(2, requires_grad=True)
    x.register_hook(lambda g: [1.0, 2.0])
    with raises(TypeError, "a gradient hook returned a list: a hook must return a tensor"):
        x.sum().backward()
    assert x.grad is None


def test_gradcheck_in_float32_says_use_float64():
    x = tg.tensor([0.3, 0.7], requires_grad=True)  # float32
    with pytest.warns(UserWarning, match="not float64"):
        with raises(tg.autograd.GradcheckError, "Fix: pass the inputs as float64"):
            tg.autograd.gradcheck(lambda a: (a * 1000).exp().sum(), (x,), eps=1e-6)


def test_kernel_launch_arguments():
    out = tg.zeros(4, device="cuda").array
    with raises(TypeError, "grid and block must be an int or a tuple of 1 to 3 ints, got 2.0 (float)"):
        launch(copy_kernel("strided"), 2.0, 32, out.buffer, 4)
    with raises(TypeError, "argument 0 is a list, but kernels take device arrays"):
        launch(copy_kernel("strided"), 1, 32, [0.0] * 4, 4)
    with raises(TypeError, "argument 0 is a Tensor, but kernels take device arrays"):
        launch(copy_kernel("strided"), 1, 32, tg.zeros(4, device="cuda"), 4)


# -- unsupported PyTorch options: supported, or refused by name ------------------------------


@pytest.mark.parametrize("make", [tg.optim.SGD, tg.optim.Adam, tg.optim.AdamW, tg.optim.RMSprop])
@pytest.mark.parametrize("option", ["fused", "foreach", "capturable", "differentiable"])
def test_optimizer_implementation_options(make, option):
    p = tg.nn.Parameter(tg.ones(2))
    with raises(TypeError, f"teachgrad does not support {make.__name__}({option}=True)"):
        make([p], lr=0.1, **{option: True})
    make([p], lr=0.1, **{option: None})  # the default value is fine
    with raises(TypeError, f"{make.__name__}() got an unexpected keyword argument 'colour'"):
        make([p], lr=0.1, colour=1)


@pytest.mark.parametrize("call", [
    lambda: tg.rand(2, generator=object()), lambda: tg.randn(2, generator=object()),
    lambda: tg.randint(0, 3, (2,), generator=object()), lambda: tg.randperm(3, generator=object()),
    lambda: tg.zeros(2).uniform_(generator=object()), lambda: tg.zeros(2).normal_(generator=object()),
])
def test_a_generator_that_is_not_one_is_refused(call):
    with raises(TypeError, "generator must be a tg.Generator, a numpy Generator or an int seed, "
                           "got object"):
        call()


def test_loss_options():
    logits, target = tg.randn(3, 4), tg.tensor([0, 1, 2])
    with raises(TypeError, "teachgrad does not support cross_entropy(size_average=...)"):
        F.cross_entropy(logits, target, size_average=True)
    with raises(RuntimeError, "weight must be a teachgrad.float32 tensor of shape (4,)"):
        F.cross_entropy(logits, target, weight=tg.ones(3))
    with raises(ValueError, "label_smoothing must be a number in [0, 1], got 1.5"):
        F.cross_entropy(logits, target, label_smoothing=1.5)
    with raises(IndexError, "target 7 is out of bounds"):
        F.nll_loss(logits, tg.tensor([0, 7, -100]))
    loss = tg.nn.CrossEntropyLoss(weight=tg.ones(4), ignore_index=1, label_smoothing=0.1)
    assert loss(logits, target).shape == ()


# -- silently accepted misuse now refused ------------------------------------------------------


def test_parameter_listed_twice_in_an_optimizer():
    p = tg.nn.Parameter(tg.ones(2))
    with raises(ValueError, "a parameter appears twice in the same parameter group"):
        tg.optim.SGD([p, p], lr=0.1)


def test_retain_grad_needs_requires_grad():
    with raises(RuntimeError, "can't retain_grad on Tensor that has requires_grad=False"):
        tg.ones(2).retain_grad()


def test_linear_refuses_a_different_dtype():
    layer = tg.nn.Linear(2, 3)
    with raises(RuntimeError, "mat1 and mat2 must have the same dtype, but got teachgrad.float64 "
                              "and teachgrad.float32"):
        layer(tg.ones(1, 2, dtype=tg.float64))
    assert layer.double()(tg.ones(1, 2, dtype=tg.float64)).dtype is tg.float64


def test_a_cuda_index_beyond_the_devices_is_refused():
    with raises(RuntimeError, "invalid device cuda:2: the simulator is configured with 2"):
        tg.ones(2, device="cuda:2")
    assert tg.ones(2, device="cuda:0").device == tg.device("cuda:0")


def test_arange_direction_must_match_step():
    with raises(RuntimeError, "upper bound and lower bound inconsistent with step sign"):
        tg.arange(5, 0)
    assert tg.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert tg.arange(0, 0).shape == (0,)
    np.testing.assert_allclose(tg.arange(0, 1, 0.25).numpy(), [0, 0.25, 0.5, 0.75])

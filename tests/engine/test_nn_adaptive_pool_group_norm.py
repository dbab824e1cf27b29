"""Adaptive pooling and GroupNorm: float64 gradchecks on every device, values against a
plain numpy reading of PyTorch's window formula, the layers' arguments and refusals.
(PyTorch's own numbers: scripts/differential_nn_layers.py.)"""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import numpy as np
import pytest

import teachgrad.nn.functional as F
from teachgrad import nn
from teachgrad.autograd import gradcheck
from teachgrad.nn.adaptive_pool import window_bounds

rng = np.random.default_rng(5)


def T(*shape, device="cpu"):
    return tg.tensor(rng.standard_normal(shape), dtype=tg.float64, device=device, requires_grad=True)



# (name, function, input shapes on cpu, input shapes on cuda: the simulator wants tiny ones)
CASES = [
    ("avg_uneven", lambda x: F.adaptive_avg_pool2d(x, (3, 2)), [(2, 2, 7, 5)], [(1, 1, 3, 4)]),
    ("avg_larger_than_input", lambda x: F.adaptive_avg_pool2d(x, (5, None)), [(1, 2, 3, 4)],
     [(1, 1, 2, 2)]),
    ("max_uneven", lambda x: F.adaptive_max_pool2d(x, (3, 2)), [(2, 2, 7, 5)], [(1, 1, 3, 4)]),
    ("max_overlapping", lambda x: F.adaptive_max_pool2d(x[0], 4), [(1, 2, 5, 6)], [(1, 1, 3, 3)]),
    ("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b), [(2, 4, 3, 2), (4,), (4,)],
     [(1, 2, 2), (2,), (2,)]),
    ("group_norm_instance", lambda x: F.group_norm(x, x.shape[1]), [(2, 3, 5)], [(1, 2, 3)]),
]


@pytest.mark.parametrize("name, fn, shapes, cuda_shapes", CASES, ids=[c[0] for c in CASES])
def test_backward_matches_finite_differences_in_float64(name, fn, shapes, cuda_shapes, device):
    inputs = tuple(T(*s, device=device) for s in (cuda_shapes if device == "cuda" else shapes))
    assert fn(*inputs).device == tg.device("cuda:0" if device == "cuda" else device)
    assert gradcheck(fn, inputs)


def test_window_bounds_are_pytorch_s_floor_and_ceil():
    assert window_bounds(7, 3) == [(0, 3), (2, 5), (4, 7)]  # overlapping by one row
    assert window_bounds(6, 3) == [(0, 2), (2, 4), (4, 6)]  # dividing: plain tiles
    assert window_bounds(3, 5) == [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)]  # more out than in
    for size in range(1, 12):
        for out in range(1, 12):
            bounds = window_bounds(size, out)
            covered = set().union(*(range(s, e) for s, e in bounds))
            assert covered == set(range(size)) and all(e > s for s, e in bounds)


def _reference(image: np.ndarray, out: tuple[int, int], reduce) -> np.ndarray:
    """Each output cell by the window formula, one at a time."""
    n, c, h, w = image.shape
    result = np.empty((n, c, *out))
    for i, (top, bottom) in enumerate(window_bounds(h, out[0])):
        for j, (left, right) in enumerate(window_bounds(w, out[1])):
            result[:, :, i, j] = reduce(image[:, :, top:bottom, left:right], axis=(2, 3))
    return result


@pytest.mark.parametrize("out", [(1, 1), (2, 3), (4, 4), (6, 2), (9, 1)])
def test_values_and_indices_follow_the_window_formula(out):
    image = rng.standard_normal((2, 3, 6, 4))
    x = tg.tensor(image)
    np.testing.assert_allclose(F.adaptive_avg_pool2d(x, out).numpy(), _reference(image, out, np.mean))
    values, indices = F.adaptive_max_pool2d(x, out, return_indices=True)
    np.testing.assert_array_equal(values.numpy(), _reference(image, out, np.max))
    planes = image.reshape(2, 3, -1)
    picked = np.take_along_axis(planes, indices.numpy().reshape(2, 3, -1), axis=2)
    np.testing.assert_array_equal(picked.reshape(values.shape), values.numpy())  # indices point at them


def test_max_gradient_goes_to_the_first_maximum_once_per_window():
    x = tg.tensor([[[[1.0, 5.0, 5.0], [5.0, 0.0, 2.0]]]], requires_grad=True)
    values, indices = F.adaptive_max_pool2d(x, (1, 2), return_indices=True)  # windows: cols 0-1, 1-2
    assert values.tolist() == [[[[5.0, 5.0]]]] and indices.tolist() == [[[[1, 1]]]]
    values.sum().backward()
    assert x.grad.tolist() == [[[[0.0, 2.0, 0.0], [0.0, 0.0, 0.0]]]]  # both windows chose (0, 1)


def test_output_size_none_keeps_the_input_s_size_and_the_layers_print_as_pytorch():
    x = tg.randn(2, 3, 5, 7)
    assert F.adaptive_avg_pool2d(x, (None, 2)).shape == (2, 3, 5, 2)
    assert nn.AdaptiveMaxPool2d((3, None))(x).shape == (2, 3, 3, 7)
    assert F.adaptive_avg_pool2d(x[0], 1).shape == (3, 1, 1)
    assert repr(nn.AdaptiveAvgPool2d((None, 3))) == "AdaptiveAvgPool2d(output_size=(None, 3))"
    assert repr(nn.AdaptiveMaxPool2d(2, return_indices=True)) == "AdaptiveMaxPool2d(output_size=2)"
    values, indices = nn.AdaptiveMaxPool2d(2, return_indices=True)(x)
    assert values.shape == indices.shape == (2, 3, 2, 2) and indices.dtype == tg.int64


@pytest.mark.parametrize("call, error, message", [
    (lambda x: F.adaptive_avg_pool2d(x, (2,)), RuntimeError, "output_size must be 2"),
    (lambda x: F.adaptive_max_pool2d(x, -1), RuntimeError, "greater than or equal to 0"),
    (lambda x: F.adaptive_avg_pool2d(x, None), TypeError, r"e\.g\. \(None, 7\)"),
    (lambda x: F.adaptive_avg_pool2d(x, 2.5), TypeError, "an int or a pair of ints"),
    (lambda x: nn.AdaptiveAvgPool2d((2, "3")), TypeError, "ints or None"),
    (lambda x: F.adaptive_avg_pool2d(x[0, 0], 2), RuntimeError, r"Expected 3D or 4D tensor, but got \[5, 4\]"),
    (lambda x: F.adaptive_max_pool2d(x[:, :, :0], 2), RuntimeError, "dimension 2 being empty"),
    (lambda x: F.adaptive_max_pool2d(x.long(), 2), NotImplementedError, "input.float()"),
    (lambda x: F.adaptive_max_pool2d(x, 2, return_indices=1), TypeError, "must be a bool"),
    (lambda x: F.group_norm(x, 3), RuntimeError, "divisible by num_groups"),
    (lambda x: F.group_norm(x, 2, tg.ones(3)), RuntimeError, r"weight of shape \[3\]"),
    (lambda x: F.group_norm(x[0, 0, 0], 1), RuntimeError, "at least 2 dimensions"),
    (lambda x: F.group_norm(x, 0), ValueError, "positive int"),
    (lambda x: F.group_norm(x, 2, eps=-1.0), TypeError, "non-negative"),
    (lambda x: F.group_norm(x.double(), 2, tg.ones(4)), RuntimeError, "should be the same"),
    (lambda x: nn.GroupNorm(3, 4), ValueError, r"num_channels \(4\) must be divisible by num_groups \(3\)"),
    (lambda x: nn.GroupNorm(0, 4), ValueError, "num_groups must be a positive int"),
])
def test_bad_arguments_are_refused_before_any_work(call, error, message):
    with pytest.raises(error, match=message):
        call(tg.randn(2, 4, 5, 4))


def test_group_norm_normalises_each_group_of_each_sample():
    x = tg.tensor(rng.standard_normal((3, 6, 4)) * 5 + 2)
    out = F.group_norm(x, 3).numpy().reshape(3, 3, -1)
    np.testing.assert_allclose(out.mean(axis=2), 0, atol=1e-6)
    np.testing.assert_allclose(out.var(axis=2), 1, atol=1e-4)  # (minus eps's share)
    one_group = F.group_norm(x, 1).numpy()
    np.testing.assert_allclose(one_group, F.layer_norm(x, (6, 4)).numpy(), atol=1e-6)


def test_group_norm_layer_parameters_repr_and_state_dict_names_are_pytorch_s():
    layer = nn.GroupNorm(2, 4)
    assert repr(layer) == "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)"
    assert list(layer.state_dict()) == ["weight", "bias"]
    assert layer.weight.tolist() == [1.0] * 4 and layer.bias.tolist() == [0.0] * 4
    assert list(nn.GroupNorm(2, 4, bias=False).state_dict()) == ["weight"]
    bare = nn.GroupNorm(4, 4, affine=False, eps=0.1)
    assert repr(bare) == "GroupNorm(4, 4, eps=0.1, affine=False, bias=False)"
    assert list(bare.state_dict()) == [] and bare.weight is None
    wide = nn.GroupNorm(1, 3, dtype=tg.float64)
    assert wide.weight.dtype == tg.float64
    with tg.no_grad():
        layer.weight.mul_(3)
    layer.reset_parameters()
    assert layer.weight.tolist() == [1.0] * 4

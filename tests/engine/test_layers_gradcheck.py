"""Every new layer's backward against float64 finite differences (tg.autograd.gradcheck),
on cpu and on cuda (the simulator: tiny sizes there)."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import numpy as np
import pytest

import teachgrad.nn.functional as F
from teachgrad.autograd import gradcheck
from teachgrad.ops.conv import Im2Col

rng = np.random.default_rng(7)


def T(*shape, device="cpu"):
    return tg.tensor(rng.standard_normal(shape), dtype=tg.float64, device=device, requires_grad=True)


# (name, function, input shapes) per device: cpu checks bigger cases, cuda tiny ones
CASES = {
    "cpu": [
        ("im2col", lambda x: Im2Col.apply(x, (2, 3), (1, 2), (2, 1), ((1, 0), (2, 1)), 0.0),
         [(2, 2, 5, 4)]),
        ("conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2)),
         [(2, 2, 5, 5), (3, 2, 2, 2), (3,)]),
        ("conv2d_groups_same", lambda x, w, b: F.conv2d(x, w, b, padding="same", groups=2),
         [(1, 4, 4, 3), (4, 2, 2, 3), (4,)]),
        ("conv2d_unbatched", lambda x, w: F.conv2d(x, w), [(2, 4, 4), (2, 2, 3, 3)]),
        ("max_pool2d", lambda x: F.max_pool2d(x, 3, stride=2, padding=1), [(2, 2, 5, 6)]),
        ("max_pool2d_dilated", lambda x: F.max_pool2d(x, 2, stride=1, dilation=2), [(1, 2, 5, 5)]),
        ("avg_pool2d", lambda x: F.avg_pool2d(x, 2, padding=1), [(2, 1, 5, 4)]),
        ("batch_norm_train", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
         [(4, 3, 2, 2), (3,), (3,)]),
        ("batch_norm_1d", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
         [(5, 3), (3,), (3,)]),
        ("layer_norm", lambda x, w, b: F.layer_norm(x, (3, 4), w, b), [(2, 3, 4), (3, 4), (3, 4)]),
        ("embedding", lambda w: F.embedding(tg.tensor([[0, 3, 3], [1, 0, 4]]), w), [(5, 3)]),
    ],
    "cuda": [
        ("im2col", lambda x: Im2Col.apply(x, (2, 2), (1, 1), (1, 1), ((1, 0), (0, 1)), 0.0),
         [(1, 1, 2, 2)]),
        ("conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [(1, 1, 3, 3), (1, 1, 2, 2), (1,)]),
        ("conv2d_groups", lambda x, w: F.conv2d(x, w, groups=2), [(1, 2, 2, 2), (2, 1, 2, 2)]),
        ("max_pool2d", lambda x: F.max_pool2d(x, 2, padding=1), [(1, 1, 3, 2)]),
        ("avg_pool2d", lambda x: F.avg_pool2d(x, 2), [(1, 1, 2, 4)]),
        ("batch_norm_train", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
         [(3, 2), (2,), (2,)]),
        ("layer_norm", lambda x, w, b: F.layer_norm(x, 3, w, b), [(2, 3), (3,), (3,)]),
        ("embedding", lambda w: F.embedding(tg.tensor([2, 0, 2], device="cuda"), w), [(3, 2)]),
    ],
}
PARAMS = [pytest.param(device, fn, shapes, id=f"{device}-{name}")
          for device, cases in CASES.items() for name, fn, shapes in cases]


@pytest.mark.parametrize("device, fn, shapes", PARAMS)
def test_backward_matches_finite_differences(device, fn, shapes):
    inputs = tuple(T(*shape, device=device) for shape in shapes)
    assert fn(*inputs).device == tg.device("cuda:0" if device == "cuda" else device)
    assert gradcheck(fn, inputs)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_batch_norm_in_evaluation_is_differentiable_through_its_affine_part(device):
    mean = tg.tensor([0.5, -1.0], dtype=tg.float64, device=device)
    var = tg.tensor([2.0, 0.5], dtype=tg.float64, device=device)
    fn = lambda x, w, b: F.batch_norm(x, mean, var, w, b, training=False)  # noqa: E731
    assert gradcheck(fn, (T(2, 2, device=device), T(2, device=device), T(2, device=device)))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_padding_row_of_an_embedding_gets_no_gradient(device):
    weight = T(4, 2, device=device)
    F.embedding(tg.tensor([1, 2, 1, 3], device=device), weight, padding_idx=1).sum().backward()
    assert weight.grad.tolist() == [[0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]


def test_max_pool_gives_a_tied_window_s_gradient_to_its_first_maximum():
    x = tg.tensor([[[[1.0, 3.0], [3.0, 3.0]]]], requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    assert x.grad.tolist() == [[[[0.0, 1.0], [0.0, 0.0]]]]


@pytest.mark.parametrize("bias", [False, True])
def test_conv2d_is_one_im2col_node_and_one_matrix_product_node(bias):
    x, w = T(1, 2, 4, 4), T(3, 2, 3, 3)
    out = F.conv2d(x, w, T(3) if bias else None)
    names, todo = [], [out.grad_fn]
    while todo:  # every node of the graph
        node = todo.pop()
        names.append(node.name())
        todo += [n for n, _ in node.next_functions if n is not None]
    # (the bias is added inside the product's node, not by an addition of its own)
    assert names.count("FiltersTimesColumnsBackward") == 1 and names.count("Im2ColBackward") == 1
    assert "AddBackward" not in names

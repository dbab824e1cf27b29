"""The new layers as modules: parameters, buffers, train/eval, PyTorch's defaults, and pinned
errors for bad arguments (raised before anything changes)."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import math

import numpy as np
import pytest

import teachgrad.nn.functional as F
from teachgrad import nn


# -- Conv2d and pooling --------------------------------------------------------------------------
def test_conv2d_has_pytorch_s_shapes_defaults_and_initialisation():
    conv = nn.Conv2d(4, 6, 3, groups=2)
    assert conv.weight.shape == (6, 2, 3, 3) and conv.bias.shape == (6,)
    assert (conv.stride, conv.padding, conv.dilation) == ((1, 1), (0, 0), (1, 1))
    bound = 1 / math.sqrt(2 * 3 * 3)
    assert conv.weight.abs().max().item() <= bound and conv.bias.abs().max().item() <= bound
    assert repr(conv) == "Conv2d(4, 6, kernel_size=(3, 3), stride=(1, 1), groups=2)"
    assert repr(nn.Conv2d(1, 2, (2, 3), stride=2, padding=1, bias=False)) == \
        "Conv2d(1, 2, kernel_size=(2, 3), stride=(2, 2), padding=(1, 1), bias=False)"
    assert repr(nn.Conv2d(1, 2, 3, padding="same", dilation=2)) == \
        "Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=same, dilation=(2, 2))"
    assert nn.Conv2d(1, 1, 3)(tg.randn(2, 1, 5, 7)).shape == (2, 1, 3, 5)
    assert nn.Conv2d(1, 1, 4, padding="same")(tg.randn(1, 6, 6)).shape == (1, 6, 6)


def test_conv2d_matches_a_direct_numpy_loop():
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((2, 3, 5, 6)), rng.standard_normal((4, 3, 2, 3)), rng.standard_normal(4)
    out = F.conv2d(tg.tensor(x), tg.tensor(w), tg.tensor(b), stride=(1, 2)).numpy()
    expected = np.zeros((2, 4, 4, 2))
    for i in range(4):
        for j in range(2):
            window = x[:, :, i:i + 2, 2 * j:2 * j + 3]
            expected[:, :, i, j] = np.einsum("nchw,ochw->no", window, w) + b
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_pooling_defaults_stride_to_the_kernel_size():
    x = tg.arange(16.0).reshape(1, 1, 4, 4)
    assert nn.MaxPool2d(2)(x).tolist() == [[[[5.0, 7.0], [13.0, 15.0]]]]
    assert nn.AvgPool2d(2)(x).tolist() == [[[[2.5, 4.5], [10.5, 12.5]]]]
    assert repr(nn.MaxPool2d(2)) == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"


@pytest.mark.parametrize("make, error, message", [
    (lambda: nn.Conv2d(3, 4, 3, groups=2), ValueError, "in_channels must be divisible by groups"),
    (lambda: nn.Conv2d(4, 3, 3, groups=2), ValueError, "out_channels must be divisible by groups"),
    (lambda: nn.Conv2d(4, 4, 3, groups=0), ValueError, "groups must be a positive integer"),
    (lambda: nn.Conv2d(1, 1, 0), ValueError, r"kernel_size must be positive, got 0"),
    (lambda: nn.Conv2d(1, 1, 2.5), TypeError, r"kernel_size must be an int or a pair of ints, got 2.5"),
    (lambda: nn.Conv2d(1, 1, 3, padding=-1), ValueError, "padding must be non-negative"),
    (lambda: nn.Conv2d(1, 1, 3, padding="full"), ValueError,
     r"Invalid padding string 'full', should be one of \{'valid', 'same'\}"),
    (lambda: nn.Conv2d(1, 1, 3, stride=2, padding="same"), ValueError,
     "padding='same' is not supported for strided convolutions"),
    (lambda: nn.Conv2d(1, 1, 3, padding_mode="reflect"), NotImplementedError,
     "teachgrad supports only padding_mode='zeros'"),
    (lambda: nn.MaxPool2d(2, padding=2), RuntimeError,
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2"),
    (lambda: nn.MaxPool2d(2, ceil_mode=True), NotImplementedError, "does not support ceil_mode=True"),
    (lambda: nn.MaxPool2d(2, return_indices=True), NotImplementedError,
     "does not support return_indices=True"),
    (lambda: nn.AvgPool2d(2, count_include_pad=False), NotImplementedError,
     "supports only count_include_pad=True"),
])
def test_bad_layer_arguments_are_refused(make, error, message):
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize("call, error, message", [
    (lambda: nn.Conv2d(3, 4, 3)(tg.randn(1, 2, 5, 5)), RuntimeError,
     r"Given groups=1, weight of size \[4, 3, 3, 3\], expected input\[1, 2, 5, 5\] to have 3 "
     r"channels, but got 2 channels instead"),
    (lambda: nn.Conv2d(1, 1, 3)(tg.randn(5, 5)), RuntimeError,
     r"expected 3D \(unbatched\) or 4D \(batched\) input, but got input of size: \[5, 5\]"),
    (lambda: nn.Conv2d(1, 1, 3)(tg.randn(1, 1, 2, 5)), RuntimeError,
     r"calculated output size \[0, 3\] is too small"),
    (lambda: nn.Conv2d(1, 1, 2)(tg.randn(1, 1, 3, 3, dtype=tg.float64)), RuntimeError,
     r"input type \(teachgrad.float64\) and weight type \(teachgrad.float32\) should be the same"),
    (lambda: nn.Conv2d(1, 1, 2)(tg.randn(1, 1, 3, 3, device="cuda")), RuntimeError,
     "input is on cuda:0 but weight is on cpu"),
    (lambda: F.conv2d(tg.randn(1, 1, 3, 3), tg.randn(1, 1, 2, 2), tg.randn(2)), RuntimeError,
     r"bias must have shape \(1,\)"),
    (lambda: F.max_pool2d(tg.randn(1, 1, 2, 2), 3), RuntimeError, "output size .* is too small"),
])
def test_bad_inputs_get_errors_that_name_the_problem(call, error, message):
    with pytest.raises(error, match=message):
        call()


# -- BatchNorm -----------------------------------------------------------------------------------
def test_batch_norm_keeps_pytorch_s_parameters_and_buffers():
    bn = nn.BatchNorm2d(3)
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                     "num_batches_tracked"]
    assert bn.num_batches_tracked.dtype == tg.int64 and bn.running_var.tolist() == [1.0] * 3
    assert repr(bn) == "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
    plain = nn.BatchNorm1d(2, affine=False, track_running_stats=False)
    assert list(plain.state_dict()) == [] and plain.weight is None and plain.running_mean is None


def test_batch_norm_normalises_in_training_and_uses_running_statistics_in_eval():
    bn = nn.BatchNorm1d(2, momentum=1.0)  # running statistics = the last batch's
    x = tg.tensor([[1.0, 10.0], [3.0, 30.0], [5.0, 20.0]])
    out = bn(x)
    np.testing.assert_allclose(out.mean(0).detach().numpy(), [0.0, 0.0], atol=1e-6)
    assert bn.running_mean.tolist() == pytest.approx([3.0, 20.0])
    assert bn.running_var.tolist() == pytest.approx([4.0, 100.0])  # unbiased
    bn.eval()
    single = bn(tg.tensor([[3.0, 30.0]]))  # a batch of one is fine in eval
    assert single.tolist()[0] == pytest.approx([0.0, 10 / math.sqrt(100 + 1e-5)], rel=1e-5)
    assert bn.num_batches_tracked.item() == 1


def test_batch_norm_errors_leave_the_running_statistics_alone():
    bn = nn.BatchNorm1d(3)
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel when training, got "
                                         r"input size \[1, 3\]\. Fix: .* model.eval\(\)"):
        bn(tg.randn(1, 3))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        bn(tg.randn(2, 3, 1, 1))
    with pytest.raises(RuntimeError, match=r"running_mean should contain 4 elements .* not shape \(3,\)"):
        bn(tg.randn(2, 4))
    with pytest.raises(ValueError, match=r"expected 4D input \(got 2D input\)"):
        nn.BatchNorm2d(3)(tg.randn(2, 3))
    assert bn.num_batches_tracked.item() == 0 and bn.running_mean.tolist() == [0.0] * 3
    with pytest.raises(ValueError, match=r"momentum must be in \[0, 1\]"):
        nn.BatchNorm1d(3, momentum=1.5)
    with pytest.raises(ValueError, match="running_mean and running_var must be given when training=False"):
        F.batch_norm(tg.randn(2, 3), None, None)
    running = tg.zeros(3)
    with pytest.raises(TypeError, match="batch_norm: momentum must be a non-negative number, got '0.1'"):
        F.batch_norm(tg.randn(2, 3), running, tg.ones(3), training=True, momentum="0.1")
    assert running.tolist() == [0.0] * 3
    with pytest.raises(TypeError, match="layer_norm: eps must be a non-negative number, got None"):
        F.layer_norm(tg.randn(2, 3), 3, eps=None)


def test_batch_norm_without_running_statistics_uses_the_batch_in_eval_too():
    bn = nn.BatchNorm1d(2, track_running_stats=False).eval()
    out = bn(tg.tensor([[1.0, 2.0], [3.0, 6.0]]))
    np.testing.assert_allclose(out.detach().numpy(), [[-1.0, -1.0], [1.0, 1.0]], atol=1e-4)


# -- LayerNorm and Embedding ---------------------------------------------------------------------
def test_layer_norm_normalises_each_sample_over_its_last_dimensions():
    ln = nn.LayerNorm([2, 3], elementwise_affine=True)
    assert ln.weight.shape == (2, 3) and ln.bias.shape == (2, 3)
    out = ln(tg.randn(4, 2, 3) * 5 + 2)
    np.testing.assert_allclose(out.reshape(4, 6).mean(1).detach().numpy(), 0.0, atol=1e-6)
    assert nn.LayerNorm(3, elementwise_affine=False).weight is None
    assert nn.LayerNorm(3, bias=False).bias is None
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[3\], expected input with shape "
                                           r"\[\*, 3\], but got input of size\[2, 4\]"):
        ln = nn.LayerNorm(3)(tg.randn(2, 4))
    with pytest.raises(TypeError, match="normalized_shape must be a positive int"):
        nn.LayerNorm(0)


def test_embedding_starts_normal_with_a_zero_padding_row_and_looks_up_rows():
    emb = nn.Embedding(10, 4, padding_idx=-1)
    assert emb.padding_idx == 9 and emb.weight[9].tolist() == [0.0] * 4
    out = emb(tg.tensor([[1, 9], [1, 2]]))
    assert out.shape == (2, 2, 4) and out[0, 0].tolist() == emb.weight[1].tolist()
    assert repr(emb) == "Embedding(10, 4, padding_idx=9)"
    frozen = nn.Embedding.from_pretrained(tg.ones(3, 2))
    assert not frozen.weight.requires_grad and frozen(tg.tensor([2])).tolist() == [[1.0, 1.0]]


@pytest.mark.parametrize("call, error, message", [
    (lambda: nn.Embedding(5, 2)(tg.tensor([1.0])), RuntimeError,
     "Expected tensor for argument #1 'indices' to have scalar type Long; but got teachgrad.float32"),
    (lambda: nn.Embedding(5, 2)(tg.tensor([0, 5])), IndexError,
     r"index out of range in self: index 5 is not a row of an embedding table with 5 rows"),
    (lambda: nn.Embedding(5, 2)(tg.tensor([-1])), IndexError, "index out of range in self: index -1"),
    (lambda: nn.Embedding(5, 2, padding_idx=5), AssertionError, "Padding_idx must be within num_embeddings"),
    (lambda: nn.Embedding(5, 2, max_norm=1.0), NotImplementedError,
     r"teachgrad does not support max_norm=1.0"),
    (lambda: F.embedding(tg.tensor([0]), tg.ones(2, 2), sparse=True), NotImplementedError,
     "does not support sparse=True"),
    (lambda: nn.Embedding(5, 2)(tg.tensor([0], device="cuda")), RuntimeError,
     "indices are on cuda:0 but the table is on cpu"),
])
def test_bad_embedding_use_is_refused(call, error, message):
    with pytest.raises(error, match=message):
        call()


# -- gradient clipping ---------------------------------------------------------------------------
def _with_grads(*grads):
    params = []
    for g in grads:
        p = tg.zeros(len(g), requires_grad=True)
        p.grad = tg.tensor(g)
        params.append(p)
    return params


def test_clip_grad_norm_scales_all_gradients_together_and_returns_the_norm_before():
    params = _with_grads([3.0, 0.0], [4.0])
    total = nn.utils.clip_grad_norm_(params, max_norm=1.0)
    assert total.item() == pytest.approx(5.0)
    assert params[0].grad.tolist() == pytest.approx([0.6, 0.0], rel=1e-5)
    assert params[1].grad.tolist() == pytest.approx([0.8], rel=1e-5)
    small = _with_grads([0.3])
    assert nn.utils.clip_grad_norm_(small[0], 1.0, norm_type="inf").item() == pytest.approx(0.3)
    assert small[0].grad.tolist() == pytest.approx([0.3])  # below max_norm: unchanged
    assert nn.utils.clip_grad_norm_([tg.zeros(2, requires_grad=True)], 1.0).item() == 0.0


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # inf * 0, as in PyTorch: nan
def test_a_non_finite_norm_is_an_error_only_when_asked():
    params = _with_grads([math.inf, 1.0])
    with pytest.raises(RuntimeError, match=r"The total norm of order 2.0 for gradients from "
                                           r"`parameters` is non-finite, so it cannot be clipped"):
        nn.utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    assert params[0].grad.tolist() == [math.inf, 1.0]  # nothing was scaled
    assert nn.utils.clip_grad_norm_(params, 1.0).item() == math.inf
    with pytest.raises(ValueError, match="norm_type must be a positive number or inf, got -1"):
        nn.utils.clip_grad_norm_(params, 1.0, norm_type=-1)
    with pytest.raises(TypeError, match="expected Tensors"):
        nn.utils.clip_grad_norm_([1.0], 1.0)


# -- a small convolutional network, end to end ---------------------------------------------------
def _cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 2))


def test_a_small_cnn_learns_to_tell_vertical_from_horizontal_bars():
    tg.manual_seed(0)
    images = np.zeros((32, 1, 6, 6), np.float32)
    labels = np.arange(32) % 2
    for i, label in enumerate(labels):
        line = (i // 2) % 6
        if label:
            images[i, 0, :, line] = 1.0
        else:
            images[i, 0, line, :] = 1.0
    model = _cnn()
    optimizer = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = tg.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5)
    x, y = tg.tensor(images), tg.tensor(labels)
    losses = []
    for _ in range(25):
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]
    model.eval()
    assert (model(x).argmax(1) == y).all().item()


def test_the_cnn_computes_the_same_on_cuda_as_on_cpu():
    tg.manual_seed(3)
    model = _cnn().double()
    x = tg.randn(2, 1, 6, 6, dtype=tg.float64)
    loss = model(x).sum()
    loss.backward()
    cpu_grads = [p.grad.numpy() for p in model.parameters()]
    model.zero_grad()
    model.to("cuda")
    loss_cuda = model(x.to("cuda")).sum()
    loss_cuda.backward()
    assert loss_cuda.item() == pytest.approx(loss.item(), rel=1e-10)
    for p, g in zip(model.parameters(), cpu_grads):
        np.testing.assert_allclose(p.grad.cpu().numpy(), g, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("layer, x, message", [
    (nn.BatchNorm1d(2), tg.randn(3, 2, dtype=tg.float64),
     r"BatchNorm1d: input type \(teachgrad.float64\) and running_mean type \(teachgrad.float32\) "
     r"should be the same"),
    (nn.BatchNorm2d(2), tg.randn(2, 2, 2, 2, device="cuda"), "input is on cuda:0 but running_mean is on cpu"),
    (nn.LayerNorm(2), tg.randn(3, 2, dtype=tg.float64), r"layer_norm: input type \(teachgrad.float64\)"),
])
def test_a_layer_of_another_dtype_or_device_is_an_error_not_a_silent_promotion(layer, x, message):
    with pytest.raises(RuntimeError, match=message):
        layer(x)
    if isinstance(layer, nn.BatchNorm1d):
        assert layer.num_batches_tracked.item() == 0

"""The sliding-window kernels behind Conv2d, MaxPool2d and BatchNorm2d's training backward.

The numpy backend reads windows through strided views and adds gradients back
through strided slices; the base class's gather is the plain reference. Each is
checked against the other and against direct numpy loops written from the
definitions (PyTorch's rules where there is a choice: which tied maximum gets
the gradient), on the numpy and numba cpu backends.
"""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
import teachgrad.nn.functional as F
from teachgrad.autograd import gradcheck
from teachgrad.backends import backend_by_name, get_cpu_backend, set_cpu_backend
from teachgrad.backends.base import Backend
from teachgrad.ops.conv import output_size

rng = np.random.default_rng(11)

# (image shape, kernel, stride, dilation): non-square, ragged (windows that do not
# tile the image), strided, dilated
WINDOW_CASES = [
    ((2, 3, 7, 5), (3, 2), (1, 1), (1, 1)),
    ((1, 2, 9, 8), (3, 3), (2, 3), (1, 1)),
    ((2, 1, 10, 7), (2, 3), (3, 2), (2, 2)),
    ((1, 4, 5, 6), (1, 1), (2, 2), (1, 1)),
]


@pytest.fixture(params=["numpy", "numba"])
def cpu_backend(request):
    previous = get_cpu_backend()
    set_cpu_backend(request.param, wait=True)
    yield request.param
    set_cpu_backend(previous)


def _out(shape, kernel, stride, dilation):
    return tuple(output_size(s, k, st, d, 0, 0)
                 for s, k, st, d in zip(shape[2:], kernel, stride, dilation))


@pytest.mark.parametrize("shape, kernel, stride, dilation", WINDOW_CASES)
def test_strided_windows_match_the_gather_and_the_definition(shape, kernel, stride, dilation):
    numpy_backend = backend_by_name("numpy")
    image = rng.standard_normal(shape).astype(np.float32)
    out = _out(shape, kernel, stride, dilation)
    got = numpy_backend.windows(image, kernel, stride, dilation, out)
    gathered = Backend.windows(numpy_backend, image, kernel, stride, dilation, out)
    assert got.flags.c_contiguous and got.shape == shape[:2] + kernel + out
    np.testing.assert_array_equal(got, gathered)
    i, j, p, q = (rng.integers(0, n) for n in kernel + out)
    assert got[1 % shape[0], 0, i, j, p, q] == image[1 % shape[0], 0, p * stride[0] + i * dilation[0],
                                                     q * stride[1] + j * dilation[1]]


@pytest.mark.parametrize("shape, kernel, stride, dilation", WINDOW_CASES)
def test_adding_windows_back_matches_the_reference_and_a_loop(shape, kernel, stride, dilation):
    numpy_backend = backend_by_name("numpy")
    out = _out(shape, kernel, stride, dilation)
    pieces = [rng.standard_normal(shape[:2] + out) for _ in range(kernel[0] * kernel[1])]
    got = numpy_backend.add_windows(pieces, shape, kernel, stride, dilation)
    np.testing.assert_allclose(got, Backend.add_windows(numpy_backend, pieces, shape, kernel,
                                                        stride, dilation), rtol=1e-12)
    want = np.zeros(shape)
    for k, piece in enumerate(pieces):  # every window element, one pixel at a time
        i, j = divmod(k, kernel[1])
        for p in range(out[0]):
            for q in range(out[1]):
                want[:, :, p * stride[0] + i * dilation[0], q * stride[1] + j * dilation[1]] += \
                    piece[:, :, p, q]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def _conv_reference(x, w, stride, padding, dilation, groups):
    """Cross-correlation from its definition, one window element at a time."""
    x = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    out = _out(x.shape, (kh, kw), stride, dilation)
    y = np.zeros((n, o) + out)
    og = o // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = x[:, g * cg:(g + 1) * cg, i * dilation[0]::stride[0], j * dilation[1]::stride[1]]
                patch = patch[:, :, :out[0], :out[1]]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch,
                                                       w[g * og:(g + 1) * og, :, i, j])
    return y


CONV_CASES = [  # (x shape, w shape, stride, padding, dilation, groups)
    ((2, 3, 9, 7), (4, 3, 3, 2), (2, 1), (1, 2), (1, 1), 1),
    ((1, 4, 8, 8), (6, 2, 3, 3), (1, 2), (2, 0), (2, 1), 2),
    ((3, 2, 5, 6), (2, 2, 1, 1), (2, 3), (0, 0), (1, 1), 1),
    ((2, 4, 6, 5), (4, 1, 2, 3), (1, 1), (1, 1), (1, 2), 4),
]


@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", CONV_CASES)
def test_conv2d_matches_the_definition(cpu_backend, xs, ws, stride, padding, dilation, groups):
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    got = F.conv2d(tg.tensor(x), tg.tensor(w), stride=stride, padding=padding, dilation=dilation,
                   groups=groups)
    np.testing.assert_allclose(got.numpy(), _conv_reference(x, w, stride, padding, dilation, groups),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", CONV_CASES)
def test_conv2d_gradients_match_finite_differences(cpu_backend, xs, ws, stride, padding,
                                                   dilation, groups):
    x = tg.tensor(rng.standard_normal(xs), requires_grad=True)
    w = tg.tensor(rng.standard_normal(ws), requires_grad=True)
    b = tg.tensor(rng.standard_normal(ws[0]), requires_grad=True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride, padding, dilation, groups), (x, w, b))


def _max_pool_reference(x, kernel, stride, padding, dilation):
    """Values and input gradient (of the sum of the outputs) by PyTorch's rule: the first
    largest element of a window (row by row) wins; in a window with NaN, its last NaN."""
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2), constant_values=-np.inf)
    out = _out(xp.shape, kernel, stride, dilation)
    values, grad = np.zeros(x.shape[:2] + out), np.zeros(xp.shape)
    for n, c, p, q in np.ndindex(*values.shape):
        best, where = -np.inf, None
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                r, s = p * stride[0] + i * dilation[0], q * stride[1] + j * dilation[1]
                v = xp[n, c, r, s]
                if v > best or np.isnan(v) or where is None:
                    best, where = v, (r, s)
        values[n, c, p, q] = best
        grad[(n, c) + where] += 1
    h, w = x.shape[2:]
    return values, grad[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w]


POOL_CASES = [  # (shape, kernel, stride, padding, dilation)
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1)),     # the common case: tiles the image
    ((2, 2, 7, 9), (2, 2), (2, 2), (0, 0), (1, 1)),     # ragged: the last row/column unused
    ((1, 2, 7, 6), (3, 3), (1, 1), (1, 1), (1, 1)),     # overlapping windows
    ((2, 1, 9, 7), (3, 2), (2, 1), (1, 1), (2, 1)),     # non-square, strided, dilated
    ((2, 2, 7, 8), (2, 2), (1, 2), (1, 0), (2, 1)),     # 2x2 overlapping, dilated, padded
]


@pytest.mark.parametrize("shape, kernel, stride, padding, dilation", POOL_CASES)
def test_max_pool_ties_go_to_the_first_largest_as_in_pytorch(cpu_backend, shape, kernel, stride,
                                                             padding, dilation):
    x = rng.integers(0, 3, shape).astype(np.float32)  # few distinct values: many ties
    t = tg.tensor(x, requires_grad=True)
    y = F.max_pool2d(t, kernel, stride, padding, dilation)
    y.sum().backward()
    values, grad = _max_pool_reference(x, kernel, stride, padding, dilation)
    np.testing.assert_array_equal(y.detach().numpy(), values)
    np.testing.assert_array_equal(t.grad.numpy(), grad)


def test_max_pool_gives_nan_and_its_gradient_to_the_last_nan(cpu_backend):
    x = np.array([[[[1.0, np.nan, 5.0, 2.0], [np.nan, 0.0, 5.0, 5.0]]]], dtype=np.float32)
    t = tg.tensor(x, requires_grad=True)
    y = F.max_pool2d(t, 2)
    y.sum().backward()
    values, grad = _max_pool_reference(x, (2, 2), (2, 2), (0, 0), (1, 1))
    np.testing.assert_array_equal(y.detach().numpy(), values)  # [nan, 5]
    np.testing.assert_array_equal(t.grad.numpy(), grad)  # the nan at [1, 0]; the first 5


def test_max_pool_keeps_integer_images(cpu_backend):
    x = rng.integers(-5, 5, (1, 2, 5, 5))
    y = F.max_pool2d(tg.tensor(x), 3, stride=2, padding=1)
    np.testing.assert_array_equal(y.numpy(), _max_pool_reference(x.astype(float), (3, 3), (2, 2),
                                                                  (1, 1), (1, 1))[0])
    assert y.dtype == tg.int64


def _composed_batch_norm(x, w, b, eps=1e-5):
    axes = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = x.mean(dim=axes, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=axes, keepdim=True)
    out = (x - mean) / (var + eps).sqrt()
    out = out if w is None else out * w.reshape(shape)
    return out if b is None else out + b.reshape(shape)


@pytest.mark.parametrize("shape", [(4, 3, 5, 2), (6, 2), (3, 2, 7)])
@pytest.mark.parametrize("affine", [(True, True), (False, False), (True, False), (False, True)])
def test_batch_norm_training_backward_matches_the_composed_formula(cpu_backend, shape, affine):
    x = tg.tensor(rng.standard_normal(shape), requires_grad=True)
    w = tg.tensor(rng.standard_normal(shape[1]), requires_grad=True) if affine[0] else None
    b = tg.tensor(rng.standard_normal(shape[1]), requires_grad=True) if affine[1] else None
    grad_out = tg.tensor(rng.standard_normal(shape))
    inputs = [t for t in (x, w, b) if t is not None]
    fused = F.batch_norm(x, None, None, w, b, training=True)
    fused_grads = tg.autograd.grad(fused, inputs, grad_out)
    composed = _composed_batch_norm(x, w, b)
    composed_grads = tg.autograd.grad(composed, inputs, grad_out)
    np.testing.assert_allclose(fused.detach().numpy(), composed.detach().numpy(), rtol=1e-12, atol=1e-12)
    for got, want in zip(fused_grads, composed_grads):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-12)
    assert gradcheck(lambda *t: F.batch_norm(t[0], None, None, *_affine(t, affine), training=True),
                     tuple(inputs))


def _affine(tensors, affine):
    rest = iter(tensors[1:])
    return tuple(next(rest) if present else None for present in affine)


def test_cuda_max_pool_and_batch_norm_agree_with_the_cpu_on_a_tiny_case():
    """The same kernels through the cuda backend (the simulator here: tiny sizes)."""
    x = np.array([[[[1.0, 2.0, 2.0], [0.0, 2.0, 1.0], [2.0, 0.0, 2.0]]]])  # ties everywhere
    t = tg.tensor(x, device="cuda", requires_grad=True)
    y = F.max_pool2d(t, 2, stride=1)
    y.sum().backward()
    values, grad = _max_pool_reference(x, (2, 2), (1, 1), (0, 0), (1, 1))
    np.testing.assert_array_equal(y.detach().cpu().numpy(), values)
    np.testing.assert_array_equal(t.grad.cpu().numpy(), grad)
    b = rng.standard_normal((3, 2, 1, 2))
    gb = rng.standard_normal(b.shape)
    results = []
    for device in ("cpu", "cuda"):
        xb = tg.tensor(b, device=device, requires_grad=True)
        out = F.batch_norm(xb, None, None, training=True)
        out.backward(tg.tensor(gb, device=device))
        results.append((out.detach().cpu().numpy(), xb.grad.cpu().numpy()))
    for on_cpu, on_cuda in zip(*results):
        np.testing.assert_allclose(on_cuda, on_cpu, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, kernel, stride, padding, dilation", POOL_CASES)
def test_compiled_window_loops_match_the_whole_array_path(monkeypatch, dtype, shape, kernel,
                                                          stride, padding, dilation):
    """On numpy float arrays, col2im and max-pooling run compiled loops
    (``backends/window_loops.py``); every other backend runs the whole-array code. Both
    give the same values and gradients: exactly where each pixel gets one contribution,
    within rounding where overlapping windows add several in another order."""
    import teachgrad.ops.conv as conv_ops
    from teachgrad.backends.compiled_loops import loops_take

    x = rng.integers(0, 3, shape).astype(dtype)  # ties
    x[0, 0, 0, 0] = np.nan  # and a NaN window
    weight = rng.standard_normal((3, shape[1]) + kernel).astype(dtype)
    grad_pool = rng.standard_normal(x.shape[:2] + _out(
        (0, 0, shape[2] + 2 * padding[0], shape[3] + 2 * padding[1]), kernel, stride, dilation))

    def run(loops: bool):
        monkeypatch.setattr(conv_ops, "loops_take", loops_take if loops else (lambda *arrays: False))
        t = tg.tensor(x, requires_grad=True)
        pooled = F.max_pool2d(t, kernel, stride, padding, dilation)
        pooled.backward(tg.tensor(grad_pool.astype(dtype)))
        u = tg.tensor(np.nan_to_num(x), requires_grad=True)
        convolved = F.conv2d(u, tg.tensor(weight), None, stride, padding, dilation)
        convolved.sum().backward()
        return [a.detach().numpy() for a in (pooled, t.grad, convolved, u.grad)]

    compiled, whole_array = run(True), run(False)
    np.testing.assert_array_equal(compiled[0], whole_array[0])
    np.testing.assert_array_equal(compiled[2], whole_array[2])
    # the compiled backward gives each window's gradient to its winner only; the masks
    # multiply every element (a NaN gradient would spread): same values for finite ones
    np.testing.assert_allclose(compiled[1], whole_array[1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(compiled[3], whole_array[3], rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, affine", [((4, 3, 5, 6), True), ((4, 3, 5, 6), False),
                                           ((6, 5), True), ((3, 4, 7), True)])
def test_compiled_batch_norm_matches_the_whole_array_path(monkeypatch, dtype, shape, affine):
    """On numpy float arrays batch norm's passes are compiled loops
    (``backends/batch_norm_loops.py``, float64 sums); elsewhere whole-array operations.
    Output, running statistics and the three gradients agree within rounding."""
    import teachgrad.nn as nn
    import teachgrad.ops.batch_norm as batch_norm_ops
    from teachgrad.backends.compiled_loops import loops_take

    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    grad = rng.standard_normal(shape).astype(dtype)
    weight, bias = rng.uniform(0.5, 2, shape[1]), rng.uniform(-1, 1, shape[1])

    def run(loops: bool):
        monkeypatch.setattr(batch_norm_ops, "loops_take",
                            loops_take if loops else (lambda *arrays: False))
        layer = (nn.BatchNorm1d if len(shape) < 4 else nn.BatchNorm2d)(shape[1], affine=affine)
        if affine:
            with tg.no_grad():
                layer.weight.copy_(tg.tensor(weight.astype(np.float32)))
                layer.bias.copy_(tg.tensor(bias.astype(np.float32)))
        layer.to(tg.float64 if dtype == np.float64 else tg.float32)
        t = tg.tensor(x, requires_grad=True)
        layer(t).backward(tg.tensor(grad))
        got = [layer(t).detach().numpy(), t.grad.numpy(), layer.running_mean.numpy(),
               layer.running_var.numpy()]
        return got + ([layer.weight.grad.numpy(), layer.bias.grad.numpy()] if affine else [])

    tolerance = 2e-5 if dtype == np.float32 else 1e-12
    for compiled, whole_array in zip(run(True), run(False)):
        np.testing.assert_allclose(compiled, whole_array, rtol=tolerance, atol=tolerance)

"""Softmax's and log-softmax's backward where the compiled loops do not run (small arrays,
a dimension other than the last): the formula on the backend's arrays gives the bits of the
same formula written with tensor operations, on every device, and mixed dtypes still promote."""
import numpy as np
import pytest

import teachgrad as tg
import teachgrad.nn.functional as F

rng = np.random.default_rng(11)
DEVICES = ["cpu", "cuda"]


def _tensor_formula(name, out, grad, dim):
    if name == "softmax":
        return out * (grad - (grad * out).sum(dim=dim, keepdim=True))
    return grad - out.exp() * grad.sum(dim=dim, keepdim=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, dim", [((4, 6), -1), ((3, 5, 7), 1), ((2, 3, 4), 0), ((5,), 0)])
def test_backward_on_arrays_gives_the_tensor_formula_s_bits(name, dtype, device, shape, dim):
    values = rng.standard_normal(shape) * 3
    grad = rng.standard_normal(shape)
    x = tg.tensor(values, dtype=dtype, device=device, requires_grad=True)
    y = getattr(F, name)(x, dim=dim)
    g = tg.tensor(grad, dtype=dtype, device=device)
    y.backward(g)
    with tg.no_grad():
        expected = _tensor_formula(name, y.detach(), g, dim % len(shape))
    np.testing.assert_array_equal(x.grad.cpu().numpy(), expected.cpu().numpy())


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_backward_matches_finite_differences_in_float64(name):
    x = tg.tensor(rng.standard_normal((3, 4)), dtype=tg.float64, requires_grad=True)
    weights = tg.tensor(rng.standard_normal((3, 4)))
    assert tg.autograd.gradcheck(lambda t: (getattr(F, name)(t, dim=1) * weights).sum(), (x,))

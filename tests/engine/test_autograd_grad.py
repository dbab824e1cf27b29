"""``tg.autograd.grad`` against hand-derived (numpy) gradients; it leaves every ``.grad`` alone."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_grad_returns_gradients_and_touches_no_grad(device):
    a = np.array([0.5, -1.0, 2.0])
    x = tg.tensor(a, device=device, requires_grad=True)
    w = tg.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    w.grad = tg.ones(3, device=device)  # an earlier gradient that must survive
    y = x * 2
    (gx, gy) = tg.autograd.grad(((y ** 3) * w).sum(), (x, y))
    np.testing.assert_allclose(gx.cpu().numpy(), 3 * (2 * a) ** 2 * 2 * [1, 2, 3], rtol=1e-6)
    np.testing.assert_allclose(gy.cpu().numpy(), 3 * (2 * a) ** 2 * [1, 2, 3], rtol=1e-6)
    assert x.grad is None and w.grad.tolist() == [1.0, 1.0, 1.0]


def test_grad_options():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    unused = tg.tensor([1.0], requires_grad=True)
    y = x * x
    (g,) = tg.autograd.grad(y, x, grad_outputs=tg.tensor([1.0, 10.0]), retain_graph=True)
    assert g.tolist() == [2.0, 40.0]
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        tg.autograd.grad(y.sum(), [x, unused], retain_graph=True)
    assert tg.autograd.grad(y.sum(), [x, unused], allow_unused=True, retain_graph=True)[1] is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        tg.autograd.grad(y.sum(), tg.ones(2))
    with pytest.raises(NotImplementedError, match="teachgrad does not support grad\\(create_graph=True\\)"):
        tg.autograd.grad(y.sum(), x, create_graph=True)

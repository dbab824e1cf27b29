"""The engine's post-accumulate-grad hook, the seam DistributedDataParallel builds on."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg


def test_hook_sees_the_accumulated_grad_each_backward():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.numpy().copy()))
    (w * 3).sum().backward()
    (w * w).sum().backward()  # two edges into one leaf: the hook runs once, after both add up
    np.testing.assert_allclose(seen[0], [3.0, 3.0])
    np.testing.assert_allclose(seen[1], [3.0 + 2.0, 3.0 + 4.0])
    assert len(seen) == 2
    handle.remove()
    (w * 3).sum().backward()
    assert len(seen) == 2


def test_hooks_run_in_the_order_gradients_become_final():
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.ReLU(), tg.nn.Linear(4, 2))
    order = []
    for name, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, name=name: order.append(name))
    model(tg.randn(5, 3)).sum().backward()
    # backprop meets the last layer first, as DDP's reversed buckets assume
    assert order[:2] == ["2.bias", "2.weight"] or order[:2] == ["2.weight", "2.bias"]
    assert sorted(order) == sorted(n for n, _ in model.named_parameters())


def test_hook_refuses_non_leaves_and_tensors_without_grad():
    w = tg.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf tensors.*Fix: use register_hook"):
        (w * 2).register_post_accumulate_grad_hook(print)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        tg.tensor([1.0]).register_post_accumulate_grad_hook(print)

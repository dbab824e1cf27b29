"""Backward frees what each operation kept for it, its kept output included, as it passes."""
import gc

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd.function import FREED_GRAPH_MESSAGE
from teachgrad.streams import blocking_launches


@pytest.mark.parametrize("op", ["tanh", "sigmoid", "exp"])
def test_a_second_backward_through_a_kept_output_says_the_graph_was_freed(op):
    x = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = getattr(x, op)()
    y.backward(tg.ones(3))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward(tg.ones(3))
    assert "retain_graph=True" in FREED_GRAPH_MESSAGE


def test_retain_graph_keeps_the_output_for_a_second_backward():
    x = tg.tensor([0.5, -1.0, 2.0], dtype=tg.float64, requires_grad=True)
    y = x.tanh()
    y.backward(tg.ones(3, dtype=tg.float64), retain_graph=True)
    y.backward(tg.ones(3, dtype=tg.float64))
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - np.tanh([0.5, -1.0, 2.0]) ** 2))


def test_after_backward_the_graph_holds_no_device_memory_but_its_output():
    with blocking_launches():
        x = tg.ones(64, 8, device="cuda", requires_grad=True)
        gc.collect()
        before = tg.cuda.memory_allocated()
        y = x
        for _ in range(4):
            y = (y * 0.5).tanh()
        loss = y.sum()
        held_after_forward = tg.cuda.memory_allocated() - before
        loss.backward()
        x.grad = None
        gc.collect()
        held_after_backward = tg.cuda.memory_allocated() - before
    # forward: four kept tanh outputs (the last is y) and the loss; backward frees all
    # but y itself and the loss, which the program still holds
    assert held_after_forward == 4 * 2048 + 512
    assert held_after_backward == 2048 + 512

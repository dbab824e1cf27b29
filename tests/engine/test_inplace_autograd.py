"""Assignment and in-place methods on tensors autograd records: float64 gradient checks on
every device (PyTorch's values for the same programs are in tests/engine/test_differential.py)."""
from __future__ import annotations

import pytest

import teachgrad as tg
from teachgrad.autograd import gradcheck


def _inputs(device):
    x = tg.tensor([[0.3, -1.2, 2.0], [0.7, 1.1, -0.4]], dtype=tg.float64, device=device,
                  requires_grad=True)
    v = tg.tensor([0.5, -2.0, 1.5], dtype=tg.float64, device=device, requires_grad=True)
    return x, v


def _assigned(x, v):
    y = x * 2
    y[y > 1] = 0.25  # a mask: those positions no longer depend on x
    y[1] = v * 3  # a row from another tensor
    y[:, [0, 2]] = v[1]  # index arrays, a broadcast 0-d value
    return y * y


def _changed_in_place(x, v):
    y = x.sin()  # (sin saves its input, not its output, so y may change)
    y.add_(v).mul_(v).sub_(x, alpha=0.5)
    y.clamp_(-3.0, 3.0)
    y += 1.0
    y /= v.abs() + 1
    return y


def _copied_and_filled(x, v):
    y = x * 1
    y.copy_(v * v)  # y no longer depends on x
    z = x * 3
    z.fill_(2.0)
    t = tg.zeros(2, 3, dtype=tg.float64, device=x.device)
    t += v
    return y + z + t * x


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("program", [_assigned, _changed_in_place, _copied_and_filled])
def test_recorded_in_place_changes_pass_gradcheck(device, program):
    assert gradcheck(program, _inputs(device))


def test_changing_a_saved_output_is_still_an_error():
    x, v = _inputs("cpu")
    y = x.exp()  # exp's backward reads its output
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="was modified in place"):
        y.sum().backward()


def test_autograd_grad_gradcheck_agrees():
    x, v = _inputs("cpu")
    (gx,) = tg.autograd.grad(_changed_in_place(x, v).sum(), x)
    _changed_in_place(x, v).sum().backward()
    assert gx.tolist() == x.grad.tolist()

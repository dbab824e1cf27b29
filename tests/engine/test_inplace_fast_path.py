"""``t.add_(x)``, ``t *= 0.9``, ...: the one-call path for plain operands matches the checked one.

``_inplace_binary`` writes a float cpu tensor's update in one backend call when the other
operand is a Python number or a tensor of its own dtype, shape and device and nothing is
recorded; everything else goes through ``_inplace_binary_checked`` (promotion,
broadcasting, autograd's rules, the device guard).
"""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.tensor import Tensor

OPS = ["add", "sub", "mul", "div"]


@pytest.fixture
def checked_calls(monkeypatch):
    """The operand kinds that went down the checked path."""
    calls = []
    original = Tensor._inplace_binary_checked

    def counting(self, op, other):
        calls.append(type(other).__name__)
        return original(self, op, other)
    monkeypatch.setattr(Tensor, "_inplace_binary_checked", counting)
    return calls


@pytest.mark.parametrize("dtype", [tg.float16, tg.float32, tg.float64])
@pytest.mark.parametrize("op", OPS)
def test_plain_operands_take_one_call_with_the_checked_paths_bits(dtype, op, checked_calls):
    rng = np.random.default_rng(OPS.index(op))
    values = rng.standard_normal((3, 4)) + 2.0
    for other in (0.7, 3, tg.tensor(rng.standard_normal((3, 4)) + 2.0, dtype=dtype)):
        fast = tg.tensor(values, dtype=dtype)
        slow = fast.clone()
        version = fast._version
        assert fast._inplace_binary(op, other) is fast
        assert checked_calls == []  # the one call
        Tensor._inplace_binary_checked(slow, op, other)
        checked_calls.clear()
        assert fast.numpy().tobytes() == slow.numpy().tobytes()
        assert fast.dtype is dtype and fast._version == version + 1


def test_everything_else_takes_the_checked_path(checked_calls):
    t = tg.ones(2, 3)
    t.mul_(True)  # a bool
    t.add_(np.float32(1.0))  # a numpy number
    t.add_(tg.ones(3))  # broadcasting
    t.add_(tg.ones(2, 3, dtype=tg.float64))  # another dtype
    tg.ones(2, 3, dtype=tg.int64).add_(1)  # an integer tensor
    assert checked_calls == ["bool", "float32", "Tensor", "Tensor", "int"]
    np.testing.assert_array_equal(t.numpy(), np.full((2, 3), 4.0, dtype=np.float32))


def test_autograds_rules_still_hold(checked_calls):
    w = tg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.mul_(2.0)
    with tg.no_grad():
        w.mul_(2.0)  # an optimizer's update: allowed, and the one call
    assert checked_calls == ["float"]
    np.testing.assert_array_equal(w.detach().numpy(), np.full(3, 2.0, dtype=np.float32))
    # a tensor that requires grad as the operand: recorded (the gradient reaches it)
    t, v = tg.ones(3), tg.full((3,), 5.0, requires_grad=True)
    t.mul_(v)
    t.sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), np.ones(3, dtype=np.float32))
    # a saved tensor changed in place: backward refuses, as before
    x = tg.ones(3, requires_grad=True)
    y = x * 1.0
    z = y * y
    y.detach().mul_(3.0)  # (a detached view shares the version counter)
    with pytest.raises(RuntimeError, match="modified in place"):
        z.sum().backward()


def test_an_expanded_view_is_refused_with_the_same_message():
    t = tg.ones(1, 3).expand(2, 3)
    with pytest.raises(RuntimeError, match="expand\\(\\)ed view"):
        t.add_(1.0)
    with pytest.raises(RuntimeError, match="expand\\(\\)ed view"):
        t.mul_(tg.ones(2, 3))

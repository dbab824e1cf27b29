"""Exercise 16.3: checkpointing's recomputing Function, built by the learner.

``Recompute.apply(run, x)`` must return ``run(x)`` while keeping only ``x`` for
backward, and in backward run ``run`` again with recording on and backpropagate
through that fresh graph. The checker compares values and gradients (of ``x`` and of
the parameters inside ``run``) with plain autograd on float64, counts the calls of
``run``, and measures on ``cuda`` what the graph holds after the forward pass: the
output alone, where plain autograd keeps every layer's saved tensor.
"""
from __future__ import annotations

import gc
import warnings
from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad.streams import blocking_launches
from teachgrad.utils import checkpoint as checkpoint_module

from ..core import Feedback, Mismatch, Test, check, expect_close, expect_true, unseen_rng
from ..withheld import withheld


def _is_function_class(candidate: Any) -> bool:
    return isinstance(candidate, type) and issubclass(candidate, tg.autograd.Function)


def _block(rng: np.random.Generator, width: int) -> tg.nn.Module:
    """Linear, Tanh, Linear in float64, with weights from ``rng``."""
    block = tg.nn.Sequential(tg.nn.Linear(width, width), tg.nn.Tanh(),
                             tg.nn.Linear(width, width)).to(tg.float64)
    with tg.no_grad():
        for p in block.parameters():
            p.copy_(tg.tensor(rng.normal(size=tuple(p.shape)) * 0.7))
    return block


class _Counted:
    """``run`` that counts its calls and says whether recording was on for each."""

    def __init__(self, run: Callable) -> None:
        self.run, self.recording = run, []

    def __call__(self, x):
        self.recording.append(tg.is_grad_enabled())
        return self.run(x)


def _gradients(Recompute: type, block, x0: np.ndarray, weights: np.ndarray, through: bool):
    """Values and gradients with ``Recompute`` (or, with None, plain autograd)."""
    leaf = tg.tensor(x0, requires_grad=True)
    x = leaf * 2.0 if through else leaf  # through: x sits in the middle of a graph
    for p in block.parameters():
        p.grad = None
    counted = _Counted(block)
    with _withhold():
        y = block(x) if Recompute is None else Recompute.apply(counted, x)
        (y * tg.tensor(weights)).sum().backward()
    return y, leaf.grad, [p.grad for p in block.parameters()], counted


def _withhold():
    return withheld((checkpoint_module, "checkpoint", "tg.utils.checkpoint.checkpoint"),
                    (checkpoint_module, "checkpoint_sequential",
                     "tg.utils.checkpoint.checkpoint_sequential"))


def _same_as_autograd(Recompute: type, seed: int, shape: tuple, through: bool, label: str) -> Test:
    def run() -> None:
        rng = np.random.default_rng(seed)
        block = _block(rng, shape[1])
        x0, weights = rng.normal(size=shape), rng.normal(size=shape)
        expected, x_grad, p_grads, _ = _gradients(None, block, x0, weights, through)
        y, got_x_grad, got_p_grads, counted = _gradients(Recompute, block, x0, weights, through)
        expect_close(y, expected, what="output", rtol=1e-10, atol=1e-12,
                     hint="forward returns run(x)")
        expect_true(y.grad_fn is not None and y.grad_fn.function is Recompute,
                    "the output was not made by your Function",
                    hint="call it as Recompute.apply(run, x) and return run(x) from forward")
        expect_close(got_x_grad, x_grad, what="gradient of x", rtol=1e-10, atol=1e-12,
                     hint="backward returns (None, grad of x): None for run, which is no tensor; "
                          "x.grad of a fresh copy, x.detach().requires_grad_(), after "
                          "out.backward(grad)")
        for k, (got, want) in enumerate(zip(got_p_grads, p_grads)):
            expect_close(got, want, what=f"gradient of parameter {k} inside run", rtol=1e-10,
                         atol=1e-12, hint="out.backward(grad) inside backward reaches them")
        expect_true(counted.recording == [False, True],
                    f"run was called {len(counted.recording)} times, with recording "
                    f"{counted.recording}; expected twice: forward (not recording) and backward "
                    "(recording)", hint="in backward, run it again inside `with tg.enable_grad():`")
    return Test(label, run)


def _holds_only_the_output_on_cuda(Recompute: type) -> Test:
    def live_after_forward(use: bool) -> int:
        def run(x):
            for _ in range(6):
                x = (x * 1.5).tanh()
            return x
        x = tg.ones(64, 8, device="cuda", requires_grad=True)  # 2048 bytes a tensor
        gc.collect()
        before = tg.cuda.memory_allocated()
        with _withhold():
            y = Recompute.apply(run, x) if use else run(x)
        held = tg.cuda.memory_allocated() - before
        with _withhold():
            y.sum().backward()
        expect_close(x.grad, _tanh_chain_grad(), what="gradient of x on cuda", rtol=1e-4,
                     atol=1e-6)
        return held

    def test() -> None:
        with warnings.catch_warnings(), blocking_launches():
            warnings.simplefilter("ignore")
            plain, yours = live_after_forward(False), live_after_forward(True)
        expect_true(yours <= 2048 < plain,
                    f"after the forward pass the graph holds {yours} bytes on the device with "
                    f"your Function (plain autograd: {plain}); only the 2048-byte output should "
                    "stay", hint="save x alone (ctx.save_for_backward(x)); forward's own "
                                 "operations are not recorded, so nothing else is kept")
    return Test("six tanh layers on a 64 x 8 cuda tensor: bytes held after forward", test)


def _tanh_chain_grad() -> np.ndarray:
    x, slope = np.ones((64, 8)), np.ones((64, 8))
    for _ in range(6):
        x = np.tanh(1.5 * x)
        slope = slope * 1.5 * (1 - x ** 2)
    return slope


def check_recompute(Recompute: type) -> Feedback:
    """Exercise 16.3: a Function that keeps only its input and recomputes in backward."""
    if not _is_function_class(Recompute):
        def refuse() -> None:
            raise Mismatch(f"expected a subclass of tg.autograd.Function, got {Recompute!r}",
                           hint="define `class Recompute(tg.autograd.Function):` and pass the "
                                "class itself", show_values=False)
        return check("16.3", [Test("the class you passed", refuse)], candidate=Recompute,
                     solved="")
    seed = int(unseen_rng().integers(1 << 30))
    tests = [
        _same_as_autograd(Recompute, 0, (4, 3), False, "a leaf x (4 x 3), a Linear-Tanh-Linear "
                                                      "block, float64"),
        _same_as_autograd(Recompute, 1, (2, 5), True, "x = 2 * leaf: x in the middle of a graph"),
        _same_as_autograd(Recompute, seed, (3, 4), True,
                          f"an unseen block and input (seed {seed})"),
        _holds_only_the_output_on_cuda(Recompute),
    ]
    return check("16.3", tests, candidate=Recompute,
                 solved="the Function keeps only its input and recomputes in backward: "
                        "gradients as plain autograd's, the activations gone from the forward")

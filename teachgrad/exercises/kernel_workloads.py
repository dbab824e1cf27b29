"""The GPU chapters' real workload, run on the learner's kernel plugged into the engine.

A build exercise of chapters 6 to 8 ends with the kernel doing the engine's work:
plugged into ``cuda.map``, ``cuda.reduce`` or ``cuda.matmul``, it runs every
matching operation of a few training steps of a small MLP on ``cuda``. The test
compares the losses and the trained weights with the engine's own kernels, and
counts the learner's launches through the part (a kernel that is never launched
proves nothing).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .core import Mismatch, Test
from .kernel_runs import is_stub


def train_small_mlp(steps: int = 2, seed: int = 0) -> tuple[list[float], list[np.ndarray]]:
    """``steps`` SGD steps of a 5-6-2 tanh MLP on ``cuda`` (float64, a batch of 9).

    It runs every kind of kernel: matrix products forward and backward, tanh
    and its gradient, the mean of the loss and the sums of the bias gradients.
    Returns the losses and the weights after training.
    """
    import teachgrad as tg

    rng = np.random.default_rng(seed)
    tg.manual_seed(seed)
    model = tg.nn.Sequential(tg.nn.Linear(5, 6), tg.nn.Tanh(), tg.nn.Linear(6, 2)).double()
    model = model.to("cuda")
    x = tg.tensor(rng.normal(size=(9, 5)), device="cuda")
    y = tg.tensor(rng.normal(size=(9, 2)), device="cuda")
    optimizer = tg.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu().numpy() for p in model.parameters()]


def plugged_training_test(part_name: str, learner_part: Callable, what: str) -> Test:
    """A test: the learner's ``learner_part`` plugged into ``part_name`` trains the MLP as the
    engine's kernels do, and was launched by it."""
    def run() -> None:
        from ..autograd.parts import PartError
        from .plugging import plugged

        if is_stub(learner_part):
            raise NotImplementedError
        expected_losses, expected_weights = train_small_mlp()
        try:
            with plugged(part_name, learner_part) as part:
                losses, weights = train_small_mlp()
        except PartError as error:
            raise Mismatch(f"inside the engine, {error}", show_values=False,
                           hint=f"the engine launches your {what} itself: read the launch it "
                                "names and run that configuration on your own") from None
        if part.calls == 0:
            raise Mismatch(f"training never launched your {what}", show_values=False,
                           hint=f"plug the kernel itself into {part_name!r}")
        if not np.allclose(losses, expected_losses, rtol=1e-9, atol=1e-12) or not all(
                np.allclose(w, e, rtol=1e-9, atol=1e-12)
                for w, e in zip(weights, expected_weights)):
            raise Mismatch("training on your kernel gave other losses than the engine's",
                           np.round(expected_losses, 6), np.round(losses, 6),
                           "your kernel's results feed every later step: check it on the "
                           "launches above")

    return Test(f"2 SGD steps of a 5-6-2 MLP on cuda with your {what} plugged into "
                f"{part_name!r}, against the engine's own kernels", run)

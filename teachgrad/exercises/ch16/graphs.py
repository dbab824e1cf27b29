"""Checker for exercise 16.2: a training loop that captures one step in a CUDA graph and
replays it (warm-up on a side stream, static buffers, ``copy_`` new data in, replay, read
the static loss).

The checker trains a fresh model with the learner's loop on batches drawn afresh, trains a
copy eagerly the same way, and compares losses and weights; through the engine's stream
records it sees where the warm-up ran, that the side stream waited for the default stream
first, that a graph was replayed once per batch, and that no autograd op ran after the
capture (the replays, not eager steps, trained the model).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

import teachgrad as tg
from teachgrad import streams

from ..core import Feedback, Mismatch, Test, check, expect_true, unseen_rng

HIDDEN = 6


def _model(seed: int, features: int, outputs: int) -> tg.nn.Module:
    tg.manual_seed(seed)
    return tg.nn.Sequential(tg.nn.Linear(features, HIDDEN), tg.nn.ReLU(),
                            tg.nn.Linear(HIDDEN, outputs)).to("cuda")


def _penalised_mse(output: tg.Tensor, target: tg.Tensor) -> tg.Tensor:
    """MSE plus a small penalty on the outputs: a loss whose arguments do not commute."""
    return ((output - target) ** 2).mean() + 0.1 * (output ** 2).mean()


def _eager_reference(model, opt, loss_fn, batches, warmup: int) -> list[float]:
    """What the loop must compute: ``warmup`` steps on the first batch, then one per batch."""
    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(warmup):
        step(*batches[0])
    return [step(x, y).item() for x, y in batches]


def _batches(rng: np.random.Generator, count: int, rows: int, features: int, outputs: int):
    return [(tg.tensor(rng.normal(size=(rows, features)).astype(np.float32), device="cuda"),
             tg.tensor(rng.normal(size=(rows, outputs)).astype(np.float32), device="cuda"))
            for _ in range(count)]


def _check_streams(rec: streams.Recording, batches: int) -> None:
    """Warm-up on a side stream that first waited; one replay per batch; no eager step."""
    default = tg.cuda.default_stream().id
    captured = [op for op in rec.ops if op.status == "captured"]
    expect_true(bool(captured), "no CUDA graph was captured",
                hint="capture one training step: `with tg.cuda.graph(g): ...`")
    first_capture = rec.ops.index(captured[0])
    warm = [op for op in rec.ops[:first_capture]  # the warm-up's backward kernels
            if op.kind == "kernel" and op.op is not None and op.op.endswith(".backward")]
    expect_true(bool(warm) and all(op.stream != default for op in warm),
                "the warm-up steps did not run on a side stream",
                hint="run the warm-up inside `with tg.cuda.stream(side):`, side = tg.cuda.Stream()")
    side = warm[0].stream
    first_on_side = next(op for op in rec.ops if op.stream == side)
    expect_true(first_on_side.kind == "wait_event",
                "the side stream started the warm-up without waiting for the default stream",
                hint="side.wait_stream(tg.cuda.current_stream()) before the warm-up: the "
                     "batches were copied on the default stream")
    after = rec.ops[rec.ops.index(captured[-1]) + 1:]
    replays = {op.replay for op in after if op.kind == "graph"}
    expect_true(len(replays) == batches,
                f"the graph was replayed {len(replays)} times for {batches} batches",
                hint="one g.replay() per batch, after copying the batch into the static tensors")
    eager = sorted({op.op for op in after if op.op is not None and op.replay is None})
    expect_true(not eager, f"after the capture, operations ran eagerly: {', '.join(eager)}",
                hint="after capturing, each step is copy_ into the static inputs, g.replay(), "
                     "and reading the static loss: nothing else")


def _compare(got, expected: list[float], model, reference) -> None:
    if not isinstance(got, (list, tuple)) or len(got) != len(expected):
        raise Mismatch("the loop must return one loss per batch, as a list of floats",
                       f"{len(expected)} losses", got)
    if not np.allclose(np.asarray(got, dtype=np.float64), expected, rtol=1e-4, atol=1e-6):
        raise Mismatch("the losses differ from training the same steps eagerly", expected, got,
                       "copy each batch into the static tensors before g.replay(), and read "
                       "the static loss after it")
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        if not np.allclose(mine.detach().cpu().numpy(), theirs.detach().cpu().numpy(),
                           rtol=1e-4, atol=1e-6):
            raise Mismatch("the trained weights differ from eager training with the same "
                           "steps", show_values=False,
                           hint="warm up with `warmup` full steps (zero_grad(set_to_none=True), "
                                "forward, backward, step) on the first batch, then zero_grad "
                                "once more before capturing")


def check_train_with_graph(train_with_graph: Callable) -> Feedback:
    """Exercise 16.2: ``train_with_graph(model, opt, loss_fn, batches, warmup)`` returns the
    loss of every batch, trained by replaying one captured step."""
    rng = unseen_rng()

    def case(description: str, count: int, rows: int, features: int, outputs: int,
             warmup: int, loss_fn, seed: int) -> Test:
        def run() -> None:
            batches = _batches(rng, count, rows, features, outputs)
            reference = _model(seed, features, outputs)
            ref_opt = tg.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
            expected = _eager_reference(reference, ref_opt, loss_fn, batches, warmup)
            model = _model(seed, features, outputs)
            opt = tg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
            with streams.recording() as rec:
                got = train_with_graph(model, opt, loss_fn, batches, warmup)
            _compare(got, expected, model, reference)
            _check_streams(rec, count)
        return Test(description, run)

    tests = [case("3 batches of 4 x 3, MSE loss, 2 warm-up steps", 3, 4, 3, 2, 2,
                  tg.nn.functional.mse_loss, 0),
             case("hidden batches and sizes, MSE plus a penalty on the outputs",
                  int(rng.integers(2, 4)), int(rng.integers(3, 6)), int(rng.integers(2, 5)),
                  int(rng.integers(1, 3)), int(rng.integers(1, 4)), _penalised_mse,
                  int(rng.integers(100)))]
    return check("16.2", tests, candidate=train_with_graph,
                 solved="your loop warms up on a side stream, captures one step and trains "
                        "by replaying it: no Python forward, no autograd after the capture.")

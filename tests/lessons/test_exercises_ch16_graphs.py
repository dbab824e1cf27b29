"""Exercise 16.2's checker: the reference loop passes; loops that do not train by replaying
a graph captured after a warm-up on a side stream are rejected, each with its reason."""
from __future__ import annotations

import teachgrad as tg
from teachgrad.exercises import ch16


def graph_loop(model, opt, loss_fn, batches, warmup, *, side_stream=True, wait=True,
               replay_every_batch=True):
    """The reference loop, with switches that break one step of the recipe each."""
    static_x, static_y = batches[0][0].clone(), batches[0][1].clone()
    warmup_stream = tg.cuda.Stream() if side_stream else tg.cuda.current_stream()
    if wait and side_stream:
        warmup_stream.wait_stream(tg.cuda.current_stream())
    with tg.cuda.stream(warmup_stream):
        for _ in range(warmup):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(static_x), static_y).backward()
            opt.step()
    g = tg.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with tg.cuda.graph(g):
        static_loss = loss_fn(model(static_x), static_y)
        static_loss.backward()
        opt.step()
    losses = []
    for i, (x, y) in enumerate(batches):
        static_x.copy_(x)
        static_y.copy_(y)
        if replay_every_batch or i == 0:
            g.replay()
        losses.append(static_loss.item())
    return losses


def eager_loop(model, opt, loss_fn, batches, warmup):
    """Right numbers, no graph."""
    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(warmup):
        step(*batches[0])
    return [step(x, y) for x, y in batches]


def test_the_reference_loop_passes():
    assert ch16.check_train_with_graph(graph_loop).passed


def test_an_eager_loop_is_rejected():
    feedback = ch16.check_train_with_graph(eager_loop)
    assert not feedback.passed and "no CUDA graph was captured" in feedback.message


def test_a_warm_up_on_the_default_stream_is_rejected():
    feedback = ch16.check_train_with_graph(
        lambda *args: graph_loop(*args, side_stream=False))
    assert not feedback.passed and "side stream" in feedback.message


def test_a_side_stream_that_does_not_wait_is_rejected():
    feedback = ch16.check_train_with_graph(lambda *args: graph_loop(*args, wait=False))
    assert not feedback.passed and "without waiting" in feedback.message


def test_a_loop_that_skips_replays_is_rejected():
    feedback = ch16.check_train_with_graph(
        lambda *args: graph_loop(*args, replay_every_batch=False))
    assert not feedback.passed and "differ" in feedback.message

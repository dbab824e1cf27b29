"""Checkers for chapter 2, *Tensors and devices*: broadcasting and work that stays on the device."""
from __future__ import annotations

from typing import Callable

import numpy as np

import teachgrad as tg

from .core import (Feedback, Mismatch, Test, check, expect_close, expect_true, unseen_rng,
                   watching_ops)


def check_broadcast_shape(broadcast_shape: Callable) -> Feedback:
    """Exercise 2.1: ``broadcast_shape(a, b)`` -> the broadcast shape, or ``ValueError``."""
    pairs = [((3, 1), (1, 4)), ((2, 3), (3,)), ((5, 1, 4), (3, 1)), ((), (2, 2)),
             ((1,), (8, 4, 3)), ((3,), (4,)), ((2, 1), (4, 3)), ((0, 1), (1, 5))]
    pairs += [_random_pair(unseen_rng()) for _ in range(4)]

    def make(a: tuple, b: tuple) -> Test:
        def run() -> None:
            try:
                expected = tuple(np.broadcast_shapes(a, b))
            except ValueError:
                expected = None
            if expected is None:
                try:
                    got = broadcast_shape(a, b)
                except ValueError:
                    return
                raise Mismatch("these shapes cannot broadcast, so a ValueError was expected",
                               "ValueError", got,
                               "two sizes are compatible only if they are equal or one is 1")
            got = broadcast_shape(a, b)
            got_tuple = tuple(got) if isinstance(got, (tuple, list, tg.Size)) else got
            if got_tuple == expected:
                return
            if got_tuple == _left_aligned(a, b):
                hint = "line the shapes up from the right: trailing dimensions are compared first"
            else:
                hint = ("pad the shorter shape with 1s on the left, then take the larger size "
                        "where one of them is 1")
            raise Mismatch("wrong broadcast shape", expected, got, hint)
        return Test(f"shapes {a} and {b}", run,
                    hint="a ValueError is right only when the shapes cannot broadcast")

    return check("2.1", [make(a, b) for a, b in pairs], candidate=broadcast_shape,
                 solved="you broadcast shapes exactly as numpy, PyTorch and teachgrad do.")


def _random_pair(rng: np.random.Generator) -> tuple[tuple, tuple]:
    """Two shapes the learner has not seen: broadcastable, or (one time in three) not."""
    full = tuple(int(v) for v in rng.integers(2, 6, size=int(rng.integers(1, 5))))
    a = tuple(1 if rng.random() < 0.4 else d for d in full)
    b = tuple(1 if rng.random() < 0.4 else d for d in full)[int(rng.integers(0, len(full))):]
    if rng.random() < 0.35 and b:
        b = b[:-1] + (b[-1] + 1 if b[-1] > 1 else 7,)  # a clash in the last dimension
    return a, b


def _left_aligned(a: tuple, b: tuple) -> tuple:
    """What a learner gets by padding on the right instead of the left (a common slip)."""
    n = max(len(a), len(b))
    a2, b2 = a + (1,) * (n - len(a)), b + (1,) * (n - len(b))
    return tuple(max(x, y) for x, y in zip(a2, b2))


def check_pairwise_sq_distances(pairwise_sq_distances: Callable) -> Feedback:
    """Exercise 2.2: squared distances between the rows of A (n, d) and B (m, d)."""
    rng = np.random.default_rng(2)
    shapes = [(3, 4, 2), (1, 1, 1), (2, 5, 3)]
    unseen = unseen_rng()

    def make(n: int, m: int, d: int, device: str, rng: np.random.Generator = rng,
             label: str = "") -> Test:
        A = rng.normal(size=(n, d)).astype(np.float32)
        B = rng.normal(size=(m, d)).astype(np.float32)
        expected = ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=-1)

        def run() -> None:
            a = tg.tensor(A, device=device, requires_grad=True)
            b = tg.tensor(B, device=device, requires_grad=True)
            tg.cuda.reset_transfer_stats()
            with watching_ops() as ops:
                got = pairwise_sq_distances(a, b)
            copies = tg.cuda.transfer_stats()["device_to_host"]
            expect_true(isinstance(got, tg.Tensor),
                        f"your function returned a {type(got).__name__}, not a teachgrad tensor",
                        hint="use tensor operations only (no .numpy() or Python loops)")
            expect_true(got.device.type == device,
                        f"inputs on {device} gave a result on {got.device}",
                        hint="don't move data yourself: operations run where their inputs live")
            expect_true(copies == 0 and got.grad_fn is not None,
                        "the result was not computed by tensor operations on A and B "
                        f"({'it left the device' if copies else 'it has no link to A and B'})",
                        hint="no .numpy() or .tolist(): compute with tensor operations only, so "
                             "the result stays connected to A and B (it has a grad_fn)")
            expect_close(got, expected, what="distance matrix",
                         hint="add axes with A[:, None, :] and B[None, :, :], subtract, "
                              "square, then sum over the last dimension")
            expect_true(len(ops) <= 12,
                        f"your code ran {len(ops)} tensor operations for {n} x {m} distances",
                        hint="no Python loops over rows: one broadcasted expression, "
                             "((A[:, None, :] - B[None, :, :]) ** 2).sum(dim=-1), does them all")
        return Test(f"{label}A of shape ({n}, {d}) and B of shape ({m}, {d}) on {device}", run,
                    hint="use tensor operations only: .numpy() and .tolist() leave autograd "
                         "(and the device)")

    tests = [make(*s, "cpu") for s in shapes] + [make(2, 3, 2, "cuda")]
    tests += [make(*(int(v) for v in unseen.integers(2, 7, size=3)), "cpu", unseen,
                   "unseen random values: ")]
    return check("2.2", tests, candidate=pairwise_sq_distances,
                 solved="one broadcasted expression computes all n x m distances, on any device.")


def check_min_max_scale_on_device(min_max_scale_on_device: Callable) -> Feedback:
    """Exercise 2.3: scale to [0, 1] on cuda with one copy in and no copy back."""
    rng = np.random.default_rng(3)
    inputs = [rng.normal(size=(2, 3)).astype(np.float32) * 5,
              np.array([4.0, -1.0, 9.0], dtype=np.float32),
              unseen_rng().normal(size=(3, 2)).astype(np.float32) * 7]

    def make(values: np.ndarray) -> Test:
        def run() -> None:
            x = tg.tensor(values)
            tg.cuda.reset_transfer_stats()
            with watching_ops() as ops:
                got = min_max_scale_on_device(x)
            stats = tg.cuda.transfer_stats()
            expect_true(isinstance(got, tg.Tensor) and got.device.type == "cuda",
                        "the result should be a tensor on cuda",
                        hint="move x with x.to('cuda') and compute there")
            expect_true(stats["device_to_host"] == 0,
                        f"your code copied data back to the host {stats['device_to_host']} "
                        "time(s) before returning",
                        hint=".item(), .cpu(), .tolist() and printing a cuda tensor all copy to "
                             "the host; keep min and max as tensors on the device")
            expect_true(stats["host_to_device"] == 1,
                        f"your code made {stats['host_to_device']} host-to-device copies, not 1",
                        hint="copy x to the device once and reuse that copy")
            _expect_work_on_device(ops)
            expected = (values - values.min()) / (values.max() - values.min())
            expect_close(got, expected, what="scaled values",
                         hint="(x - min) / (max - min), with min and max of the whole tensor")
        description = (f"x = {values.tolist()}" if values.ndim == 1
                       else f"a random x of shape {values.shape}")
        return Test(description, run)

    return check("2.3", [make(v) for v in inputs], candidate=min_max_scale_on_device,
                 solved="the work ran on the device with exactly one copy in and none back.")


def _expect_work_on_device(ops: list) -> None:
    """The arithmetic ran as teachgrad operations on cuda, not on the host and copied in."""
    work = [op for op in ops if op.function.__name__ != "ToDevice"]
    on_host = [op for op in work if any(o.device.type != "cuda" for o in op.outputs
                                        if isinstance(o, tg.Tensor))]
    expect_true(not on_host,
                f"part of the work ran on the host: {on_host[0].function.__name__} "
                "gave a cpu tensor" if on_host else "",
                hint="copy x to the device first, then compute min, max and the scaling there")
    expect_true(len(work) >= 3,
                f"only {len(work)} operation(s) ran on the device: the scaling was computed "
                "somewhere else (numpy, or a cpu tensor) and only the result was copied in",
                hint="x_gpu = x.to('cuda'), then (x_gpu - x_gpu.min()) / (x_gpu.max() - "
                     "x_gpu.min()): every step runs as a kernel on the device")

"""Checkers for chapter 10, *Asynchronous execution*: events, the queue's depth, an overlapped loop."""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad import streams
from teachgrad.streams import OpRecord

from .core import Feedback, Mismatch, Test, check, expect_close, expect_equal, expect_true


# -- 10.1: time the device with events ----------------------------------------------------

def check_device_time_ms(device_time_ms: Callable[[Callable[[], Any]], float]) -> Feedback:
    """Exercise 10.1: ``device_time_ms(fn)``: the device's time for fn's kernels, with events."""

    def on(held: float, kernel: float) -> Test:
        def run() -> None:
            tg.cuda.synchronize()
            streams.busy(held)  # the stream is busy before fn even starts
            with streams.recording() as rec:
                got = device_time_ms(lambda: streams.busy(kernel))
            expect_true(isinstance(got, (int, float)) and not isinstance(got, bool),
                        f"device_time_ms returned {type(got).__name__}, not a number of ms",
                        hint="return start.elapsed_time(end), a float")
            expected = kernel * 1e3
            events = [op for op in rec.ops if op.kind == "event"]
            if len(events) < 2:
                raise Mismatch("your function recorded no pair of events on the stream: "
                               "a host clock measures when the host is told, not the device",
                               hint="start = tg.cuda.Event(enable_timing=True); start.record(); "
                                    "fn(); end.record(); end.synchronize()", show_values=False)
            held_ms = held * 1e3
            if got < 0.5 * expected:
                # which mistake: the stream's own order says whether the end marker sits
                # behind fn's kernel (then the number was scaled) or in front of it
                last = [op.kind for op in rec.ops if op.kind in ("event", "kernel")][::-1]
                end_first = "kernel" in last and last.index("event") > last.index("kernel")
                hint = ("record the end event after fn(): the marker must sit behind fn's kernels "
                        "on the stream")
                if not end_first and 0.5 * expected <= got * 1e3 <= expected + held_ms:
                    hint = "elapsed_time is already in milliseconds: do not divide by 1000"
                raise Mismatch(f"{got:.3g} ms is far shorter than the kernel's {expected:.0f} ms",
                               f"about {expected:.0f}", got, hint)
            # a busy machine delays the device a little; a host clock adds the whole queue
            if got > expected + 0.6 * held_ms:
                raise Mismatch(f"{got:.0f} ms includes the {held_ms:.0f} ms the stream was "
                               "already busy before fn", f"about {expected:.0f}", got,
                               hint="events measure between two markers on the device; a host "
                                    "clock started before fn also counts the queue ahead of it")
        return Test(f"a {kernel * 1e3:.0f} ms kernel, behind {held * 1e3:.0f} ms of queued work",
                    run, "make both events with enable_timing=True, and synchronize the end event")

    rng = np.random.default_rng()
    tests = [on(0.4, 0.1), on(float(rng.uniform(0.4, 0.6)), float(rng.uniform(0.08, 0.15)))]
    return check("10.1", tests, candidate=device_time_ms,
                 solved="events time the device between two markers, whatever the host was doing.")


# -- 10.2: how far the host runs ahead ----------------------------------------------------------

def reference_max_in_flight(ops: list[OpRecord], begin: str = "enqueued") -> int:
    """The most ops enqueued and not finished at one moment (finished at t frees its slot at t).

    ``begin="started"`` counts the ops *running* instead: the usual mistake.
    """
    events = []
    for op in ops:
        events.append((getattr(op, begin) if getattr(op, begin) is not None else np.inf, 1))
        events.append((op.finished if op.finished is not None else np.inf, -1))
    depth = best = 0
    for _, change in sorted(events):  # at equal times -1 sorts first: finish before enqueue
        depth += change
        best = max(best, depth)
    return best


def _op(enqueued: float, started: float, finished: float | None) -> OpRecord:
    return OpRecord("kernel", "k", None, "-", 0, enqueued, started, finished,
                    "done" if finished is not None else "running")


def _synthetic(rng: np.random.Generator, n: int) -> list[OpRecord]:
    """One stream's ops on a whole-number clock: enqueued in order, run one after another."""
    enqueued = np.cumsum(rng.integers(0, 3, size=n)).astype(float)
    ops, device_free = [], 0.0
    for t in enqueued:
        start = max(t, device_free)
        device_free = start + float(rng.integers(1, 4))
        ops.append(_op(float(t), start, device_free))
    return ops


def check_max_in_flight(max_in_flight: Callable[[list[OpRecord]], int]) -> Feedback:
    """Exercise 10.2: ``max_in_flight(ops)``: how many ops were queued or running at the peak."""

    def on(description: str, ops: list[OpRecord], hint: str = "") -> Test:
        def run() -> None:
            expected = reference_max_in_flight(ops)
            got = max_in_flight(list(ops))
            running = reference_max_in_flight(ops, begin="started")
            if got == running != expected:
                hint_here = ("in flight begins at enqueued (the host's clock), not at started: "
                             "an op waiting in the queue counts too")
            else:
                hint_here = hint or ("+1 when an op is enqueued, -1 when it finishes; "
                                     "keep the largest count")
            expect_equal(got, expected, what="number of ops in flight", hint=hint_here)
        return Test(description, run)

    queue = [_op(0, 0, 3), _op(1, 3, 6), _op(2, 6, 9)]
    handover = [_op(0, 0, 2), _op(2, 2, 4), _op(4, 4, 6)]
    unfinished = [_op(0, 0, 5), _op(1, 5, None), _op(6, 6, 7)]
    rng = np.random.default_rng()
    tests = [
        on("3 ops enqueued at t=0,1,2, each running 3 units after the last", queue),
        on("each op enqueued exactly when the one before finishes", handover,
           "an op that finishes at t no longer counts at t: the next one takes its place"),
        on("an op that has not finished (finished is None) is still in flight", unfinished,
           "finished is None means it is still queued or running: it counts until the end"),
        on("ops that started long after they were enqueued", [_op(0, 4, 5), _op(0, 5, 6)],
           "in flight begins at enqueued (the host's clock), not at started"),
    ]
    tests += [on(f"random ops on one stream (seed {seed})", _synthetic(np.random.default_rng(seed), 12))
              for seed in rng.integers(0, 10_000, size=3)]
    tests.append(on("a real recording: 12 small cuda ops", _recorded_burst()))
    return check("10.2", tests, candidate=max_in_flight,
                 solved="you can read from the timeline how far the host ran ahead of the device.")


def _recorded_burst() -> list[OpRecord]:
    x = tg.ones(16, device="cuda")
    with streams.recording() as rec:
        for _ in range(12):
            x = x * 1.0001
    return rec.ops


# -- 10.3: a loop that overlaps -------------------------------------------------------------

def check_train_overlapped(train_overlapped: Callable[..., list]) -> Feedback:
    """Exercise 10.3: ``train_overlapped(step, prepare, steps)`` returns the step losses."""

    def on(steps: int, device_s: float) -> Test:
        def run() -> None:
            calls: list[tuple[str, int, float]] = []  # ("prepare"/"step", index, host time)
            w = tg.tensor([0.5, -1.0, 2.0], device="cuda")

            def prepare(i: int) -> np.ndarray:
                calls.append(("prepare", i, time.perf_counter()))
                return np.array([i, i + 1.0, 2.0 * i], dtype=np.float32)

            def step(batch: np.ndarray) -> tg.Tensor:
                calls.append(("step", len([c for c in calls if c[0] == "step"]), time.perf_counter()))
                streams.busy(device_s)  # the device's share of a training step
                return (tg.tensor(batch, device="cuda") * w).sum()

            tg.cuda.synchronize()
            with streams.recording(wait_at_end=False) as rec:
                losses = train_overlapped(step, prepare, steps)
            tg.cuda.synchronize()
            expect_true(isinstance(losses, list) and len(losses) == steps,
                        f"expected a list of {steps} losses, got {type(losses).__name__}"
                        + (f" of {len(losses)}" if isinstance(losses, list) else ""),
                        hint="append each step's loss tensor to a list and return it")
            prepared = [i for kind, i, _ in calls if kind == "prepare"]
            expect_equal(prepared, list(range(steps)), what="batches prepared (in order)",
                         hint="prepare(0) before the loop, then prepare(i + 1) while step i runs, "
                              "and no batch that no step uses")
            if rec.waits:
                w0 = rec.waits[0]
                raise Mismatch(f"the host waited {len(rec.waits)} time(s) inside your loop, first "
                               f"in {w0.reason} at {w0.site}: each wait drains the queue and stops "
                               "the overlap", show_values=False,
                               hint="return the loss tensors; read them (.item()) after the loop")
            order = [(kind, i) for kind, i, _ in calls]
            for i in range(steps - 1):
                expect_true(order.index(("prepare", i + 1)) > order.index(("step", i)),
                            f"batch {i + 1} was prepared before step {i} was launched, so it "
                            "did not overlap with the device's work on step {i}".replace("{i}", str(i)),
                            hint="launch step i first (it returns at once), then prepare batch i + 1")
            expected = [float(np.dot([i, i + 1.0, 2.0 * i], [0.5, -1.0, 2.0])) for i in range(steps)]
            expect_close([float(loss.item()) for loss in losses], expected, what="losses",
                         hint="step i must get batch i")
        return Test(f"{steps} steps of {device_s * 1e3:.0f} ms on the device", run)

    rng = np.random.default_rng()
    tests = [on(3, 0.03), on(int(rng.integers(4, 7)), float(rng.uniform(0.01, 0.03)))]
    return check("10.3", tests, candidate=train_overlapped,
                 solved="the host prepares each batch while the device runs the step before, "
                        "and waits only after the loop.")

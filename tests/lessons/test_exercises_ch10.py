"""Chapter 10's checkers: the reference solutions pass, stubs are "not solved yet", and the
mistakes learners make with asynchronous execution are rejected with specific feedback."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import time

import numpy as np
import pytest

from teachgrad.exercises import NOT_SOLVED_YET, SOLVED, WRONG, ERROR, ch10
from teachgrad.exercises.edition import learner_stub
from teachgrad.streams import OpRecord
from notebook_solutions import NOTEBOOKS, solution_source
from test_exercises_ch06_09 import make_learner

NOTEBOOK = "10_asynchronous_execution"
EXERCISES = [("device_time_ms", ch10.check_device_time_ms),
             ("max_in_flight", ch10.check_max_in_flight),
             ("train_overlapped", ch10.check_train_overlapped)]


def define(source: str, name: str):
    namespace = {"tg": tg, "np": np, "time": time}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace[name]


@pytest.mark.parametrize("name, checker", EXERCISES, ids=[e[0] for e in EXERCISES])
def test_reference_solution_is_solved(name, checker):
    feedback = checker(define(solution_source(NOTEBOOK, name), name))
    assert feedback.status == SOLVED, feedback.message


@pytest.mark.parametrize("name, checker", EXERCISES, ids=[e[0] for e in EXERCISES])
def test_learner_stub_is_not_solved_yet(name, checker):
    feedback = checker(define(learner_stub(solution_source(NOTEBOOK, name)), name))
    assert feedback.status == NOT_SOLVED_YET, feedback.message


@pytest.mark.slow
def test_learner_edition_runs_to_the_end_and_every_check_is_not_solved_yet(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    [written] = make_learner().make_learner_edition([NOTEBOOKS / f"{NOTEBOOK}.ipynb"], tmp_path)
    learner = nbformat.read(written, as_version=4)
    NotebookClient(learner, kernel_name="python3", timeout=600,
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    checks = [cell for cell in learner.cells if cell.cell_type == "code" and ".check_" in cell.source]
    assert len(checks) == len(EXERCISES)
    for cell in checks:
        printed = "".join(output.get("text", "") for output in cell.outputs)
        assert "not solved yet" in printed, f"{cell.source!r} printed {printed!r}"


# -- 10.1 device_time_ms ----------------------------------------------------------------------

def host_clock_no_sync(fn):  # times the enqueue only
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def host_clock_with_sync(fn):  # counts the work queued ahead too, and skips the events
    start = time.perf_counter()
    fn()
    tg.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3


def end_recorded_too_early(fn):
    start, end = tg.cuda.Event(enable_timing=True), tg.cuda.Event(enable_timing=True)
    start.record()
    end.record()
    fn()
    end.synchronize()
    return start.elapsed_time(end)


def in_seconds(fn):
    start, end = tg.cuda.Event(enable_timing=True), tg.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def no_synchronize(fn):
    start, end = tg.cuda.Event(enable_timing=True), tg.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    return start.elapsed_time(end)


def events_plus_host_clock(fn):  # events recorded, but the host clock is returned
    start, end = tg.cuda.Event(enable_timing=True), tg.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return (time.perf_counter() - t0) * 1e3


@pytest.mark.parametrize("wrong, feedback", [
    (host_clock_no_sync, "recorded no pair of events"),
    (host_clock_with_sync, "recorded no pair of events"),
    (end_recorded_too_early, "record the end event after fn()"),
    (in_seconds, "elapsed_time is already in milliseconds"),
    (events_plus_host_clock, "the stream was already busy before fn"),
])
def test_device_time_rejects(wrong, feedback):
    result = ch10.check_device_time_ms(wrong)
    assert result.status == WRONG and feedback in result.message, result.message


def test_device_time_without_synchronize_is_an_error_with_the_hint():
    result = ch10.check_device_time_ms(no_synchronize)
    assert result.status == ERROR
    assert "elapsed_time: an event has not happened yet" in result.message
    assert "synchronize the end event" in result.message


# -- 10.2 max_in_flight --------------------------------------------------------------------------

def by_started(ops):  # counts running ops, not queued ones: always 1 on one stream
    changes = sorted([(op.started, 1) for op in ops] + [(op.finished, -1) for op in ops],
                     key=lambda c: (c[0], c[1]))
    depth = most = 0
    for _, c in changes:
        depth += c
        most = max(most, depth)
    return most


def enqueue_first_at_ties(ops):  # an op that finishes at t still counted at t
    changes = sorted([(op.enqueued, 1) for op in ops] + [(op.finished, -1) for op in ops],
                     key=lambda c: (c[0], -c[1]))
    depth = most = 0
    for _, c in changes:
        depth += c
        most = max(most, depth)
    return most


def ignores_unfinished(ops):
    done = [op for op in ops if op.finished is not None]
    changes = sorted([(op.enqueued, 1) for op in done] + [(op.finished, -1) for op in done])
    depth = most = 0
    for _, c in changes:
        depth += c
        most = max(most, depth)
    return most


def hard_coded(ops):
    return 3


@pytest.mark.parametrize("wrong, feedback", [
    (by_started, "in flight begins at enqueued"),
    (enqueue_first_at_ties, "an op that finishes at t no longer counts at t"),
    (ignores_unfinished, "finished is None means it is still queued or running"),
    (hard_coded, "wrong number of ops in flight"),
    (len, "wrong number of ops in flight"),
])
def test_max_in_flight_rejects(wrong, feedback):
    result = ch10.check_max_in_flight(wrong)
    assert result.status == WRONG and feedback in result.message, result.message


def test_the_reference_counts_the_queue_of_a_known_example():
    ops = [OpRecord("kernel", "k", None, "-", 0, 0.0, 0.0, 3.0),
           OpRecord("kernel", "k", None, "-", 0, 1.0, 3.0, 6.0),
           OpRecord("kernel", "k", None, "-", 0, 6.0, 6.0, 7.0)]
    assert ch10.reference_max_in_flight(ops) == 2


# -- 10.3 train_overlapped --------------------------------------------------------------------

def item_in_the_loop(step, prepare, steps):
    losses, batch = [], prepare(0)
    for i in range(steps):
        loss = step(batch)
        loss.item()
        losses.append(loss)
        if i + 1 < steps:
            batch = prepare(i + 1)
    return losses


def prepare_everything_first(step, prepare, steps):
    batches = [prepare(i) for i in range(steps)]
    return [step(b) for b in batches]


def one_batch_too_many(step, prepare, steps):
    losses, batch = [], prepare(0)
    for i in range(steps):
        losses.append(step(batch))
        batch = prepare(i + 1)
    return losses


def synchronize_each_step(step, prepare, steps):
    losses, batch = [], prepare(0)
    for i in range(steps):
        losses.append(step(batch))
        tg.cuda.synchronize()
        if i + 1 < steps:
            batch = prepare(i + 1)
    return losses


def wrong_batch_order(step, prepare, steps):
    batches, losses = [prepare(0)], []
    for i in range(steps):
        losses.append(step(batches[-1] if i == 0 else batches[i - 1]))
        if i + 1 < steps:
            batches.append(prepare(i + 1))
    return losses


def floats_not_tensors(step, prepare, steps):
    return [float(loss.item()) for loss in prepare_everything_first(step, prepare, steps)]


@pytest.mark.parametrize("wrong, feedback", [
    (item_in_the_loop, "the host waited"),
    (synchronize_each_step, "first in synchronize"),
    (prepare_everything_first, "batch 1 was prepared before step 0 was launched"),
    (one_batch_too_many, "wrong batches prepared (in order)"),
    (wrong_batch_order, "wrong losses"),
    (floats_not_tensors, "the host waited"),
])
def test_train_overlapped_rejects(wrong, feedback):
    result = ch10.check_train_overlapped(wrong)
    assert result.status == WRONG and feedback in result.message, result.message

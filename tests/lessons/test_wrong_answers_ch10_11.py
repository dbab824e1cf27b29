"""Chapters 10 and 11: realistic wrong answers the checkers must reject (a deleted statement,
an off-by-one, the wrong wait, the wrong comparison), with feedback naming the mistake, and
right answers written another way that they must accept."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import collections
import time
import warnings

import numpy as np
import pytest

from teachgrad.exercises import SOLVED, ch10, ch11
from teachgrad.jit.ir import refs_in


def rejected(feedback, *words: str) -> None:
    assert feedback.status != SOLVED, "a wrong answer was accepted"
    for word in words:
        assert word in feedback.message, feedback.message


def accepted(feedback) -> None:
    assert feedback.status == SOLVED, feedback.message


def peak(changes: list[tuple[float, int]]) -> int:
    depth = most = 0
    for _, change in changes:
        depth += change
        most = max(most, depth)
    return most


# -- 10.1 max_in_flight ---------------------------------------------------------------------

def counts_earlier_in_the_list(ops):  # right only when the ops come sorted by enqueue time
    return max((sum(1 for o in ops[:i + 1] if o.finished is None or o.finished > op.enqueued)
                for i, op in enumerate(ops)), default=0)


def sweep_without_default(ops):  # max() of nothing: fails on an empty recording
    ends = [op.finished if op.finished is not None else float("inf") for op in ops]
    return max(sum(1 for o, end in zip(ops, ends) if o.enqueued <= op.enqueued < end) for op in ops)


def finish_still_counts(ops):  # `<=` where `<` belongs: an op finishing at t still counted at t
    return max((sum(1 for o in ops if o.enqueued <= op.enqueued
                    and (o.finished is None or o.finished >= op.enqueued)) for op in ops), default=0)


def off_by_one(ops):
    changes = sorted([(op.enqueued, 1) for op in ops]
                     + [(op.finished if op.finished is not None else float("inf"), -1) for op in ops])
    return peak(changes) + 1 if ops else 0


@pytest.mark.parametrize("wrong, feedback", [
    (counts_earlier_in_the_list, "ops may come in any order"),
    (sweep_without_default, "an empty recording"),
    (finish_still_counts, "an op that finishes at t no longer counts at t"),
    (off_by_one, "wrong number of ops in flight"),
])
def test_max_in_flight_rejects(wrong, feedback):
    rejected(ch10.check_max_in_flight(wrong), feedback)


def count_at_each_enqueue(ops):  # the peak is always reached at some op's enqueue time
    return max((sum(1 for o in ops if o.enqueued <= op.enqueued
                    and (o.finished is None or o.finished > op.enqueued)) for op in ops), default=0)


def sorted_with_a_key(ops):
    changes = [(op.enqueued, +1) for op in ops]
    changes += [(op.finished, -1) for op in ops if op.finished is not None]
    return peak(sorted(changes, key=lambda c: (c[0], c[1])))


@pytest.mark.parametrize("right", [count_at_each_enqueue, sorted_with_a_key])
def test_max_in_flight_accepts(right):
    accepted(ch10.check_max_in_flight(right))


# -- 10.2 device_time_ms --------------------------------------------------------------------

def timing_events():
    return tg.cuda.Event(enable_timing=True), tg.cuda.Event(enable_timing=True)


def on_the_default_stream(fn):  # fn's work goes to the current stream, which may be another
    start, end = timing_events()
    start.record(tg.cuda.default_stream())
    fn()
    end.record(tg.cuda.default_stream())
    end.synchronize()
    return start.elapsed_time(end)


def end_to_start(fn):
    start, end = timing_events()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return end.elapsed_time(start)


def start_synchronized(fn):  # waits for the wrong event: the end may not have happened yet
    start, end = timing_events()
    start.record()
    fn()
    end.record()
    start.synchronize()
    return start.elapsed_time(end)


def host_clock_after_a_sync(fn):  # right on a quiet queue, but it times the host, not the device
    tg.cuda.synchronize()
    began = time.perf_counter()
    fn()
    tg.cuda.synchronize()
    return (time.perf_counter() - began) * 1e3


SHARED_START, SHARED_END = timing_events()  # the chapter's own pair, from the cell above 10.2


def shared_events(fn):  # right once, but a call inside fn moves the shared start marker
    SHARED_START.record()
    fn()
    SHARED_END.record()
    SHARED_END.synchronize()
    return SHARED_START.elapsed_time(SHARED_END)


@pytest.mark.parametrize("wrong, feedback", [
    (on_the_default_stream, "the events went to another stream"),
    (end_to_start, "start.elapsed_time(end)"),
    (start_synchronized, "synchronize the end event"),
    (host_clock_after_a_sync, "recorded no pair of events"),
    (shared_events, "re-recorded your start marker"),
])
def test_device_time_rejects(wrong, feedback):
    rejected(ch10.check_device_time_ms(wrong), feedback)


def wait_for_everything(fn):
    start, end = timing_events()
    start.record()
    fn()
    end.record()
    tg.cuda.synchronize()
    return start.elapsed_time(end)


def poll_the_end(fn):
    start, end = timing_events()
    start.record()
    fn()
    end.record()
    while not end.query():
        time.sleep(0.001)
    return start.elapsed_time(end)


def on_the_current_stream_by_name(fn):
    stream = tg.cuda.current_stream()
    start, end = timing_events()
    stream.record_event(start)
    fn()
    stream.record_event(end)
    stream.synchronize()
    return start.elapsed_time(end)


@pytest.mark.parametrize("right", [wait_for_everything, poll_the_end, on_the_current_stream_by_name])
def test_device_time_accepts(right):
    accepted(ch10.check_device_time_ms(right))


# -- 10.3 train_bounded ------------------------------------------------------------------------

def bounded(wait):
    """A train_bounded whose wait before step i is ``wait(i, max_ahead, events, losses)``."""
    def train_bounded(step, batches, max_ahead):
        losses, events = [], []
        for i, batch in enumerate(batches):
            wait(i, max_ahead, events, losses)
            losses.append(step(batch))
            events.append(tg.cuda.Event().record())
        return losses
    return train_bounded


def never_waits(i, max_ahead, events, losses):
    pass


def synchronizes_everything(i, max_ahead, events, losses):
    if i >= max_ahead:
        tg.cuda.synchronize()


def synchronizes_the_stream(i, max_ahead, events, losses):
    if i >= max_ahead:
        tg.cuda.current_stream().synchronize()


def reads_an_old_loss(i, max_ahead, events, losses):  # .item() waits for the whole stream
    if i >= max_ahead:
        losses[i - max_ahead].item()


def one_step_too_early(i, max_ahead, events, losses):
    if i >= max_ahead:
        events[i - max_ahead + 1].synchronize()


def one_step_too_late(i, max_ahead, events, losses):
    if i > max_ahead:
        events[i - max_ahead - 1].synchronize()


def device_side_wait(i, max_ahead, events, losses):
    if i >= max_ahead:
        tg.cuda.current_stream().wait_event(events[i - max_ahead])


def negative_index(i, max_ahead, events, losses):  # events[-1] is the newest, not "none yet"
    if i > 0:
        events[max(i - max_ahead, -1)].synchronize()


def polls_the_previous_step(i, max_ahead, events, losses):
    if i > 0:
        while not events[i - 1].query():
            time.sleep(0.001)


def returns_numbers(step, batches, max_ahead):
    losses = bounded(lambda i, m, events, _: events[i - m].synchronize() if i >= m else None)(
        step, batches, max_ahead)
    return [loss.tolist() for loss in losses]


def drops_the_first_batch(step, batches, max_ahead):
    return bounded(never_waits)(step, batches[1:], max_ahead)


def same_batch_every_step(step, batches, max_ahead):
    losses, events = [], []
    for i in range(len(batches)):
        if i >= max_ahead:
            events[i - max_ahead].synchronize()
        losses.append(step(batches[0]))
        events.append(tg.cuda.Event().record())
    return losses


@pytest.mark.parametrize("wrong, feedback", [
    (bounded(never_waits), "more than max_ahead"),
    (bounded(synchronizes_everything), ("synchronize (at", "waits for the whole queue")),
    (bounded(synchronizes_the_stream), ("Stream.synchronize (at", "waits for the whole queue")),
    (bounded(reads_an_old_loss), ("Tensor.item (at", "waits for the whole queue")),
    (bounded(one_step_too_early), "off by one?"),
    (bounded(one_step_too_late), "more than max_ahead"),
    (bounded(device_side_wait), "makes the device wait, not the host"),
    (bounded(negative_index), "off by one?"),
    (bounded(polls_the_previous_step), "the host waited for step"),
    (returns_numbers, "the list holds numbers"),
    (drops_the_first_batch, "expected a list of"),
    (same_batch_every_step, "step i must get batches[i]"),
])
def test_train_bounded_rejects(wrong, feedback):
    rejected(ch10.check_train_bounded(wrong), *([feedback] if isinstance(feedback, str) else feedback))


def polls_the_event(i, max_ahead, events, losses):
    if i >= max_ahead:
        while not events[i - max_ahead].query():
            time.sleep(0.0005)


def with_a_deque(step, batches, max_ahead):
    losses, in_flight = [], collections.deque()
    for batch in batches:
        if len(in_flight) == max_ahead:
            in_flight.popleft().synchronize()
        losses.append(step(batch))
        in_flight.append(tg.cuda.current_stream().record_event())
    tg.cuda.synchronize()  # one wait after the loop is fine
    return losses


@pytest.mark.parametrize("right", [bounded(polls_the_event), with_a_deque])
def test_train_bounded_accepts(right):
    accepted(ch10.check_train_bounded(right))


# -- 11.1 traceable_choice ------------------------------------------------------------------

@pytest.mark.parametrize("wrong, feedback", [
    (lambda x: tg.where(x.sum() >= 0, x.tanh(), x * 0.5), "the sum is exactly 0 here"),
    (lambda x: tg.where(x.max() > 0, x.tanh(), x * 0.5), "not the largest"),
    (lambda x: tg.where(x[0] > 0, x.tanh(), x * 0.5), "not one element"),
    (lambda x: tg.where(x.sum() > -1, x.tanh(), x * 0.5), "not another threshold"),
    (lambda x: tg.where(x.sum() > 1, x.tanh(), x * 0.5), "x.sum() > 0"),
    (lambda x: tg.where(x.sum() > 0, x * 0.5, x.tanh()), "the branches are swapped"),
    (lambda x: tg.where(x.sum() > 0, x.tanh(), x * 2.0), "wrong output of the traced graph"),
    (lambda x: x.tanh() if x.sum() > 0 else x * 0.5, "a branch was baked in"),
], ids=[">=", "max", "first element", "> -1", "> 1", "swapped", "wrong constant", "python if"])
def test_traceable_choice_rejects(wrong, feedback):
    rejected(ch11.check_traceable_choice(wrong), feedback)


@pytest.mark.parametrize("right", [
    lambda x: tg.where(x.mean() > 0, x.tanh(), x * 0.5),
    lambda x: tg.where(x.sum() <= 0, x * 0.5, x.tanh()),
    lambda x: tg.where(0 < x.sum(), x.tanh(), 0.5 * x),
], ids=["mean", "negated", "reflected"])
def test_traceable_choice_accepts(right):
    accepted(ch11.check_traceable_choice(right))


# -- 11.2 first_divergence ------------------------------------------------------------------

def divergence(compare, trace_each=False, report=lambda i: i, last=False, trace_on=0):
    """A first_divergence built from a comparison of (traced, eager) numpy outputs."""
    def first_divergence(fn, examples):
        traced = tg.jit.trace(fn, (examples[trace_on],))
        found = None
        for i, x in enumerate(examples):
            graph = tg.jit.trace(fn, (x,)) if trace_each else traced
            if not compare(graph(x).numpy(), fn(x).numpy()):
                found = report(i)
                if not last:
                    return found
        return found
    return first_divergence


def same(a, b):
    return a.shape == b.shape and np.allclose(a, b, equal_nan=True)


def same_graphs(fn, examples):
    def ops(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [(n.target, repr(n.args)) for n in tg.jit.trace(fn, (x,)).graph.nodes
                    if n.op == "call_function"]
    first = ops(examples[0])
    return next((i for i, x in enumerate(examples) if ops(x) != first), None)


@pytest.mark.parametrize("wrong, feedback", [
    (divergence(lambda a, b: a.shape == b.shape and np.allclose(a, b)), "equal_nan=True"),
    (divergence(lambda a, b: np.allclose(a, b, equal_nan=True)), "compare shapes too"),
    (divergence(same, trace_each=True), "trace once, on examples[0]"),
    (divergence(same, report=lambda i: i + 1), "gives the same output traced and eager"),
    (divergence(same, last=True), "is the first that does"),
    (same_graphs, "compare outputs, not graphs"),
    (divergence(lambda a, b: a.sum() == b.sum()), "equal_nan=True"),
    (divergence(same, trace_on=1), "trace once, on examples[0]"),
], ids=["nan", "shape", "trace each", "index + 1", "last", "graphs", "sums", "second example"])
def test_first_divergence_rejects(wrong, feedback):
    rejected(ch11.check_first_divergence(wrong), feedback)


def exact_comparison(fn, examples):
    traced = tg.jit.trace(fn, (examples[0],))
    results = [np.array_equal(traced(x).numpy(), fn(x).numpy(), equal_nan=True) for x in examples]
    return results.index(False) if False in results else None


@pytest.mark.parametrize("right", [divergence(same), exact_comparison], ids=["allclose", "exact"])
def test_first_divergence_accepts(right):
    accepted(ch11.check_first_divergence(right))


# -- 11.3 dead_code_elimination ---------------------------------------------------------------

def keep_what(outputs):
    """A pass that keeps the operations reachable from ``outputs(refs of the output node)``."""
    def dead_code_elimination(graph):
        g = graph.copy()
        live, stack = set(), outputs([r.node for r in refs_in(g.output.args)])
        while stack:
            name = stack.pop()
            if name not in live:
                live.add(name)
                stack += [r.node for r in refs_in((g.node(name).args, g.node(name).kwargs))]
        g.nodes = [n for n in g.nodes if n.op not in ("call_function", "get_attr") or n.name in live]
        return g
    return dead_code_elimination


live_from_the_first_output = keep_what(lambda names: names[:1])  # a tuple output: one value only
live_from_every_output = keep_what(list)


def test_dce_rejects_a_walk_from_one_output():
    rejected(ch11.check_dead_code_elimination(live_from_the_first_output))


def test_dce_accepts_a_walk_from_every_output():
    accepted(ch11.check_dead_code_elimination(live_from_every_output))


def test_dce_from_the_compilers_own_pass():
    def with_the_library(graph):
        from teachgrad.jit import passes
        return passes.eliminate_dead_code(graph)
    rejected(ch11.check_dead_code_elimination(with_the_library), "passes.eliminate_dead_code")


# -- no answers in public attributes ----------------------------------------------------------

def test_chapter_11_exposes_no_answer_table():
    assert not hasattr(ch11, "CLAIMS")
    assert not hasattr(ch10, "check_train_overlapped")

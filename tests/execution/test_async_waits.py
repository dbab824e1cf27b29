"""Every kind of host wait is recorded, with what it waited for: synchronize(), a stream's
synchronize(), Event.synchronize() and a loop of Event.query() calls."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import time

from teachgrad import streams


def test_a_stream_synchronize_is_a_recorded_wait_for_the_whole_stream():
    with streams.recording(wait_at_end=False) as rec:
        streams.busy(0.05)
        tg.cuda.current_stream().synchronize()
    [wait] = rec.waits
    assert wait.reason == "Stream.synchronize" and wait.target is None
    assert wait.ended - wait.began > 0.02
    assert wait.site.startswith("test_async_waits.py:")


def test_an_event_synchronize_names_the_marker_it_waited_for():
    with streams.recording(wait_at_end=False) as rec:
        streams.busy(0.05)
        done = tg.cuda.Event().record()
        streams.busy(0.05)
        done.synchronize()
    [wait] = rec.waits
    [marker] = [op for op in rec.ops if op.kind == "event"]
    assert wait.reason == "Event.synchronize" and wait.target is marker
    tg.cuda.synchronize()


def test_a_query_loop_is_one_recorded_wait_from_the_first_no_to_the_yes():
    with streams.recording(wait_at_end=False) as rec:
        streams.busy(0.05)
        done = tg.cuda.Event().record()
        polls = 0
        while not done.query():
            polls += 1
            time.sleep(0.002)
        assert done.query()  # asked again once it happened: no second wait
    [wait] = rec.waits
    [marker] = [op for op in rec.ops if op.kind == "event"]
    assert polls > 1
    assert wait.reason == "Event.query" and wait.target is marker
    assert wait.ended - wait.began > 0.02


def test_a_query_that_says_yes_at_once_is_no_wait():
    done = tg.cuda.Event().record()
    tg.cuda.synchronize()
    with streams.recording(wait_at_end=False) as rec:
        assert done.query()
        repr(done)
    assert rec.waits == []

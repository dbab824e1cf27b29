"""tg.profiler: events from the engine's seams, nested and timed; tables; schedules as PyTorch's.

The schedule tests run the cases of ``scripts/profiler_schedule_cases.py`` and compare
with ``tests/fixtures/profiler_schedule.json``: the same cases run by ``torch.profiler``
(``scripts/record_profiler_schedule.py``).
"""
from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

import teachgrad as tg
from teachgrad.autograd import engine, function
from teachgrad.profiler import (
    ProfilerAction, ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "profiler_schedule.json"
sys.path.insert(0, str(ROOT / "scripts"))

from profiler_schedule_cases import run_case  # noqa: E402  (the cases torch's profiler ran)
CPU = [ProfilerActivity.CPU]


def small_step():
    """A known program: forward (Mul, Add, Sum) in one region, backward in another."""
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = tg.tensor([4.0, 5.0, 6.0])
    with record_function("forward"):
        loss = (x * y + 1.0).sum()
    with record_function("backward"):
        loss.backward()
    return x


def host_events(prof):
    return [e for e in prof.events() if not e.is_device]


# -- what is recorded ----------------------------------------------------------------------

def test_forward_ops_sit_in_their_region_in_order():
    with profile(activities=CPU) as prof:
        small_step()
    forward = [e for e in prof.events() if e.name == "forward"]
    assert len(forward) == 1
    assert [c.name for c in forward[0].cpu_children] == ["Mul", "Add", "Sum"]


def test_counts_per_op_of_a_known_program():
    with profile(activities=CPU) as prof:
        small_step()
    counts = {row.key: row.count for row in prof.key_averages()}
    assert counts["forward"] == counts["backward"] == 1
    assert counts["SumBackward"] == counts["AddBackward"] == counts["MulBackward"] == 1
    backward = next(e for e in prof.events() if e.name == "backward")
    nodes = [c.name for c in backward.cpu_children]
    assert nodes == ["SumBackward", "AddBackward", "MulBackward"]  # the engine's visiting order
    # every Mul is the forward's one or one run by a backward formula, inside its node
    muls = [e for e in prof.events() if e.name == "Mul"]
    assert counts["Mul"] == len(muls) >= 1
    assert all(m.cpu_parent.name in ("forward", "MulBackward") or
               m.cpu_parent.cpu_parent.name == "MulBackward" for m in muls)


def test_children_lie_within_parents_and_self_time_is_total_minus_children():
    model = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Tanh(), tg.nn.Linear(8, 2))
    with profile(activities=CPU) as prof:
        with record_function("step"):
            model(tg.randn(5, 4)).pow(2).mean().backward()
    events = host_events(prof)
    assert len(events) > 10
    for e in events:
        assert e.end_us >= e.start_us
        for c in e.cpu_children:
            assert c.cpu_parent is e and c.thread == e.thread
            assert e.start_us <= c.start_us and c.end_us <= e.end_us
        children = sum(c.duration_us for c in e.cpu_children)
        assert e.self_cpu_time_total == pytest.approx(e.duration_us - children)
        assert e.self_cpu_time_total >= -1e-6
        # siblings do not overlap
        spans = sorted((c.start_us, c.end_us) for c in e.cpu_children)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    roots = [e for e in events if e.cpu_parent is None]
    assert [r.name for r in roots] == ["step"]
    total_self = sum(r.self_cpu_time_total for r in prof.key_averages())
    assert total_self == pytest.approx(roots[0].duration_us)


def test_record_function_is_a_decorator_too_and_records_nothing_outside_a_profile():
    @record_function("loss_fn")
    def loss_fn(x):
        return (x * x).sum()

    x = tg.ones(3)
    assert loss_fn(x).item() == 3.0  # no profile: it just runs
    with profile(activities=CPU) as prof:
        loss_fn(x)
        loss_fn(x)
    row = next(r for r in prof.key_averages() if r.key == "loss_fn")
    assert row.count == 2
    assert {c.name for e in row.events for c in e.cpu_children} == {"Mul", "Sum"}


def test_record_shapes_and_grouping_by_input_shape():
    linear = tg.nn.Linear(4, 3)
    with profile(activities=CPU, record_shapes=True) as prof:
        linear(tg.randn(2, 4))
        linear(tg.randn(5, 4))
        linear(tg.randn(5, 4))
    rows = [r for r in prof.key_averages(group_by_input_shape=True) if r.key == "Linear"]
    assert sorted((r.input_shapes, r.count) for r in rows) == [
        ("[[2, 4], [3, 4], [3]]", 1), ("[[5, 4], [3, 4], [3]]", 2)]
    assert [r.count for r in prof.key_averages() if r.key == "Linear"] == [3]
    text = prof.key_averages(group_by_input_shape=True).table(sort_by="count")
    assert "Input Shapes" in text and "[[5, 4], [3, 4], [3]]" in text
    scalar = next(e for e in prof.events() if e.name == "Linear")
    assert scalar.input_shapes == [[2, 4], [3, 4], [3]]


def test_grouping_by_shape_needs_the_shapes():
    with profile(activities=CPU) as prof:
        tg.ones(2) * 2.0
    with pytest.raises(ValueError, match="record_shapes=True"):
        prof.key_averages(group_by_input_shape=True)


def test_with_stack_names_the_learners_line():
    with profile(activities=CPU, with_stack=True) as prof:
        tg.ones(2) * 2.0
    (mul,) = [e for e in prof.events() if e.name == "Mul"]
    assert mul.stack and mul.stack[0].startswith("test_profiler.py:")


def test_ops_of_another_thread_get_their_own_lane():
    def work():
        with record_function("in_thread"):
            tg.ones(3) * 2.0

    with profile(activities=CPU) as prof:
        t = threading.Thread(target=work)
        t.start()
        t.join()
        tg.ones(3) + 1.0
    region = next(e for e in prof.events() if e.name == "in_thread")
    add = next(e for e in prof.events() if e.name == "Add")
    assert region.thread != add.thread
    assert [c.name for c in region.cpu_children] == ["Mul"]


# -- the table -------------------------------------------------------------------------------

def test_table_columns_sorting_and_row_limit():
    with profile(activities=CPU) as prof:
        for _ in range(3):
            small_step()
    rows = prof.key_averages()
    by_total = sorted(rows, key=lambda r: r.cpu_time_total, reverse=True)
    text = prof.key_averages().table(sort_by="cpu_time_total", row_limit=4)
    lines = text.splitlines()
    header = lines[1].split()
    assert header[:1] == ["Name"] and "CPU total %" in lines[1] and "# of Calls" in lines[1]
    assert "CUDA" not in lines[1]  # no device time recorded: no device columns
    body = lines[3:3 + 4]
    assert [line.split()[0] for line in body] == [r.key for r in by_total[:4]]
    assert lines[3 + 4].startswith("---") and lines[-1].startswith("Self CPU time total:")
    counts = [int(line.split()[-1]) for line in prof.key_averages().table(sort_by="count").splitlines()[3:-2]]
    assert counts == sorted(counts, reverse=True)
    percents = [float(line.split()[1].rstrip("%")) for line in
                prof.key_averages().table(row_limit=-1).splitlines()[3:-2]]
    assert sum(percents) == pytest.approx(100.0, abs=0.1)


# -- schedules: the steps PyTorch records ----------------------------------------------------------

def _cases():
    return json.loads(FIXTURE.read_text())["cases"]


@pytest.mark.parametrize("recorded", _cases(), ids=lambda c: str(c["case"]))
def test_schedule_matches_torch_profiler(recorded):
    case = tuple(recorded["case"]) if recorded["case"] is not None else None
    assert run_case(tg, tg.profiler, case) == recorded


def test_warmup_steps_are_run_with_the_seams_on_but_not_kept():
    seen = []
    with profile(activities=CPU, schedule=schedule(wait=1, warmup=1, active=1, repeat=1)) as prof:
        for i in range(3):
            seen.append((prof.current_action, function.observer is not None))
            tg.ones(2) * float(i)
            prof.step()
    assert seen == [(ProfilerAction.NONE, False), (ProfilerAction.WARMUP, True),
                    (ProfilerAction.RECORD_AND_SAVE, True)]
    assert [r.count for r in prof.key_averages() if r.key == "Mul"] == [1]


def test_schedule_warns_without_warmup_and_refuses_bad_counts():
    with pytest.warns(UserWarning, match="warmup"):
        schedule(wait=0, warmup=0, active=1)
    for bad in (dict(wait=-1, warmup=1, active=1), dict(wait=0, warmup=1, active=0),
                dict(wait=0, warmup=1, active=1, repeat=-2), dict(wait=0.5, warmup=1, active=1),
                dict(wait=0, warmup=1, active=1, skip_first=-1)):
        with pytest.raises(ValueError, match="must be an int"):
            schedule(**bad)


def test_tensorboard_trace_handler_writes_one_file_per_cycle(tmp_path):
    folder = tmp_path / "runs"
    with profile(activities=CPU, schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
                 on_trace_ready=tensorboard_trace_handler(str(folder), "worker0")) as prof:
        for _ in range(5):
            tg.ones(2) * 2.0
            prof.step()
    files = sorted(p.name for p in folder.iterdir())
    assert len(files) == 2 and all(f.startswith("worker0.") and f.endswith(".pt.trace.json")
                                   for f in files)


# -- off means off, and bad arguments change nothing -------------------------------------------

def test_seams_are_off_outside_a_profile_even_after_an_error():
    assert function.observer is None and engine.node_observer is None
    with pytest.raises(ZeroDivisionError):
        with profile(activities=CPU):
            assert function.observer is not None and engine.node_observer is not None
            1 / 0
    assert function.observer is None and engine.node_observer is None


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(activities=["cpu"]), TypeError, "not a ProfilerActivity"),
    (dict(activities=[]), ValueError, "activities is empty"),
    (dict(activities=ProfilerActivity.CPU), TypeError, "list of ProfilerActivity"),
    (dict(record_shapes="yes"), TypeError, "record_shapes"),
    (dict(with_stack=1), TypeError, "with_stack"),
    (dict(schedule=3), TypeError, "schedule must be"),
    (dict(on_trace_ready="print"), TypeError, "on_trace_ready must be callable"),
    (dict(profile_memory=True), ValueError, "profile_memory"),
])
def test_bad_profile_arguments_are_refused_before_anything_changes(kwargs, error, match):
    with pytest.raises(error, match=match):
        profile(**kwargs)
    assert function.observer is None and engine.node_observer is None


def test_bad_table_and_region_arguments():
    with profile(activities=CPU) as prof:
        tg.ones(2) * 2.0
    with pytest.raises(ValueError, match="sort by one of"):
        prof.key_averages().table(sort_by="cpu_time_totl")
    with pytest.raises(TypeError, match="row_limit"):
        prof.key_averages().table(row_limit="10")
    with pytest.raises(TypeError, match="non-empty name"):
        record_function(42)
    with pytest.raises(TypeError, match="file path"):
        prof.export_chrome_trace(None)


def test_one_profile_at_a_time_and_misuse_of_start_stop_step():
    with profile(activities=CPU) as outer:
        inner = profile(activities=CPU)
        with pytest.raises(RuntimeError, match="another profile is recording"):
            inner.start()
        with pytest.raises(RuntimeError, match="already running"):
            outer.start()
        tg.ones(2) * 2.0
    assert [r.key for r in outer.key_averages()] == ["Mul"]
    with pytest.raises(RuntimeError, match="not running"):
        outer.stop()
    with pytest.raises(RuntimeError, match="outside the profile"):
        outer.step()


def test_an_outer_observer_still_sees_every_op():
    from teachgrad.exercises.core import watching_ops

    with watching_ops() as calls:
        with profile(activities=CPU) as prof:
            tg.ones(2) * 2.0
    assert [c.function.__name__ for c in calls] == ["Mul"]
    assert [r.key for r in prof.key_averages()] == ["Mul"]


def test_tracing_inside_a_profile_works_and_the_profile_resumes_after_it():
    linear = tg.nn.Linear(3, 2)
    x = tg.randn(4, 3)
    with profile(activities=CPU) as prof:
        traced = tg.jit.trace(linear, (x,))
        assert function.observer is not None  # the profile's observer is back
        traced(x)
        tg.ones(2) * 3.0
    assert function.observer is None
    assert traced(x).shape == (4, 2)
    assert "Mul" in {r.key for r in prof.key_averages()}

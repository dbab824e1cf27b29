"""The exercise catalog is the chapters' own list; progress and its picture follow the engine."""
from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import re
from pathlib import Path

import nbformat
import pytest

import teachgrad as tg
from teachgrad.exercises import KINDS, catalog, parts, plugged, progress

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CHECK_CALL = re.compile(r"\b(ch\d+\w*)\.(check_\w+)\(")


def _notebook_checks() -> list[str]:
    found = []
    for path in sorted(NOTEBOOKS.glob("[0-9]*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                found += [f"{m.group(1)}.{m.group(2)}" for m in CHECK_CALL.finditer(cell.source)]
    return found


def _checker(name: str):
    module, function = name.split(".")
    return getattr(importlib.import_module(f"teachgrad.exercises.{module}"), function)


def test_the_catalog_lists_every_checker_the_chapters_call_in_their_order():
    assert [e.checker for e in catalog()] == _notebook_checks()


def test_each_exercise_is_numbered_as_its_chapter_and_its_checker_number_it():
    def stub(*args, **kwargs):
        raise NotImplementedError("fill in")

    for exercise in catalog():
        [path] = NOTEBOOKS.glob(f"{exercise.chapter}_*.ipynb")
        text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                         if c.cell_type == "markdown")
        assert re.search(rf"Exercise {re.escape(exercise.id)}\b", text), exercise
        checker = _checker(exercise.checker)
        required = [p for p in inspect.signature(checker).parameters.values()
                    if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
        with contextlib.redirect_stdout(io.StringIO()):
            feedback = checker(*[stub] * len(required))
        assert feedback.exercise == exercise.id, (exercise, feedback.exercise)


def test_kinds_and_the_parts_build_exercises_plug_into():
    known = parts()
    assert {e.kind for e in catalog()} <= set(KINDS)
    builds = catalog(kind="build")
    assert len([e for e in builds if e.plugs_into]) >= 6
    for exercise in catalog():
        assert not exercise.plugs_into or exercise.kind == "build", exercise
        for name in exercise.plugs_into:
            assert name in known or (name.startswith("backward:")
                                     and tg.autograd.parts.get(name) is not None), name
    assert [e.id for e in catalog(chapter=3)] == ["3.1", "3.2", "3.3", "3.4"]
    assert [e.id for e in catalog("8b")][0] == "8b.1"
    with pytest.raises(ValueError, match="kind must be one of"):
        catalog(kind="quiz")
    with pytest.raises(ValueError, match="no chapter '42'"):
        catalog(chapter="42")


def test_progress_reads_verdicts_and_plugged_parts_and_the_map_draws_them():
    from teachgrad.exercises import ch01
    from teachgrad.widgets import EngineMap

    with contextlib.redirect_stdout(io.StringIO()):
        ch01.check_peak_fp32_tflops(lambda *a: -1.0)  # wrong
    assert progress().status["1.1"] == "wrong"
    with contextlib.redirect_stdout(io.StringIO()):
        ch01.check_peak_fp32_tflops(lambda sms, cores, ghz: 2 * sms * cores * ghz / 1000)
    report = progress()
    assert report.status["1.1"] == "solved" and "1.1" in report.solved()

    engine = tg.autograd.parts.get("autograd.sum_to_shape").engine

    def my_sum_to_shape(grad, shape):  # a learner's part (the engine's rule, by delegation)
        return engine(grad, shape)

    with plugged("autograd.sum_to_shape", my_sum_to_shape):
        x = tg.ones(3, requires_grad=True)
        (x * tg.ones(2, 3)).sum().backward()  # broadcasting: the part runs
        assert x.grad.tolist() == [2.0, 2.0, 2.0]
        state = {p.name: p for p in progress().parts}["autograd.sum_to_shape"]
        assert state.plugged and state.exercises == ("2.4",)
        svg = EngineMap().to_svg()
        box = re.search(r'fill="([^"]+)"[^>]*><title>autograd\.sum_to_shape:', svg)
        assert box and box.group(1) == "#ffb347"  # orange: the learner's code runs it
    state = {p.name: p for p in progress().parts}["autograd.sum_to_shape"]
    assert not state.plugged
    assert "autograd.sum_to_shape" in str(progress()) and "the engine's" in str(progress())

"""Grading the chapters with nbgrader (scripts/nbgrader_course.py, teachgrad.exercises.grading).

The conversion is tested cell by cell, then end to end with nbgrader's own command line:
make a course of chapters 1 and 3 -> ``nbgrader generate_assignment`` -> two submissions
-> ``nbgrader autograde`` -> the gradebook. The reference answers get every point; a
submission with one wrong answer and one stub loses exactly those two exercises' points.
"""
from __future__ import annotations

import copy
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat

from teachgrad.exercises import catalog
import pytest

from teachgrad.exercises import check
from teachgrad.exercises.edition import learner_stub
from teachgrad.exercises.grading import (
    ExerciseLayoutError, exercise_number, find_checker, graded_exercises, mark_answers,
)

pytest.importorskip("nbgrader", reason="nbgrader is in the test extra: pip install -e '.[test]'")
from nbgrader.api import Gradebook  # noqa: E402
from nbgrader.nbgraderformat import MetadataValidator  # noqa: E402
from nbgrader.preprocessors import ClearSolutions  # noqa: E402
from nbgrader.validator import Validator  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHAPTER_01 = ROOT / "notebooks" / "01_why_ml_systems.ipynb"
CHAPTER_03 = ROOT / "notebooks" / "03_autograd.ipynb"
CHAPTER_04 = ROOT / "notebooks" / "04_custom_functions.ipynb"  # classes with a rule
CHAPTER_07 = ROOT / "notebooks" / "07_reductions_and_shared_memory.ipynb"  # kernels, imports


def load_script():
    spec = importlib.util.spec_from_file_location("nbgrader_course",
                                                  ROOT / "scripts" / "nbgrader_course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


course_script = load_script()


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def code_cell(source: str, tags: tuple[str, ...] = ()) -> dict:
    return nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)} if tags else {})


# --- which cells are exercises ---------------------------------------------------------------

def test_graded_exercises_of_chapter_3():
    cells = read(CHAPTER_03).cells
    found = graded_exercises(cells)
    numbers = [e.id for e in catalog(chapter=3)]  # the chapter's exercises, in order
    assert [e.number for e in found] == numbers and len(numbers) >= 3
    assert [e.grade_id for e in found] == ["ex" + n.replace(".", "_") for n in numbers]
    for exercise in found:
        assert "solution" in cells[exercise.solution_cell].metadata["tags"]
        assert cells[exercise.check_cell].source.strip() == exercise.check_statement()
        assert exercise.result_name is None or exercise.result_name.isidentifier()
        assert exercise.module == "ch03" and exercise.call.startswith(f"ch03.{exercise.checker}(")


def test_exercise_number_is_the_one_the_checker_prints(capsys):
    checker = find_checker("ch01", "check_mma_flops")
    assert exercise_number(checker) == "1.2"
    assert capsys.readouterr().out == ""  # asked quietly


def test_a_check_cell_after_other_cells_is_found_and_comments_are_dropped():
    cells = [code_cell("def mma_flops(m, n, k):\n    return 2 * m * n * k", ("solution",)),
             nbformat.v4.new_markdown_cell("Now check it."),
             code_cell("mma_flops(1, 1, 1)"),
             code_cell("ch01.check_mma_flops(mma_flops)  # try it")]
    (exercise,) = graded_exercises(cells)
    assert (exercise.solution_cell, exercise.check_cell) == (0, 3)
    assert exercise.call == "ch01.check_mma_flops(mma_flops)"


def test_a_check_cell_may_name_the_feedback_and_pass_several_answers():
    cells = [code_cell("def mma_flops(m, n, k):\n    return 2 * m * n * k", ("solution",)),
             code_cell("solved_1_2 = ch01.check_mma_flops(mma_flops)"),
             code_cell("def tflops(sms, cores, ghz):\n    return sms * cores * ghz", ("solution",)),
             code_cell("ch01.check_peak_fp32_tflops(tflops, quiet=False)")]
    first, second = graded_exercises(cells)
    assert (first.number, first.result_name) == ("1.2", "solved_1_2")
    assert first.check_statement() == "solved_1_2 = ch01.check_mma_flops(mma_flops)"
    assert second.number == "1.1" and second.call == "ch01.check_peak_fp32_tflops(tflops, quiet=False)"
    source = course_script.nbgrader_source(nbformat.v4.new_notebook(cells=cells))
    # the name is kept for the cells that read it, and the test asserts on it
    assert source.cells[1].source.splitlines()[-2:] == [
        "    solved_1_2 = ch01.check_mma_flops(mma_flops)",
        "assert solved_1_2.passed, \"Exercise 1.2 is not solved: see the checker's message above\""]


def test_a_checker_is_asked_its_number_with_nothing_for_each_answer():
    seen = []

    def check_pair(first, second):
        seen.append((first, second))
        return check("9.9", [], solved="both", candidate=first)

    assert exercise_number(check_pair, answers=2) == "9.9" and seen == [(None, None)]
    with pytest.raises(ExerciseLayoutError, match="check_pair, given nothing filled in, raised TypeError"):
        exercise_number(check_pair)
    with pytest.raises(ExerciseLayoutError, match="returned bool, not a Feedback"):
        exercise_number(lambda answer: True)


@pytest.mark.parametrize("cells, problem", [
    ([code_cell("def f(x):\n    return x", ("solution",)), code_cell("f(1)")],
     "has no check after it"),
    ([code_cell("def f(x):\n    return x", ("solution",)),
      code_cell("def g(x):\n    return x", ("solution",)),
      code_cell("ch01.check_mma_flops(g)")],
     "index 0 has no check"),
    ([code_cell("def f(x):\n    return x", ("solution",)), code_cell("os.check_system(f)")],
     "no checker module 'os'"),
    ([code_cell("def f(x):\n    return x", ("solution",)), code_cell("ch01.check_nothing(f)")],
     "has no checker 'check_nothing'"),
    ([code_cell("def f(x):\n    return x", ("solution",)),
      code_cell("a, b = ch01.check_mma_flops(f)"), code_cell("ch01.check_mma_flops(f())")],
     "has no check after it"),
    ([code_cell("def f(x):\n    return x", ("solution",)), code_cell("ch01.check_mma_flops(f)"),
      code_cell("def g(x):\n    return x", ("solution",)), code_cell("ch01.check_mma_flops(g)")],
     "exercise 1.2 is checked twice"),
])
def test_a_layout_graders_cannot_use_is_refused_naming_the_cell(cells, problem):
    with pytest.raises(ExerciseLayoutError, match=re.escape(problem)):
        graded_exercises(cells)


# --- which lines the learner writes ------------------------------------------------------------

def test_mark_answers_wraps_each_body_after_its_docstring():
    source = ('import math\n\ndef f(x): return x + 1\n\nclass Square:\n    rule = "d(x²)/dx = 2x"\n\n'
              '    def g(self, x):\n        """Doc\n        on two lines."""\n        y = x * x\n\n'
              '        return y\n')
    assert mark_answers(source) == (
        'import math\n\ndef f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n\n'
        'class Square:\n    rule = ""  # optional: the derivative rule, in words, once you have it\n\n'
        '    def g(self, x):\n        """Doc\n        on two lines."""\n        ### BEGIN SOLUTION\n'
        '        y = x * x\n\n        return y\n        ### END SOLUTION')


def _normalised_stubs(source: str) -> str:
    """A cell with every stub (nbgrader's or the learner edition's) written the same way."""
    source = re.sub(r"(?m)^(\s*)# (YOUR CODE HERE|your code here)\n\s*raise NotImplementedError\(.*\)$",
                    r"\1<stub>", source)
    return "\n".join(line.rstrip() for line in source.splitlines()).strip()


@pytest.mark.parametrize("chapter", [CHAPTER_01, CHAPTER_03, CHAPTER_04, CHAPTER_07],
                         ids=lambda path: path.stem)
def test_nbgrader_releases_what_the_learner_edition_shows(chapter):
    reference = read(chapter)
    source = course_script.nbgrader_source(reference)
    released, _ = ClearSolutions().preprocess(copy.deepcopy(source), {})
    exercises = graded_exercises(reference.cells)
    for exercise in exercises:
        answer = released.cells[exercise.solution_cell].source
        assert "BEGIN SOLUTION" not in answer
        expected = learner_stub(reference.cells[exercise.solution_cell].source)
        assert _normalised_stubs(answer) == _normalised_stubs(expected)
        compile(answer, exercise.grade_id, "exec")  # the released cell still runs


def test_the_source_version_marks_answers_and_tests():
    reference = read(CHAPTER_03)
    before = copy.deepcopy(reference)
    source = course_script.nbgrader_source(reference, points=3)
    assert reference == before  # the chapter itself is left as it was
    MetadataValidator().validate_nb(source)
    graded = {cell.metadata["nbgrader"]["grade_id"]: cell for cell in source.cells
              if "nbgrader" in cell.metadata}
    assert sorted(graded) == sorted(f"ex{e.id.replace('.', '_')}_{part}"
                                    for e in catalog(chapter=3) for part in ("answer", "check"))
    answer, check = graded["ex3_1_answer"], graded["ex3_1_check"]
    assert answer.metadata["nbgrader"]["solution"] and not answer.metadata["nbgrader"]["grade"]
    assert answer.metadata["tags"] == ["exercise"]  # the book's solution toggle is gone
    assert check.metadata["nbgrader"] | {"checksum": None} == check.metadata["nbgrader"] | {
        "grade": True, "solution": False, "locked": True, "points": 3, "checksum": None}
    assert check.source.splitlines()[-3:] == [
        "with contextlib.redirect_stderr(sys.stdout):",
        "    feedback_3_1 = ch03.check_linear_mse_grads(linear_mse_grads)",
        "assert feedback_3_1.passed, \"Exercise 3.1 is not solved: see the checker's message above\""]
    assert all(cell.outputs == [] for cell in source.cells if cell.cell_type == "code")
    assert "widgets" not in source.metadata
    # the other cells are the chapter's own, with their ids
    assert [cell.id for cell in source.cells] == [cell.id for cell in reference.cells]


@pytest.mark.parametrize("points", [0, -1, 1.5, True])
def test_points_must_be_a_positive_whole_number(points):
    with pytest.raises(ValueError, match="points must be a whole number"):
        course_script.nbgrader_source(read(CHAPTER_01), points=points)


def test_a_chapter_without_exercises_is_refused():
    notebook = nbformat.v4.new_notebook(cells=[code_cell("1 + 1")])
    with pytest.raises(ValueError, match="no exercise"):
        course_script.nbgrader_source(notebook)


def test_write_course_checks_everything_before_writing(tmp_path):
    course = tmp_path / "course"
    with pytest.raises(ValueError, match="assignment name '../up'"):
        course_script.write_course([CHAPTER_01], course, assignment="../up")
    empty = tmp_path / "empty.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[code_cell("1 + 1")]), empty)
    with pytest.raises(ValueError, match="empty.ipynb: .*no exercise"):
        course_script.write_course([CHAPTER_01, empty], course, assignment="week1")
    assert not course.exists()


def test_write_course_keeps_the_instructors_config(tmp_path):
    course = tmp_path / "course"
    written = course_script.write_course([CHAPTER_01], course)
    assert written == [course / "source" / "01_why_ml_systems" / "01_why_ml_systems.ipynb"]
    config = course / "nbgrader_config.py"
    assert 'course_id = "teachgrad"' in config.read_text()
    config.write_text("c = get_config()\n")
    course_script.write_course([CHAPTER_01], course)  # made again after a chapter changed
    assert config.read_text() == "c = get_config()\n"


# --- end to end: generate, submit, autograde ---------------------------------------------------

def nbgrader(course: Path, *args: str) -> None:
    """Run nbgrader's command line in ``course``; nbgrader calls `alembic` by name, so the
    environment's scripts folder goes first on PATH."""
    scripts = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"


def submit(course: Path, student: str, answers: dict[str, str]) -> None:
    """Hand in the released week1 with ``answers`` (grade id -> cell text) filled in."""
    folder = course / "submitted" / student / "week1"
    folder.mkdir(parents=True)
    for released in sorted((course / "release" / "week1").glob("*.ipynb")):
        notebook = read(released)
        for cell in notebook.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in answers:
                cell.source = answers[grade_id]
        nbformat.write(notebook, folder / released.name)


def reference_answers() -> dict[str, str]:
    answers = {}
    for chapter in (CHAPTER_01, CHAPTER_03):
        cells = read(chapter).cells
        for exercise in graded_exercises(cells):
            answers[f"{exercise.grade_id}_answer"] = cells[exercise.solution_cell].source
    return answers


def scores(course: Path, student: str) -> dict[str, float]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission("week1", student)
        return {grade.name: grade.score for notebook in submission.notebooks
                for grade in notebook.grades}


@pytest.mark.slow
def test_autograde_gives_the_points_the_checkers_give(tmp_path):
    course = tmp_path / "course"
    course_script.write_course([CHAPTER_01, CHAPTER_03], course, assignment="week1", points=2)
    nbgrader(course, "generate_assignment", "week1")
    released = read(course / "release" / "week1" / "03_autograd.ipynb")
    assert "BEGIN SOLUTION" not in nbformat.writes(released)
    assert "grad_w = X.T @ d_residual" not in nbformat.writes(released)  # no answer leaks

    answers = reference_answers()
    # a warning from the learner's code is no failure: only the checker's verdict counts
    docstring = '    """Peak single-precision speed in TFLOP/s: every core does one multiply-add per cycle."""\n'
    assert docstring in answers["ex1_1_answer"]
    submit(course, "alice", answers | {"ex1_1_answer": answers["ex1_1_answer"].replace(
        docstring, docstring + '    __import__("warnings").warn("a warning from the answer")\n')})
    wrong = dict(answers)
    right_line = "grad_b = d_residual.sum()"
    assert right_line in wrong["ex3_1_answer"]
    wrong["ex3_1_answer"] = wrong["ex3_1_answer"].replace(right_line, "grad_b = d_residual.mean()")
    del wrong["ex1_2_answer"]  # left as the released stub
    submit(course, "bob", wrong)

    nbgrader(course, "autograde", "week1")
    alice, bob = scores(course, "alice"), scores(course, "bob")
    all_points = {grade_id.replace("_answer", "_check"): 2.0 for grade_id in answers}
    assert {"ex1_1_check", "ex1_2_check", "ex3_1_check", "ex3_2_check"} <= set(all_points)
    assert alice == all_points
    assert bob == all_points | {"ex1_2_check": 0.0, "ex3_1_check": 0.0}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        assert gradebook.find_submission("week1", "alice").score == 2 * len(all_points)
        assert gradebook.find_submission("week1", "bob").score == 2 * len(all_points) - 4

    graded = read(course / "autograded" / "alice" / "week1" / "01_why_ml_systems.ipynb")
    assert any("a warning from the answer" in output.get("text", "")
               for cell in graded.cells for output in cell.get("outputs", []))
    # bob's graded notebook shows why: the checker's own message, then the failed test
    graded = read(course / "autograded" / "bob" / "week1" / "03_autograd.ipynb")
    (check,) = [c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "ex3_1_check"]
    texts = [output.get("text", "") for output in check.outputs]
    assert any(text.startswith("❌ Exercise 3.1 not quite: wrong grad_b") for text in texts)
    assert [o.ename for o in check.outputs if o.output_type == "error"] == ["AssertionError"]


@pytest.mark.slow
def test_nbgrader_validate_passes_the_source_and_no_test_of_the_release(tmp_path):
    course = tmp_path / "course"
    course_script.write_course([CHAPTER_01], course, assignment="week1")
    nbgrader(course, "generate_assignment", "week1")
    # nbgrader's validate lists only problems: none with the answers in ...
    assert Validator().validate(str(course / "source" / "week1" / CHAPTER_01.name)) == {}
    # ... and every test fails on the notebook as released (no answer leaked)
    release = Validator().validate(str(course / "release" / "week1" / CHAPTER_01.name))
    assert [cell["source"].splitlines()[0] for cell in release["failed"]] == [
        "# Exercise 1.1 (1 point): solved when the checker says so.",
        "# Exercise 1.2 (1 point): solved when the checker says so."]

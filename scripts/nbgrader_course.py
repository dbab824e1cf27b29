"""Make an nbgrader course of the chapters: each exercise an autograded answer, each check a test.

    .venv/bin/python scripts/nbgrader_course.py --course course/          # every chapter
    .venv/bin/python scripts/nbgrader_course.py notebooks/03_autograd.ipynb --course course \\
        --assignment week3 --points 2

writes ``course/nbgrader_config.py`` (once: it is the instructor's to edit) and
``course/source/<assignment>/<chapter>.ipynb``, the nbgrader "source" version of
each chapter. By default each chapter is its own assignment, named like its
file (``03_autograd``); ``--assignment`` puts every given chapter in one.

The chapters themselves stay as they are (the reference edition); this is a
conversion, exercise by exercise (:func:`teachgrad.exercises.grading.graded_exercises`):

* the cell tagged ``solution`` becomes an nbgrader **autograded answer**: each
  function body between ``### BEGIN SOLUTION`` and ``### END SOLUTION``, the
  lines the learner edition (``scripts/make_learner.py``) stubs, so that
  ``nbgrader generate_assignment`` releases what the learner edition shows;
* the cell that calls the checker becomes an **autograder test** worth
  ``--points``: ``feedback_3_1 = ch03.check_x(x)`` (or the name the chapter gives
  the result), then ``assert feedback_3_1.passed``. It prints the checker's
  ✅/❌/⏳ message as in the book and fails unless the checker says solved, so
  ``nbgrader autograde`` gives the score the checkers give. (nbgrader also fails
  a test cell that writes to stderr, so the cell shows warnings on stdout.)

Grade ids come from the exercise numbers (``ex3_1_answer``, ``ex3_1_check``), so a
course made again after the chapters change keeps its gradebook entries.
Every notebook is checked with nbgrader's own metadata validator before it is written.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import nbformat
from nbformat import NotebookNode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the chapters' own teachgrad, installed or not

from teachgrad.exercises.edition import SOLUTION_TAG  # noqa: E402
from teachgrad.exercises.grading import GradedExercise, graded_exercises, mark_answers  # noqa: E402

try:
    from nbgrader.nbgraderformat import SCHEMA_VERSION, MetadataValidator
except ImportError:  # pragma: no cover - the message is the point
    sys.exit("nbgrader is not installed: make course installs it, or "
             ".venv/bin/python -m pip install -e '.[grading]'")

DEFAULT_POINTS = 1
ASSIGNMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
BOOK_ONLY_TAGS = (SOLUTION_TAG, "hide-input")  # the book's "Show solution" toggle

# Written once into a new course; nbgrader reads it from the course folder.
NBGRADER_CONFIG = '''\
# nbgrader's configuration for a course made of teachgrad's chapters
# (written by scripts/nbgrader_course.py when missing; edit it freely).
c = get_config()  # noqa: F821 (nbgrader defines get_config)

# The exchange keeps released and submitted assignments under this course id.
c.CourseDirectory.course_id = "teachgrad"

# Seconds a cell may run when nbgrader executes a notebook (autograde, validate).
# Some chapter cells train a small model or run kernels in numba's CUDA simulator.
c.Execute.timeout = 600
'''


def _nbgrader_metadata(grade_id: str, *, answer: bool, points: int) -> dict:
    """nbgrader's cell metadata: an autograded answer, or a locked test worth ``points``."""
    metadata = {"grade": not answer, "solution": answer, "locked": not answer,
                "task": False, "grade_id": grade_id, "schema_version": SCHEMA_VERSION}
    if not answer:
        metadata["points"] = points
    return metadata


def _answer_cell(cell: NotebookNode, exercise: GradedExercise) -> None:
    cell.source = mark_answers(cell.source)
    tags = [tag for tag in cell.metadata.get("tags", []) if tag not in BOOK_ONLY_TAGS]
    cell.metadata["tags"] = tags + ["exercise"]
    cell.metadata.pop("mystnb", None)
    cell.metadata["nbgrader"] = _nbgrader_metadata(f"{exercise.grade_id}_answer",
                                                   answer=True, points=0)


def _check_cell(cell: NotebookNode, exercise: GradedExercise, points: int) -> None:
    unit = "point" if points == 1 else "points"
    # later cells may read the Feedback by the name the chapter gave it
    name = exercise.result_name or "feedback_" + exercise.number.replace(".", "_")
    cell.source = "\n".join([
        f"# Exercise {exercise.number} ({points} {unit}): solved when the checker says so.",
        "# nbgrader fails a test that writes to stderr: warnings are shown on stdout instead,",
        "# so that only the checker's verdict counts.",
        "import contextlib, sys",
        "with contextlib.redirect_stderr(sys.stdout):",
        f"    {name} = {exercise.call}",
        f"assert {name}.passed, "
        f'"Exercise {exercise.number} is not solved: see the checker\'s message above"'])
    cell.metadata["nbgrader"] = _nbgrader_metadata(f"{exercise.grade_id}_check",
                                                   answer=False, points=points)


def nbgrader_source(reference: NotebookNode, points: int = DEFAULT_POINTS) -> NotebookNode:
    """The nbgrader source version of a reference chapter (a new notebook; outputs cleared)."""
    if isinstance(points, bool) or not isinstance(points, int) or points < 1:
        raise ValueError(f"points must be a whole number of at least 1, got {points!r}")
    notebook = nbformat.from_dict(reference)  # a deep copy
    exercises = graded_exercises(notebook.cells)
    if not exercises:
        raise ValueError("this notebook has no exercise (no code cell tagged 'solution')")
    for exercise in exercises:
        _answer_cell(notebook.cells[exercise.solution_cell], exercise)
        _check_cell(notebook.cells[exercise.check_cell], exercise, points)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    notebook.metadata.pop("widgets", None)  # widget state belongs to the cleared outputs
    MetadataValidator().validate_nb(notebook)
    nbformat.validate(notebook)
    return notebook


def assignment_name(name: str) -> str:
    """``name`` when it is a safe assignment (folder) name, else a clear error."""
    if not ASSIGNMENT_NAME.fullmatch(name):
        raise ValueError(f"assignment name {name!r}: use letters, digits, '_' and '-', "
                         "starting with a letter or digit (e.g. 'week3' or '03_autograd')")
    return name


def write_course(notebooks: Iterable[Path], course: Path, assignment: str | None = None,
                 points: int = DEFAULT_POINTS) -> list[Path]:
    """Write each chapter's source version into ``course``; returns the notebooks written.

    Every chapter is converted before anything is written, so a chapter whose
    exercises cannot be graded leaves the course as it was.
    """
    notebooks = [Path(path) for path in notebooks]
    if assignment is not None:
        assignment_name(assignment)
    converted = []
    for path in notebooks:
        name = assignment or assignment_name(path.stem)
        try:
            source = nbgrader_source(nbformat.read(path, as_version=4), points)
        except (ValueError, OSError) as err:  # not a notebook, or not gradable
            raise ValueError(f"{path}: {err}") from err
        converted.append((course / "source" / name / path.name, source))
    course.mkdir(parents=True, exist_ok=True)
    config = course / "nbgrader_config.py"
    if not config.exists():
        config.write_text(NBGRADER_CONFIG, encoding="utf-8")
    for target, source in converted:
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(source, target)
    return [target for target, _ in converted]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="reference chapters (default: every notebooks/[0-9]*.ipynb)")
    parser.add_argument("--course", type=Path, required=True,
                        help="the nbgrader course folder (made when missing)")
    parser.add_argument("--assignment", help="one assignment for all the given chapters "
                        "(default: one per chapter, named like the file)")
    parser.add_argument("--points", type=int, default=DEFAULT_POINTS,
                        help=f"points per exercise (default: {DEFAULT_POINTS})")
    args = parser.parse_args()
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    if not notebooks:
        parser.error("no notebooks found in notebooks/ and none given")
    try:
        written = write_course(notebooks, args.course, args.assignment, args.points)
    except ValueError as err:
        parser.error(str(err))
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""nbgrader grades exercise 14.3, whose checker sends the learner's ring to real ranks:
the submitted cell's source is what travels (as in the book), and a wrong ring costs its
points and no other exercise's."""
from __future__ import annotations

from pathlib import Path

import pytest

from teachgrad.exercises.grading import graded_exercises

pytest.importorskip("nbgrader", reason="nbgrader is in the test extra: pip install -e '.[test]'")
from test_nbgrader import course_script, nbgrader, read, scores, submit  # noqa: E402

CHAPTER_14 = Path(__file__).resolve().parents[2] / "notebooks" / "14_data_parallelism.ipynb"


@pytest.mark.slow
def test_autograde_runs_the_submitted_ring_on_the_ranks(tmp_path):
    course = tmp_path / "course"
    course_script.write_course([CHAPTER_14], course, assignment="week1", points=1)
    nbgrader(course, "generate_assignment", "week1")
    cells = read(CHAPTER_14).cells
    answers = {f"{e.grade_id}_answer": cells[e.solution_cell].source
               for e in graded_exercises(cells)}
    assert set(answers) == {"ex14_1_answer", "ex14_2_answer", "ex14_3_answer", "ex14_4_answer"}
    submit(course, "alice", answers)
    copy_not_add = "                data[r0:r1] = incoming"
    assert copy_not_add in answers["ex14_3_answer"]
    submit(course, "bob", answers | {"ex14_3_answer": answers["ex14_3_answer"].replace(
        copy_not_add, "                data[r0:r1] += incoming")})

    nbgrader(course, "autograde", "week1")
    full = {f"ex14_{i}_check": 1.0 for i in range(1, 5)}
    assert scores(course, "alice") == full
    assert scores(course, "bob") == full | {"ex14_3_check": 0.0}

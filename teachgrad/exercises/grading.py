"""The chapters' exercises as gradable items, for graders such as nbgrader.

A chapter's exercise is two code cells (see :mod:`.core`): a cell tagged
``solution`` that defines the answer, and after it a cell that calls the
chapter's checker::

    def linear_mse_grads(X, y, w, b):          # tagged "solution"
        ...
    ch03.check_linear_mse_grads(linear_mse_grads)

A grader needs three facts about each exercise: which cell holds the answer,
which cell checks it, and the exercise's number (for stable names and a score
sheet). :func:`graded_exercises` finds them in a notebook's cells, read as
plain data: nothing in a cell is run here, and a check cell must be one plain
call ``chNN.check_name(answer, ...)`` of a checker that exists in this package,
or that call's result given a name (``solved_3_4 = chNN.check_name(...)``).
The number comes from the checker itself, the one it prints in its messages.

:func:`mark_answers` marks, in a solution cell, the lines a learner writes,
the same lines the learner edition replaces by stubs
(:func:`.edition.learner_stub`): each function body after its docstring,
between two marker comments that graders replace by their own stub.
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import io
import pkgutil
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from .core import Feedback
from .edition import SOLUTION_TAG, _body_start, _functions_to_stub, _rules_to_blank

BLANK_RULE = 'rule = ""  # optional: the derivative rule, in words, once you have it'
EXERCISE_NUMBER = re.compile(r"\d+[a-z]?\.\d+")
CHECKER_PREFIX = "check_"


class ExerciseLayoutError(ValueError):
    """A notebook's exercise cells do not follow the layout graders rely on."""


@dataclass(frozen=True)
class GradedExercise:
    """One exercise of a notebook, located by cell index.

    Attributes:
        number: the exercise number its checker reports, e.g. ``"3.1"``.
        solution_cell: index of the cell tagged ``solution`` (the answer).
        check_cell: index of the cell that calls the checker.
        module: the checker's module in :mod:`teachgrad.exercises`, e.g. ``"ch03"``.
        checker: the checker's name, e.g. ``"check_linear_mse_grads"``.
        call: the check cell's call without comments, e.g.
            ``"ch03.check_linear_mse_grads(linear_mse_grads)"``.
        result_name: the name the check cell gives the checker's Feedback
            (``solved_2_4 = ch02.check_...(...)``, read by later cells), or None.
    """

    number: str
    solution_cell: int
    check_cell: int
    module: str
    checker: str
    call: str
    result_name: str | None = None

    def check_statement(self) -> str:
        """The check cell's statement, without comments."""
        if self.result_name is None:
            return self.call
        return f"{self.result_name} = {self.call}"

    @property
    def grade_id(self) -> str:
        """A name graders can use as an identifier: ``"3.1"`` becomes ``"ex3_1"``."""
        return "ex" + self.number.replace(".", "_")


# --- which cells are which ----------------------------------------------------------------

def _exercise_modules() -> frozenset[str]:
    """The checker modules of this package (``ch01`` ... ``ch15``): the only names a
    check cell may use, so that no name read from a notebook chooses an import."""
    from teachgrad import exercises

    return frozenset(info.name for info in pkgutil.iter_modules(exercises.__path__)
                     if re.fullmatch(r"ch\d+[a-z]?", info.name))


def _is_solution(cell: Mapping[str, Any]) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return cell.get("cell_type") == "code" and SOLUTION_TAG in tags


class _CheckCall(NamedTuple):
    module: str
    checker: str
    call: str
    result_name: str | None
    answers: int  # positional arguments: the learner's functions or classes


def _checker_call(source: str) -> _CheckCall | None:
    """The checker call when ``source`` is one statement ``chNN.check_x(...)`` or
    ``name = chNN.check_x(...)``, else None.

    The arguments must be names or constants (the answers under test, options);
    ``call`` is the call as Python prints it back, without comments."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if len(tree.body) != 1:
        return None
    statement, result_name = tree.body[0], None
    if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)):
        result_name = statement.targets[0].id
    elif not isinstance(statement, ast.Expr):
        return None
    call = statement.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.attr.startswith(CHECKER_PREFIX)):
        return None
    values = list(call.args) + [keyword.value for keyword in call.keywords]
    if not call.args or not all(isinstance(v, (ast.Name, ast.Constant)) for v in values):
        return None
    return _CheckCall(call.func.value.id, call.func.attr, ast.unparse(call), result_name,
                      len(call.args))


def find_checker(module: str, checker: str) -> Callable[..., Feedback]:
    """The checker ``teachgrad.exercises.<module>.<checker>``; a clear error when there is none."""
    modules = _exercise_modules()
    if module not in modules:
        raise ExerciseLayoutError(
            f"no checker module {module!r} in teachgrad.exercises (there are: "
            f"{', '.join(sorted(modules))}); a check cell calls chNN.check_<name>(answer)")
    found = getattr(importlib.import_module(f"teachgrad.exercises.{module}"), checker, None)
    if not checker.startswith(CHECKER_PREFIX) or not callable(found):
        raise ExerciseLayoutError(f"teachgrad.exercises.{module} has no checker {checker!r}")
    return found


def exercise_number(checker: Callable[..., Feedback], answers: int = 1) -> str:
    """The number a checker gives its exercise (``"3.1"``), asked without running any test.

    Given ``None`` for each of its ``answers`` (nothing filled in), every checker
    answers "not solved yet" at once, naming its exercise; its printed message
    is swallowed.
    """
    name = getattr(checker, "__qualname__", repr(checker))
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "cuda runs in the simulator": not news here
            feedback = checker(*[None] * answers)
    except Exception as err:
        raise ExerciseLayoutError(f"{name}, given nothing filled in, raised "
                                  f"{type(err).__name__}: {err}; a checker should answer "
                                  "'not solved yet' with its Feedback") from err
    if not isinstance(feedback, Feedback):
        raise ExerciseLayoutError(f"{name} returned {type(feedback).__name__}, not a Feedback")
    if not EXERCISE_NUMBER.fullmatch(feedback.exercise):
        raise ExerciseLayoutError(f"{name} reports exercise {feedback.exercise!r}; "
                                  "expected a number such as '3.1' or '8b.2'")
    return feedback.exercise


def graded_exercises(cells: Sequence[Mapping[str, Any]]) -> list[GradedExercise]:
    """Every exercise in a notebook's cells (as nbformat gives them), in order.

    Each ``solution`` cell is paired with the first code cell after it that calls
    a checker, before the next ``solution`` cell. Raises
    :class:`ExerciseLayoutError` naming the cell when one has no check, or when
    two exercises share a number.
    """
    exercises: list[GradedExercise] = []
    for index, cell in enumerate(cells):
        if not _is_solution(cell):
            continue
        check_index, found = _next_check(cells, index)
        number = exercise_number(find_checker(found.module, found.checker), found.answers)
        if any(e.number == number for e in exercises):
            raise ExerciseLayoutError(f"exercise {number} is checked twice (cell {check_index})")
        exercises.append(GradedExercise(number, index, check_index, found.module, found.checker,
                                        found.call, found.result_name))
    return exercises


def _next_check(cells: Sequence[Mapping[str, Any]], solution: int) -> tuple[int, _CheckCall]:
    for index in range(solution + 1, len(cells)):
        cell = cells[index]
        if _is_solution(cell):
            break
        found = cell.get("cell_type") == "code" and _checker_call(cell.get("source", ""))
        if found:
            return index, found
    raise ExerciseLayoutError(
        f"the solution cell at index {solution} has no check after it: the next code cells "
        "should include one call chNN.check_<name>(answer) before the next solution cell")


# --- which lines the learner writes ---------------------------------------------------------

def mark_answers(source: str, begin: str = "### BEGIN SOLUTION",
                 end: str = "### END SOLUTION") -> str:
    """``source`` with each function body (after its docstring) between ``begin`` and ``end``.

    These are the lines the learner edition replaces by a stub; a class's
    ``rule = "..."`` (the derivative, which would give the answer away) is
    emptied as there. Top-level statements (imports, constants) stay outside.
    """
    lines = source.splitlines()
    tree = ast.parse(source)
    for assign in _rules_to_blank(tree):  # same line count: later line numbers stay valid
        blank = " " * assign.col_offset + BLANK_RULE
        lines[assign.lineno - 1:assign.end_lineno] = [blank] + [""] * (assign.end_lineno - assign.lineno)
    # From the bottom up, so that earlier line numbers stay valid.
    for fn in sorted(_functions_to_stub(tree), key=lambda f: f.lineno, reverse=True):
        start, stop = _body_start(fn), fn.end_lineno
        indent = " " * fn.body[0].col_offset
        body = lines[start:stop]
        if fn.body[0].lineno == fn.lineno:  # `def f(x): return x` on one line
            head = lines[fn.lineno - 1]
            indent = " " * (fn.col_offset + 4)
            lines[fn.lineno - 1] = head[:fn.body[0].col_offset].rstrip()
            start, body = fn.lineno, [indent + head[fn.body[0].col_offset:]] + lines[fn.lineno:stop]
        lines[start:stop] = [indent + begin, *body, indent + end]
    return "\n".join(lines)

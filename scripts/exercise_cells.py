"""The exercises of a chapter as cells: each solution cell, the checker cell after it,
and the code cells that set the chapter up before them.

An exercise is a code cell tagged ``solution`` followed by a cell that calls a checker,
``chNN.check_<name>(...)`` (see :mod:`teachgrad.exercises.core`). The exercise is named
by that call, e.g. ``ch13.check_promote``: stable while cells move or are renumbered.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

SOLUTION_TAG = "solution"  # the tag of teachgrad.exercises.edition, read without importing it
CHECKER_CALL = re.compile(r"\b(ch\w+)\.(check_\w+)\s*\(")
RECORDER = "__record_feedback__"


@dataclass(frozen=True)
class Exercise:
    """One exercise of a notebook: where its cells are and what they hold."""

    notebook: str         # file stem, e.g. "13_hyperparameter_search"
    name: str             # the checker, e.g. "ch13.check_promote"
    cell_index: int       # index of the solution cell among the notebook's code cells
    solution: str         # the reference solution cell
    checker_cell: str     # the cell that calls the checker


def code_cells(path: Path) -> list[nbformat.NotebookNode]:
    return [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]


def exercises(path: Path) -> list[Exercise]:
    """The exercises of one notebook, in order."""
    cells = code_cells(path)
    found = []
    for index, cell in enumerate(cells[:-1]):
        if SOLUTION_TAG not in cell.metadata.get("tags", []):
            continue
        checker_cell = cells[index + 1].source
        call = CHECKER_CALL.search(checker_cell)
        if call is None:
            raise ValueError(f"{path.name}: the cell after solution cell {index} calls no "
                             f"chNN.check_* checker; an exercise is a solution cell and its check")
        found.append(Exercise(path.stem, f"{call.group(1)}.{call.group(2)}", index,
                              cell.source, checker_cell))
    return found


class _RecordCheckerCalls(ast.NodeTransformer):
    """``chNN.check_x(f)`` becomes ``__record_feedback__(chNN.check_x(f))``."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr.startswith("check_")
                and isinstance(func.value, ast.Name) and re.fullmatch(r"ch\w+", func.value.id)):
            return ast.Call(ast.Name(RECORDER, ast.Load()), [node], [])
        return node


def recording_checker_cell(source: str) -> str:
    """The checker cell with every checker's returned Feedback handed to ``__record_feedback__``
    (what the learner sees is unchanged: the checker still prints its message)."""
    tree = _RecordCheckerCalls().visit(ast.parse(source))
    return ast.unparse(ast.fix_missing_locations(tree))

"""The learner edition (scripts/make_learner.py): solutions become stubs, outputs go."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))


def load_make_learner():
    spec = importlib.util.spec_from_file_location("make_learner", ROOT / "scripts" / "make_learner.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_learner = load_make_learner()

SOLUTION = '''import math

SCALE = 3


def scaled_hypot(a, b):
    """Length of (a, b), times SCALE."""
    squared = a * a + b * b
    return SCALE * math.sqrt(squared)


class Counter:
    """Counts calls."""

    def __init__(self):
        self.calls = 0

    def tick(self):
        self.calls += 1
        return self.calls
'''


def body_lines(source: str) -> list[str]:
    """The statements inside every function body (docstrings excluded), stripped."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                body = body[1:]
            for statement in body:
                found += [line.strip() for line in lines[statement.lineno - 1:statement.end_lineno]]
    return [line for line in found if line]


@pytest.fixture
def synthetic_notebook(tmp_path: Path) -> Path:
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Exercise\nWrite `scaled_hypot`."),
        nbformat.v4.new_code_cell(SOLUTION, metadata={"tags": ["solution"]}),
        nbformat.v4.new_code_cell("print(SCALE)", outputs=[nbformat.v4.new_output("stream", text="3\n")],
                                  execution_count=2),
    ])
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    path = tmp_path / "01_exercise.ipynb"
    nbformat.write(notebook, path)
    return path


def test_solution_bodies_become_stubs(synthetic_notebook: Path, tmp_path: Path):
    [written] = make_learner.make_learner_edition([synthetic_notebook], tmp_path / "learner")
    assert written == tmp_path / "learner" / "01_exercise.ipynb"
    learner = nbformat.read(written, as_version=4)
    stubbed = learner.cells[1].source

    for line in body_lines(SOLUTION):
        assert line not in stubbed, f"solution line survived: {line!r}"
    # signatures, docstrings and top-level statements stay
    for kept in ("import math", "SCALE = 3", "def scaled_hypot(a, b):",
                 '"""Length of (a, b), times SCALE."""', "class Counter:", "def tick(self):"):
        assert kept in stubbed
    assert stubbed.count("raise NotImplementedError") == 3
    assert learner.cells[1].metadata["tags"] == ["exercise"]


def test_learner_edition_clears_outputs_and_keeps_other_cells(synthetic_notebook: Path, tmp_path: Path):
    [written] = make_learner.make_learner_edition([synthetic_notebook], tmp_path / "learner")
    learner = nbformat.read(written, as_version=4)
    reference = nbformat.read(synthetic_notebook, as_version=4)
    assert [c.source for c in learner.cells[::2]] == [c.source for c in reference.cells[::2]]
    assert all(c.outputs == [] and c.execution_count is None for c in learner.cells if c.cell_type == "code")
    assert "widgets" not in learner.metadata


def test_learner_edition_runs_and_stubs_raise(synthetic_notebook: Path, tmp_path: Path):
    [written] = make_learner.make_learner_edition([synthetic_notebook], tmp_path / "learner")
    learner = nbformat.read(written, as_version=4)
    learner.cells.append(nbformat.v4.new_code_cell(
        "try:\n    scaled_hypot(3, 4)\nexcept NotImplementedError as stub:\n    print('stub:', stub)"))
    NotebookClient(learner, kernel_name="python3", timeout=60).execute()
    assert learner.cells[2].outputs[0].text == "3\n"  # the notebook ran past the stubbed cell
    assert learner.cells[3].outputs[0].text == "stub: fill in scaled_hypot\n"


def test_reference_chapters_have_no_solution_code_in_learner_edition(tmp_path: Path):
    assert REFERENCE_NOTEBOOKS, "no chapter notebooks in notebooks/"
    written = make_learner.make_learner_edition(REFERENCE_NOTEBOOKS, tmp_path / "learner")
    solution_cells = 0
    for reference_path, learner_path in zip(REFERENCE_NOTEBOOKS, written, strict=True):
        reference = nbformat.read(reference_path, as_version=4)
        learner = nbformat.read(learner_path, as_version=4)
        assert len(learner.cells) == len(reference.cells)
        for before, after in zip(reference.cells, learner.cells, strict=True):
            if "solution" not in before.metadata.get("tags", []):
                assert after.source == before.source
                continue
            solution_cells += 1
            for line in body_lines(before.source):
                assert line not in body_lines(after.source), \
                    f"{reference_path.name}: solution line {line!r} kept in the learner edition"
            assert "raise NotImplementedError" in after.source, f"{reference_path.name}: no stub"
            assert "solution" not in after.metadata.get("tags", [])
        assert all(not c.get("outputs") for c in learner.cells if c.cell_type == "code")
    assert solution_cells > 0, "no cell tagged `solution` in the chapters"

"""The chapters' own solution cells, for the exercise tests: find one, and run it."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import nbformat

from teachgrad.exercises.edition import SOLUTION_TAG

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def solution_source(notebook: str, name: str) -> str:
    """The source of the ``solution`` cell of ``notebook`` (a file name, with or without
    ``.ipynb``) that defines the function or class ``name`` at its top level."""
    path = NOTEBOOKS / (notebook if notebook.endswith(".ipynb") else f"{notebook}.ipynb")
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code" and SOLUTION_TAG in cell.metadata.get("tags", []):
            defined = {n.name for n in ast.parse(cell.source).body
                       if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            if name in defined:
                return cell.source
    raise LookupError(f"no solution cell defines {name} in {path.name}")


def define(source: str, name: str, namespace: dict[str, Any]) -> Any:
    """Run a cell's source in (a copy of) ``namespace``, the names the chapter set up,
    and return what it defined as ``name``."""
    namespace = dict(namespace)
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace[name]


def make_learner():
    """scripts/make_learner.py as a module (a script, not part of the package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_learner", NOTEBOOKS.parent / "scripts"
                                                  / "make_learner.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

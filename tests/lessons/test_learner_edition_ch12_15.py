"""The learner edition of chapters 12-15 runs where `make lab` opens it.

`make lab` writes the learner edition into build/learner/ and starts JupyterLab there,
so a chapter that reads a file by a path relative to notebooks/ crashes. Each chapter is
written into a fresh folder under build/ and run from it, top to bottom: no cell may
raise, and every exercise check says "not solved yet" (its solution is a stub).
"""
from __future__ import annotations

import importlib.util
import re
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ["12_instrumentation", "13_hyperparameter_search", "14_data_parallelism",
            "15_the_ecosystem"]


def make_learner():
    spec = importlib.util.spec_from_file_location("make_learner", ROOT / "scripts" / "make_learner.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def learner_folder():
    """A folder beside build/learner/, as deep in the checkout as the one `make lab` opens."""
    (ROOT / "build").mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="learner-check-", dir=ROOT / "build"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_learner_edition_runs_from_build_learner(chapter, learner_folder):
    [written] = make_learner().make_learner_edition([ROOT / "notebooks" / f"{chapter}.ipynb"],
                                                     learner_folder)
    learner = nbformat.read(written, as_version=4)
    NotebookClient(learner, kernel_name="python3", timeout=600,
                   resources={"metadata": {"path": str(learner_folder)}}).execute()
    errors = [o for c in learner.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors, errors[0]["evalue"]
    checks = [c for c in learner.cells
              if c.cell_type == "code" and re.match(r"ch\d+\.check_", c.source)]
    assert len(checks) == 3
    for cell in checks:
        said = "".join(o.get("text", "") for o in cell.outputs)
        assert "not solved yet" in said, f"{cell.source!r} printed {said!r}"

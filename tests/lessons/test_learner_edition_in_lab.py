"""Every chapter's learner edition runs where ``make lab`` opens it.

``make lab`` writes the learner edition into ``build/learner/`` and starts JupyterLab
there, so a chapter's relative paths resolve from that folder, not from
``notebooks/``. Each chapter is written into a sibling of ``build/learner/`` (the same
depth, so ``..`` means the same thing) and run top to bottom in a kernel whose working
directory is that folder, as JupyterLab's would be: no cell may fail, and every
exercise check says "not solved yet" (the only thing a fresh learner edition lacks is
the learner's answers).
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from notebook_solutions import make_learner

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
#: A call of a chapter's checker, e.g. ``ch08b.check_histogram(...)``.
EXERCISE_CHECK = re.compile(r"\bch\d+\w*\.check_\w+\(")


@pytest.fixture(scope="module")
def lab_folder():
    """A folder beside build/learner/, removed afterwards."""
    folder = ROOT / "build" / f"learner-under-test-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_learner_edition_runs_from_the_lab_folder(chapter: Path, lab_folder: Path):
    [written] = make_learner().make_learner_edition([chapter], lab_folder)
    learner = nbformat.read(written, as_version=4)
    client = NotebookClient(learner, kernel_name="python3", timeout=600,
                            resources={"metadata": {"path": str(lab_folder)}})
    try:
        client.execute()
    except CellExecutionError as error:  # name the chapter and the first lines of the error
        pytest.fail(f"{chapter.name}, run from {lab_folder.relative_to(ROOT)}: a cell failed:\n"
                    + "\n".join(str(error).splitlines()[:40]))
    checks = [c for c in learner.cells if c.cell_type == "code" and EXERCISE_CHECK.search(c.source)]
    exercises = [c for c in nbformat.read(chapter, as_version=4).cells
                 if "solution" in c.metadata.get("tags", [])]
    assert len(checks) == len(exercises), f"{chapter.name}: {len(exercises)} solution cells, " \
                                          f"{len(checks)} checks"
    for cell in checks:
        printed = "".join(output.get("text", "") for output in cell.outputs)
        assert "not solved yet" in printed, f"{chapter.name}: {cell.source!r} printed {printed!r}"
    # a picture of a launch whose kernel is still a stub says what to do instead
    pictures = [c for c in learner.cells if c.cell_type == "code" and "AccessMap.launch(" in c.source]
    assert all("fill in" in str(c.outputs) for c in pictures), chapter.name

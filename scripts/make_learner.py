"""Write the learner edition of the chapters: reference solutions replaced by stubs.

    .venv/bin/python scripts/make_learner.py                  # notebooks/*.ipynb -> build/learner/
    .venv/bin/python scripts/make_learner.py notebooks/03_autograd.ipynb --out /tmp/learner

The notebooks in notebooks/ are the reference edition. The convention:

* an exercise's answer sits in a code cell tagged ``solution``;
* in the learner edition that cell keeps every ``def``/``class`` line and each
  docstring, and each function body becomes ``raise NotImplementedError(...)``
  (the rule itself is :func:`teachgrad.exercises.edition.learner_stub`, next to the
  checkers that recognise the stub as "not solved yet"); the tag becomes ``exercise``;
* other statements in a solution cell (imports, constants) stay as they are, so
  the learner edition still runs top to bottom;
* every output and the stored widget state are cleared.

It is an nbconvert pipeline: a preprocessor stubs the solution cells, nbconvert's
``ClearOutputPreprocessor`` clears outputs, the ``NotebookExporter`` writes the result.
Tests call :func:`make_learner_edition` directly.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

import nbformat
from nbconvert.exporters import NotebookExporter
from nbconvert.preprocessors import ClearOutputPreprocessor, Preprocessor
from traitlets.config import Config

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the reference notebooks' own teachgrad, installed or not

from teachgrad.exercises.edition import SOLUTION_TAG, learner_stub  # noqa: E402

DEFAULT_OUT = ROOT / "build" / "learner"


class SolutionStubPreprocessor(Preprocessor):
    """Replace the body of every function in a ``solution`` cell by a stub."""

    def preprocess_cell(self, cell, resources, index):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.cell_type == "code" and SOLUTION_TAG in tags:
            cell.source = learner_stub(cell.source)
            # the book's "Show solution" toggle has nothing to hide here
            cell.metadata["tags"] = [tag for tag in tags
                                     if tag not in (SOLUTION_TAG, "hide-input")] + ["exercise"]
            cell.metadata.pop("mystnb", None)
        return cell, resources

    def preprocess(self, nb, resources):
        nb, resources = super().preprocess(nb, resources)
        nb.metadata.pop("widgets", None)  # widget state belongs to the cleared outputs
        return nb, resources


def learner_exporter() -> NotebookExporter:
    """The nbconvert exporter that turns a reference notebook into its learner edition."""
    config = Config()
    config.ClearOutputPreprocessor.remove_metadata_fields = {"collapsed", "scrolled", "execution"}
    exporter = NotebookExporter(config=config)
    exporter.register_preprocessor(SolutionStubPreprocessor(), enabled=True)
    exporter.register_preprocessor(ClearOutputPreprocessor(config=config), enabled=True)
    return exporter


def make_learner_edition(notebooks: Iterable[Path], out_dir: Path) -> list[Path]:
    """Write the learner edition of each notebook into ``out_dir``; returns the new paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    exporter = learner_exporter()
    written = []
    for source in notebooks:
        body, _ = exporter.from_notebook_node(nbformat.read(source, as_version=4))
        target = out_dir / Path(source).name
        target.write_text(body, encoding="utf-8")
        written.append(target)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="reference notebooks (default: every notebooks/[0-9]*.ipynb)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"output folder (default: {DEFAULT_OUT.relative_to(ROOT)})")
    args = parser.parse_args()
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    if not notebooks:
        parser.error("no notebooks found in notebooks/ and none given")
    for path in make_learner_edition(notebooks, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

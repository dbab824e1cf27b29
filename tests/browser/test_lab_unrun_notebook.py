"""A chapter opened in JupyterLab *before* its cells are run shows each widget's picture.

JupyterLab treats a notebook it has not run itself as untrusted and then uses
only safe renderers: not the widget view and not SVG, so a widget's stored
output used to show as its one-line repr (``RaceView(children=(HBox(...``).
The widgets now store a sanitisable HTML picture too; here chromium opens the
notebooks with stored outputs, runs nothing, and looks for the pictures.
Screenshots land in test-artifacts/<test name>/.
"""
from __future__ import annotations

import json
import shutil

import nbformat
from browser_harness import ROOT

#: A chapter with stored widget outputs, and the widgets it shows.
CHAPTERS = {"07_reductions_and_shared_memory.ipynb": "RaceView",
            "06_gpu_programming_model.ipynb": "ThreadMap",
            "08b_kernel_practice.ipynb": "AccessMap"}

WIDGET_CELLS = [
    "import teachgrad as tg\nfrom teachgrad.widgets import GraphView, BackpropStepper, ThreadMap",
    "x = tg.tensor(3.0, requires_grad=True)\ny = x * x * 2\nGraphView(y)",
    "BackpropStepper(y)",
    "ThreadMap(10, blocks=2, threads_per_block=4)",
]

# Outputs far down a long notebook are not laid out (JupyterLab skips what is off screen),
# so pictures are counted by their source; the first one is scrolled to and must decode.
OUTPUTS = """() => [...document.querySelectorAll('.jp-OutputArea-output')].map(o => ({
    text: o.textContent.trim().slice(0, 80),
    images: [...o.querySelectorAll('img')].filter(
        i => i.getAttribute('src').startsWith('data:image/svg+xml')).length,
}))"""


def open_without_running(page, lab, path: str) -> list[dict]:
    page.set_default_timeout(120_000)
    page.goto(f"{lab.url}/lab/tree/{path}")
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
        f" && window.jupyterapp.shell.currentWidget.context.path === {json.dumps(path)}")
    first = page.locator(".jp-OutputArea-output img").first
    first.wait_for(state="attached")
    first.evaluate("i => i.scrollIntoView({block: 'center'})")
    page.wait_for_function("i => i.complete && i.naturalWidth > 0", arg=first.element_handle())
    page.wait_for_timeout(500)  # let every stored output render
    return page.evaluate(OUTPUTS)


def executed_widget_notebook(path) -> None:
    """A small notebook with one of each main widget, executed and saved with its outputs."""
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in WIDGET_CELLS])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    NotebookClient(notebook, kernel_name="python3", timeout=300,
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    nbformat.write(notebook, path)


def test_stored_widgets_show_pictures_before_running(jupyterlab, page_and_log, screenshot):
    page, log = page_and_log
    executed_widget_notebook(jupyterlab.root_dir / "widgets_unrun.ipynb")
    outputs = open_without_running(page, jupyterlab, "widgets_unrun.ipynb")
    screenshot(page, "widgets")
    assert len(outputs) == 3, outputs
    for output in outputs:
        assert output["images"] == 1, outputs
        assert "children=" not in output["text"] and "View(" not in output["text"], outputs
        assert "run the cell for its controls" in output["text"]
    assert not log.page_errors, log.page_errors


def test_a_chapter_opened_before_running_shows_its_widget_pictures(jupyterlab, page_and_log,
                                                                   screenshot):
    page, log = page_and_log
    for chapter, widget in CHAPTERS.items():
        shutil.copy(ROOT / "notebooks" / chapter, jupyterlab.root_dir / chapter)
        outputs = open_without_running(page, jupyterlab, chapter)
        screenshot(page, chapter.split("_")[0])
        assert any(o["images"] for o in outputs), outputs
        assert not any(o["text"].startswith(f"{widget}(") for o in outputs), outputs
    assert not log.page_errors, log.page_errors

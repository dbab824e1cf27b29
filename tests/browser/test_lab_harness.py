"""The JupyterLab harness itself: start the server, open a notebook, run it, read the output."""
from __future__ import annotations

import nbformat
from browser_harness import run_notebook_in_lab


def test_run_notebook_in_lab_shows_cell_output(jupyterlab, page_and_log, screenshot):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1 + 1)")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, jupyterlab.root_dir / "two.ipynb")
    page, log = page_and_log

    run_notebook_in_lab(page, jupyterlab, "two.ipynb")

    output = page.locator(".jp-OutputArea-output").first
    output.wait_for(state="visible")
    assert output.inner_text().strip() == "2"
    screenshot(page, "two_in_lab")
    assert not log.page_errors, log.page_errors

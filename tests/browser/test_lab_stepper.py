"""The backprop stepper in a real JupyterLab: press *step* and the highlight moves.

JupyterLab runs on loopback with no token; Debian's chromium, driven by
Playwright, opens a small notebook, runs it, and clicks the widget's buttons.
Screenshots land in test-artifacts/test_stepper_highlight_moves_in_jupyterlab/.
"""
from __future__ import annotations

import json
import re

from browser_harness import run_notebook_in_lab

NOTEBOOK = "stepper.ipynb"

CELLS = [
    "import teachgrad as tg\n"
    "from teachgrad.widgets import BackpropStepper",
    "x = tg.tensor([1.0, 2.0], requires_grad=True)\n"
    "w = tg.tensor([3.0, 4.0], requires_grad=True)\n"
    "loss = (x * x * w).sum()\n"
    "stepper = BackpropStepper(loss, names={'x': x, 'w': w, 'loss': loss})\n"
    "stepper",
]


def write_notebook(path) -> None:
    cells = [{"cell_type": "code", "metadata": {}, "source": src, "outputs": [],
              "execution_count": None} for src in CELLS]
    notebook = {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                            "language": "python"}}}
    path.write_text(json.dumps(notebook))


def graph_state(page) -> dict:
    """What the stepper's graph says about itself in the DOM."""
    return page.evaluate("""() => {
        const div = document.querySelector('.teachgrad-graph');
        const red = [...div.querySelectorAll('g.node')].filter(
            g => [...g.querySelectorAll('ellipse, polygon, path')].some(
                s => s.getAttribute('stroke') === '#d62728'));
        return {step: div.dataset.step, highlighted: div.dataset.highlighted || null,
                red: red.map(g => g.querySelector('title').textContent)};
    }""")


def test_stepper_highlight_moves_in_jupyterlab(jupyterlab, page_and_log, screenshot):
    page, log = page_and_log
    write_notebook(jupyterlab.root_dir / NOTEBOOK)
    run_notebook_in_lab(page, jupyterlab, NOTEBOOK)

    graph = page.locator(".teachgrad-graph svg")
    graph.wait_for(state="visible")
    before = graph_state(page)
    assert before == {"step": "0", "highlighted": None, "red": []}
    screenshot(page, "0-before")

    step_button = page.locator("button.widget-button", has_text=re.compile(r"^\s*step\s*$"))
    step_button.click()
    page.locator('.teachgrad-graph[data-step="1"]').wait_for()
    first = graph_state(page)
    assert first["highlighted"] is not None
    assert first["red"] == [first["highlighted"]]  # the node drawn red is the one announced
    assert "SumBackward" in page.locator(".teachgrad-step").inner_text()
    screenshot(page, "1-first-step")

    step_button.click()
    page.locator('.teachgrad-graph[data-step="2"]').wait_for()
    second = graph_state(page)
    assert second["highlighted"] not in (None, first["highlighted"])
    assert second["red"] == [second["highlighted"]]
    assert "MulBackward" in page.locator(".teachgrad-step").inner_text()
    screenshot(page, "2-second-step")

    page.locator("button.widget-button", has_text=re.compile(r"^\s*back\s*$")).click()
    page.locator('.teachgrad-graph[data-step="1"]').wait_for()
    assert graph_state(page) == first
    assert not log.page_errors, log.page_errors

"""A profile's trace in the vendored speedscope: from a served page and in a real JupyterLab.

The trace is exported by ``tg.profiler``; the viewer is ``widgets/vendor/speedscope``
inlined by ``teachgrad.widgets.profile_view``. The pages may reach loopback only, so
these tests also show that the viewer needs no network. speedscope's "Sandwich" view
lists every name of the selected lane as text, which the tests read.
Screenshots land in test-artifacts/<test name>/.
"""
from __future__ import annotations

import json

from browser_harness import run_notebook_in_lab, serve_directory

import teachgrad as tg
from teachgrad.profiler import profile, record_function
from teachgrad.widgets.profile_view import write_viewer

OPS = ("training_step", "Linear", "Tanh", "LinearBackward", "TanhBackward")


def profiled_step():
    model = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 1))
    with profile() as prof:
        with record_function("training_step"):
            model(tg.randn(2, 3)).sum().backward()
    return prof


def sandwich_text(frame) -> str:
    frame.wait_for_function("() => document.body.innerText.includes('Symbol Name')", timeout=60_000)
    return frame.inner_text("body")


def test_exported_trace_opens_in_the_vendored_viewer(tmp_path, page_and_log, screenshot):
    prof = profiled_step()
    trace = tmp_path / "step.json"
    prof.export_chrome_trace(str(trace))
    write_viewer(str(trace), tmp_path / "step.html", view="sandwich")
    page, log = page_and_log
    with serve_directory(tmp_path) as url:
        page.goto(f"{url}/step.html")
        text = sandwich_text(page)
        screenshot(page, "sandwich")
    for name in OPS:
        assert name in text, name
    assert "Welcome to" not in text  # (speedscope's landing page: the trace did not load)
    assert not log.page_errors and not log.console_errors, (log.page_errors, log.console_errors)
    assert not log.blocked_requests and not log.failed_requests, log.blocked_requests


CELLS = [
    "import teachgrad as tg\n"
    "from teachgrad.profiler import profile, record_function\n"
    "from teachgrad.widgets import ProfileView",
    "model = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 1))\n"
    "with profile() as prof:\n"
    "    with record_function('training_step'):\n"
    "        model(tg.randn(2, 3)).sum().backward()\n"
    "ProfileView(prof, row_limit=5, view='sandwich')",
]


def test_profile_view_shows_table_and_trace_in_jupyterlab(jupyterlab, page_and_log, screenshot):
    cells = [{"cell_type": "code", "metadata": {}, "source": src, "outputs": [],
              "execution_count": None} for src in CELLS]
    notebook = {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                            "language": "python"}}}
    (jupyterlab.root_dir / "profile.ipynb").write_text(json.dumps(notebook))
    page, log = page_and_log
    run_notebook_in_lab(page, jupyterlab, "profile.ipynb")
    table = page.locator("table.teachgrad-profile")
    table.wait_for(state="visible")
    assert "training_step" in table.inner_text()
    page.locator("iframe.teachgrad-speedscope").wait_for(state="attached")
    frame = next(f for f in page.frames if f.url.startswith("about:srcdoc"))
    text = sandwich_text(frame)
    screenshot(page, "profile-view")
    for name in OPS:
        assert name in text, name
    assert not log.page_errors, log.page_errors
    assert not log.blocked_requests, log.blocked_requests

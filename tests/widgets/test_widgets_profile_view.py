"""ProfileView and the vendored speedscope: the files are the ones recorded, the page is whole.

The browser test (tests/browser/test_profile_viewer.py) opens the page in chromium.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

import teachgrad as tg
from teachgrad.profiler import profile, record_function
from teachgrad.widgets import ProfileView
from teachgrad.widgets.profile_view import VENDOR, embed, table_html, viewer_page, write_viewer


@pytest.fixture(scope="module")
def prof():
    with profile() as p:
        with record_function("outer"):
            (tg.ones(3, requires_grad=True) * 2.0).sum().backward()
    return p


def test_vendored_files_match_their_recorded_sha256():
    recorded = dict(reversed(line.split("  ./")) for line in
                    (VENDOR / "VENDORED.md").read_text().splitlines() if re.match(r"^[0-9a-f]{64}  ", line))
    present = {p.name for p in VENDOR.iterdir() if p.name != "VENDORED.md"}
    assert set(recorded) == present
    for name, digest in recorded.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name


def test_viewer_page_holds_the_trace_and_fetches_nothing(prof, tmp_path):
    page = viewer_page(prof, title="step", view="sandwich")
    data = re.search(r'var teachgradTrace = "([A-Za-z0-9+/=]*)";', page).group(1)
    assert json.loads(base64.b64decode(data)) == prof.chrome_trace()
    assert not re.search(r'<(script|link)[^>]+(src|href)=', page)  # everything inline
    assert "woff2;base64," in page  # the font too
    path = write_viewer(prof, tmp_path / "t.html")
    assert path.read_text().startswith("<!DOCTYPE html>")
    frame = embed(prof)
    assert frame.startswith('<iframe class="teachgrad-speedscope" srcdoc="') and "<script>" not in frame


def test_viewer_reads_an_exported_file_and_refuses_other_things(prof, tmp_path):
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    assert viewer_page(str(trace)) == viewer_page(json.loads(trace.read_text()))
    with pytest.raises(TypeError, match="traceEvents"):
        viewer_page({"events": []})
    with pytest.raises(ValueError, match="view must be one of"):
        viewer_page(prof, view="flame")


def test_profile_view_table_follows_its_controls(prof):
    view = ProfileView(prof, row_limit=2, sort_by="count")
    assert view.table.value.count("<tr>") == 1 + 2
    view.rows.value = 3
    assert view.table.value.count("<tr>") == 1 + 3
    view.sort_by.value = "cpu_time_total"
    first = re.search(r"<tbody><tr><td style='text-align:left'>([^<]+)<", view.table.value).group(1)
    assert first == "outer"
    assert table_html(prof, "cpu_time_total", 1).count("<tr>") == 2
    assert "teachgrad-speedscope" in view.viewer.value
    assert "run the cell" in view._repr_mimebundle_()["text/html"]


def test_profile_view_refuses_bad_arguments(prof):
    with pytest.raises(TypeError, match="finished tg.profiler.profile"):
        ProfileView("trace.json")
    with pytest.raises(ValueError, match="sort_by"):
        ProfileView(prof, sort_by="time")
    with pytest.raises(ValueError, match="row_limit"):
        ProfileView(prof, row_limit=0)

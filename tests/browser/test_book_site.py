"""The built book in a real browser: pages load offline, links and images work,
no JavaScript errors, graph pictures and widgets are visible.

``test_book_pipeline_draws_widgets_offline`` checks the machinery on a one-page book
made here (a stored widget, an SVG output, maths); ``test_every_book_page_*`` checks
the real book built from notebooks/.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from browser_harness import PageLog, build_book, copy_book_config, crawl_site, serve_directory
from nbclient import NotebookClient

# Console errors that are not the site's fault: {text the error contains: why it is
# allowed}. Empty today. Keep it short: an entry hides every error with that text.
CONSOLE_ERROR_ALLOW_LIST: dict[str, str] = {}


def unexplained_errors(log: PageLog) -> list[str]:
    """Console and page errors that no allow-list entry explains."""
    errors = log.console_errors + log.page_errors
    return [e for e in errors if not any(allowed in e for allowed in CONSOLE_ERROR_ALLOW_LIST)]


def assert_site_healthy(report, log: PageLog) -> None:
    assert report.pages, "no page was crawled"
    assert not report.broken_links, f"broken internal links: {report.broken_links}"
    assert not report.broken_images, f"images that did not load: {report.broken_images}"
    assert not report.duplicate_scripts, f"scripts loaded twice: {report.duplicate_scripts}"
    assert not log.blocked_requests, f"pages tried to reach the network: {log.blocked_requests}"
    assert not log.failed_requests, f"requests that failed: {log.failed_requests}"
    assert not unexplained_errors(log), f"JavaScript errors: {unexplained_errors(log)}"


def write_demo_notebook(path: Path) -> None:
    """A one-cell-per-feature notebook, executed so it stores outputs and widget state."""
    cells = [
        nbformat.v4.new_markdown_cell("# Demo\n\nThe area of a circle is $\\pi r^2$. "
                                      "ONNX's site is https://onnx.ai/."),
        nbformat.v4.new_code_cell("import ipywidgets\nipywidgets.IntSlider(value=3, description='steps')"),
        nbformat.v4.new_code_cell(
            "from IPython.display import SVG\n"
            "SVG('<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"60\" height=\"40\">"
            "<rect width=\"60\" height=\"40\" fill=\"teal\"/></svg>')"),
        nbformat.v4.new_code_cell("ipywidgets.Button(description='step', icon='play')"),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    NotebookClient(notebook, kernel_name="python3", store_widget_state=True).execute()
    nbformat.write(notebook, path)


@pytest.fixture(scope="module")
def demo_site(tmp_path_factory: pytest.TempPathFactory):
    book = copy_book_config(tmp_path_factory.mktemp("demo-book"))
    (book / "intro.md").write_text("# Demo book\n\n```{tableofcontents}\n```\n")
    (book / "notebooks").mkdir()
    write_demo_notebook(book / "notebooks" / "01_demo.ipynb")
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: notebooks/01_demo\n")
    html_dir = build_book(book, book / "out")
    with serve_directory(html_dir) as url:
        yield url, html_dir


def test_book_pipeline_draws_widgets_offline(demo_site, page_and_log, screenshot):
    url, html_dir = demo_site
    page, log = page_and_log
    report = crawl_site(page, url, html_dir)
    assert "notebooks/01_demo.html" in report.pages
    page.goto(url + "notebooks/01_demo.html")
    slider = page.locator(".jupyter-widgets.widget-slider")
    slider.wait_for(state="visible")
    assert page.locator("button.jupyter-button", has_text="step").is_visible()
    assert page.locator("mjx-container svg").first.is_visible()  # maths typeset from the vendored MathJax
    # a bare address in the text is a link (MyST's linkify), without the full stop after it
    assert page.locator('a[href="https://onnx.ai/"]').count() == 1
    note = page.locator(".teachgrad-static-note").first
    assert note.is_visible() and "work when you run this chapter in JupyterLab" in note.inner_text()
    screenshot(page, "demo_page")
    assert report.pages_with_svg == ["notebooks/01_demo.html"]
    assert report.pages_with_widget == ["notebooks/01_demo.html"]
    assert_site_healthy(report, log)


def test_every_book_page_loads_with_working_links(book_site, page_and_log, screenshot):
    url, html_dir = book_site
    page, log = page_and_log
    report = crawl_site(page, url, html_dir)
    chapters = [name for name in report.pages if name.startswith("notebooks/")]
    assert len(chapters) >= 9, f"chapters reached from the index: {chapters}"
    for name in chapters:
        page.goto(url + name)
        page.wait_for_timeout(1000)
        screenshot(page, Path(name).stem)
    page.goto(url + "notebooks/15_the_ecosystem.html")
    assert page.locator('a[href="https://onnx.ai/"]').count() >= 1, "bare addresses are not links"
    assert_site_healthy(report, log)


def test_book_shows_graph_pictures_and_widgets(book_site, page_and_log, screenshot):
    url, html_dir = book_site
    page, _ = page_and_log
    report = crawl_site(page, url, html_dir)
    assert report.pages_with_svg, "no page shows an SVG picture (e.g. a graph view) in an output"
    assert report.pages_with_widget, "no page shows a widget drawn from its stored state"
    page.goto(url + report.pages_with_widget[0])
    page.locator(".jupyter-widgets").first.wait_for(state="visible")
    screenshot(page, "first_widget_page")

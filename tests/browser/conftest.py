"""Fixtures for the browser tests: chromium, JupyterLab, the built book, screenshots.

Every test in this folder is marked ``browser`` (and ``slow``); run only these with
``pytest -m browser``, or leave them out with ``-m "not browser"``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from browser_harness import (
    CHROMIUM, CHROMIUM_ARGS, ROOT, JupyterLab, PageLog, build_book, open_page, run_jupyterlab,
    save_screenshot, serve_directory,
)
from playwright.sync_api import Browser, Page, sync_playwright


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's chromium, headless. Playwright gives each launch a new, empty profile."""
    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} not found: install it with `apt-get install chromium` "
                           "(`make test` does this when run as root)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page_and_log(browser: Browser) -> Iterator[tuple[Page, PageLog]]:
    """A fresh page (its own context) plus the errors and requests it logged."""
    page, log = open_page(browser)
    yield page, log
    page.context.close()


@pytest.fixture
def screenshot(request: pytest.FixtureRequest) -> Callable[[Page, str], Path]:
    """``screenshot(page, label)`` saves test-artifacts/<test name>/<label>.png."""
    return lambda page, label: save_screenshot(page, request.node.name, label)


@pytest.fixture(scope="session")
def jupyterlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    """JupyterLab on 127.0.0.1, no token, serving an empty temporary folder (``.root_dir``)."""
    root_dir = tmp_path_factory.mktemp("lab-root")
    config_dir = tmp_path_factory.mktemp("lab-config")
    with run_jupyterlab(root_dir, config_dir) as lab:
        yield lab


@pytest.fixture(scope="session")
def book_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The real book (book/ over notebooks/) built into a temporary folder and served.

    Yields ``(base_url, html_dir)``.
    """
    html_dir = build_book(ROOT / "book", tmp_path_factory.mktemp("book"))
    with serve_directory(html_dir) as url:
        yield url, html_dir

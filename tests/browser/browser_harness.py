"""Plumbing for the browser tests: a local web server, JupyterLab, the book, screenshots.

Everything runs on 127.0.0.1 and the browser is Debian's chromium driven by
Playwright (``playwright install`` is never needed). Pages may only reach
loopback: any other request is aborted and recorded, so a test can assert the
site works offline.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import Browser, ConsoleMessage, Page, Request

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
LOOPBACK = re.compile(r"^(https?|wss?)://(127\.0\.0\.1|localhost)(:\d+)?/")


# -- processes and ports ---------------------------------------------------------------------
def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(url: str, timeout: float, process: subprocess.Popen | None = None) -> None:
    """Poll ``url`` until it answers 200; fail early if ``process`` has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with code {process.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


@contextlib.contextmanager
def serve_directory(directory: Path) -> Iterator[str]:
    """Serve ``directory`` over HTTP on loopback; yields the base URL (ending in /)."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # the test reports what failed; the access log is noise


# -- JupyterLab ----------------------------------------------------------------------------
@dataclass
class JupyterLab:
    """A running JupyterLab: its base URL and the folder it serves."""

    url: str
    root_dir: Path


@contextlib.contextmanager
def run_jupyterlab(root_dir: Path, config_dir: Path, timeout: float = 120) -> Iterator[JupyterLab]:
    """Start JupyterLab on 127.0.0.1 (free port, no token, no password) serving ``root_dir``.

    Its settings and workspaces live in ``config_dir``, so the user's own JupyterLab
    setup cannot change what the test sees; news and update checks are off.
    """
    port = free_port()
    settings = config_dir / "lab-settings"
    notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True, exist_ok=True)
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(config_dir / "config"),
        JUPYTER_RUNTIME_DIR=str(config_dir / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(config_dir / "workspaces"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    command = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        "--IdentityProvider.token=", "--ServerApp.password=",
        f"--ServerApp.root_dir={root_dir}",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp, to drive commands
        "--LabApp.news_url=",
    ]
    if os.name == "posix" and os.geteuid() == 0:
        command.append("--allow-root")  # CI containers run as root
    log = (config_dir / "jupyterlab.log").open("w")
    process = subprocess.Popen(command, cwd=root_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/api/status", timeout, process)
        yield JupyterLab(url=url, root_dir=root_dir)
    except Exception:
        log.flush()
        print((config_dir / "jupyterlab.log").read_text()[-4000:], file=sys.stderr)
        raise
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


_RUN_ALL_CELLS = """
async () => {
    const app = window.jupyterapp;
    const panel = app.shell.currentWidget;
    await panel.context.ready;
    await panel.sessionContext.ready;
    await app.commands.execute('notebook:run-all-cells');
    const errors = [];
    const cells = panel.content.model.cells;
    for (let i = 0; i < cells.length; i++) {
        const cell = cells.get(i);
        if (cell.type !== 'code') continue;
        for (let j = 0; j < cell.outputs.length; j++) {
            const output = cell.outputs.get(j).toJSON();
            if (output.output_type === 'error') errors.push(`${output.ename}: ${output.evalue}`);
        }
    }
    return errors;
}
"""


def run_notebook_in_lab(page: Page, lab: JupyterLab, path: str, timeout: float = 300) -> None:
    """Open ``path`` (relative to the lab's root folder) in JupyterLab and run all its cells.

    Returns once every cell has run; raises AssertionError naming the first
    exceptions if any cell failed.
    """
    page.set_default_timeout(timeout * 1000)
    page.goto(f"{lab.url}/lab/tree/{path}")
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
        " && window.jupyterapp.shell.currentWidget.sessionContext"
        f" && window.jupyterapp.shell.currentWidget.context.path === {json.dumps(path)}"
    )
    errors = page.evaluate(_RUN_ALL_CELLS)
    assert not errors, f"{path}: cells raised {errors}"


# -- the book ------------------------------------------------------------------------------
def build_book(book_dir: Path, output_dir: Path, timeout: float = 600) -> Path:
    """Build the Jupyter Book in ``book_dir`` into ``output_dir``; returns the html folder."""
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run(
        [str(jupyter_book), "build", str(book_dir), "--path-output", str(output_dir)],
        capture_output=True, text=True, timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(f"jupyter-book build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return output_dir / "_build" / "html"


def copy_book_config(destination: Path) -> Path:
    """Copy book/'s configuration (not its pages) to ``destination``, for test books."""
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "book" / "_config.yml", destination)
    for folder in ("_vendor", "_js"):
        shutil.copytree(ROOT / "book" / folder, destination / folder)
    return destination


# -- browser pages -------------------------------------------------------------------------
@dataclass
class PageLog:
    """What a page reported while a test drove it."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    blocked_requests: list[str] = field(default_factory=list)


def open_page(browser: Browser) -> tuple[Page, PageLog]:
    """A fresh page that logs errors and may reach loopback only."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    log = PageLog()

    def route(route_, request: Request) -> None:
        if LOOPBACK.match(request.url) or request.url.startswith(("data:", "blob:", "about:")):
            route_.continue_()
        else:
            log.blocked_requests.append(request.url)
            route_.abort()

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            log.console_errors.append(f"{message.text} ({message.location.get('url', '')})")

    def on_response(response) -> None:
        if response.status >= 400:
            log.failed_requests.append(f"{response.status} {response.url}")

    context.route("**/*", route)
    page.on("console", on_console)
    page.on("pageerror", lambda error: log.page_errors.append(f"{error} ({page.url})"))
    def on_request_failed(request: Request) -> None:
        # ERR_ABORTED: cancelled because the page navigated on; a missing file shows
        # up as a 404 response instead, a request to the network as blocked.
        if request.failure != "net::ERR_ABORTED" and request.url not in log.blocked_requests:
            log.failed_requests.append(f"{request.failure} {request.url}")

    page.on("requestfailed", on_request_failed)
    page.on("response", on_response)
    return page, log


def save_screenshot(page: Page, test_name: str, label: str) -> Path:
    """Save a full-page screenshot as ``test-artifacts/<test_name>/<label>.png``."""
    def safe(name: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")

    path = ARTIFACTS / safe(test_name) / f"{safe(label)}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path


# -- crawling a built site -------------------------------------------------------------------
@dataclass
class SiteReport:
    """What crawling a built site found."""

    pages: list[str] = field(default_factory=list)
    broken_links: list[str] = field(default_factory=list)  # "page -> target"
    broken_images: list[str] = field(default_factory=list)
    duplicate_scripts: list[str] = field(default_factory=list)
    pages_with_svg: list[str] = field(default_factory=list)
    pages_with_widget: list[str] = field(default_factory=list)


_PAGE_FACTS = """
() => {
    const visible = (el) => { const box = el.getBoundingClientRect(); return box.width > 0 && box.height > 0; };
    const links = [...document.querySelectorAll('a[href], link[href]')].map((el) => el.href);
    const sources = [...document.querySelectorAll('img[src], script[src], iframe[src]')].map((el) => el.src);
    const scripts = [...document.querySelectorAll('script[src]')].map((el) => el.src.split('?')[0]);
    const brokenImages = [...document.querySelectorAll('img')]
        .filter((img) => !(img.complete && img.naturalWidth > 0)).map((img) => img.src);
    const outputImages = [...document.querySelectorAll('.cell_output img, .output img')];
    const svg = outputImages.some((img) => /\\.svg(\\?|$)|^data:image\\/svg/.test(img.src) && visible(img))
        || [...document.querySelectorAll('.cell_output svg, .output svg')].some(visible);
    const widget = [...document.querySelectorAll('.jupyter-widgets')].some(visible);
    return {links, sources, scripts, brokenImages, svg, widget};
}
"""


def crawl_site(page: Page, base_url: str, html_dir: Path, settle_ms: int = 1500) -> SiteReport:
    """Visit every page reachable from index.html and check links, images and outputs.

    An internal link or source is broken when no file in ``html_dir`` answers it.
    """
    report = SiteReport()
    queue, seen = [base_url + "index.html"], set()
    while queue:
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        page.goto(url, wait_until="load")
        page.wait_for_timeout(settle_ms)  # let the widget manager and MathJax render
        name = url.removeprefix(base_url)
        report.pages.append(name)
        facts = page.evaluate(_PAGE_FACTS)
        for target in facts["links"] + facts["sources"]:
            if not target.startswith(base_url):
                continue
            path = target.removeprefix(base_url).split("#")[0].split("?")[0]
            file = html_dir / path
            if not (file.is_file() or (file / "index.html").is_file()):
                report.broken_links.append(f"{name} -> {path}")
            elif path.endswith(".html") and file.is_file():
                queue.append(base_url + path)
        report.broken_images += [f"{name}: {src}" for src in facts["brokenImages"]]
        repeated = {src for src in facts["scripts"] if facts["scripts"].count(src) > 1}
        report.duplicate_scripts += [f"{name}: {src}" for src in sorted(repeated)]
        if facts["svg"]:
            report.pages_with_svg.append(name)
        if facts["widget"]:
            report.pages_with_widget.append(name)
    return report

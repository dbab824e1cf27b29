"""The book's configuration: vendored files intact, every referenced file present."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml

BOOK = Path(__file__).resolve().parents[2] / "book"


def test_vendored_files_match_their_recorded_checksums():
    manifest = (BOOK / "_vendor" / "VENDORED.md").read_text()
    recorded = dict(
        (path, digest) for digest, path in re.findall(r"^([0-9a-f]{64})  (\S+)$", manifest, re.M))
    on_disk = sorted(str(p.relative_to(BOOK / "_vendor")) for p in (BOOK / "_vendor" / "static").rglob("*")
                     if p.is_file())
    assert sorted(recorded) == on_disk
    for path, digest in recorded.items():
        assert hashlib.sha256((BOOK / "_vendor" / path).read_bytes()).hexdigest() == digest, path


def test_config_points_at_local_scripts_only():
    config = yaml.safe_load((BOOK / "_config.yml").read_text())["sphinx"]["config"]
    static_dirs = [BOOK / d for d in config["html_static_path"]]

    def in_static(name: str) -> bool:
        return any((d / name).is_file() for d in static_dirs)

    assert in_static(config["mathjax_path"])
    assert list(config["nb_ipywidgets_js"]) == [
        "requirejs/require.js", "widget-setup.js", "html-manager/embed-amd.js"]
    for script in config["nb_ipywidgets_js"]:
        assert not script.startswith(("http:", "https:", "//")) and in_static(script), script
    assert not (BOOK / "_static").exists(), "book/_static would make Jupyter Book load every .js twice"


def test_toc_lists_every_chapter_notebook_in_order():
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text())
    files = [chapter["file"] for part in toc["parts"] for chapter in part["chapters"]]
    assert files == sorted(files) and len(files) >= 9
    missing = [f for f in files if not (BOOK / f"{f}.ipynb").is_file()]
    assert not missing, f"chapters in book/_toc.yml without a notebook: {missing}"
    execute = yaml.safe_load((BOOK / "_config.yml").read_text())["execute"]
    assert execute["execute_notebooks"] == "off"


def test_every_solution_sits_behind_a_show_solution_toggle():
    import nbformat

    for path in sorted((BOOK.parent / "notebooks").glob("[0-9]*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        solutions = [c for c in notebook.cells if "solution" in c.metadata.get("tags", [])]
        for cell in solutions:
            assert "hide-input" in cell.metadata["tags"], (path.name, cell.source[:60])
            assert cell.metadata["mystnb"] == {"code_prompt_show": "Show solution",
                                               "code_prompt_hide": "Hide solution"}

"""`make lab`: the learner edition by default, the reference one command away, root or not.

The Makefile's lab targets call scripts/lab.py; these tests run that script
the way the Makefile does, up to the point where JupyterLab's server answers
(on the loopback interface, stopped at once).
"""
from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]


def lab_script():
    spec = importlib.util.spec_from_file_location("lab", ROOT / "scripts" / "lab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_makefile_targets_call_the_lab_script():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lab: .*\n\t\$\(BIN\)/python scripts/lab\.py -- \$\(LAB_ARGS\)$",
                     makefile, re.M)
    assert re.search(r"^lab-solutions: .*\n\t\$\(BIN\)/python scripts/lab\.py --solutions "
                     r"-- \$\(LAB_ARGS\)$", makefile, re.M)


def test_the_command_adds_allow_root_only_for_root():
    lab = lab_script()
    as_root = lab.jupyter_lab_command(Path("/x"), as_root=True, extra=["--port", "1"])
    as_user = lab.jupyter_lab_command(Path("/x"), as_root=False)
    assert as_root == [sys.executable, "-m", "jupyterlab", "--ServerApp.root_dir=/x",
                       "--allow-root", "--port", "1"]
    assert "--allow-root" not in as_user


def test_the_learner_edition_is_written_when_missing_and_again_when_stale(tmp_path):
    lab = lab_script()
    written = lab.ensure_learner_edition(tmp_path)
    assert [p.name for p in written] == [p.name for p in lab.chapters()]
    learner = nbformat.read(tmp_path / "04_custom_functions.ipynb", as_version=4)
    exercises = [c for c in learner.cells if "exercise" in c.metadata.get("tags", [])]
    assert exercises and all("NotImplementedError" in c.source for c in exercises)
    assert not any("hide-input" in c.metadata["tags"] or "mystnb" in c.metadata for c in exercises)
    assert all(not c.get("outputs") for c in learner.cells if c.cell_type == "code")
    assert lab.ensure_learner_edition(tmp_path) == []  # fresh: nothing to do
    # older than its source notebook (whenever that was checked out or last edited)
    source = next(p for p in lab.chapters() if p.name == "04_custom_functions.ipynb")
    old = source.stat().st_mtime - 3600
    os.utime(tmp_path / "04_custom_functions.ipynb", (old, old))
    assert [p.name for p in lab.ensure_learner_edition(tmp_path)] == ["04_custom_functions.ipynb"]


def test_dry_run_prints_the_learner_folder_by_default_and_notebooks_for_solutions():
    run = [sys.executable, str(ROOT / "scripts" / "lab.py"), "--dry-run"]
    learner = subprocess.run(run, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert f"--ServerApp.root_dir={ROOT / 'build' / 'learner'}" in learner
    assert "make lab-solutions" in learner
    reference = subprocess.run(run + ["--solutions"], capture_output=True, text=True, check=True,
                               cwd=ROOT).stdout
    assert f"--ServerApp.root_dir={ROOT / 'notebooks'}" in reference
    assert ("--allow-root" in learner) == (os.geteuid() == 0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_lab_command_starts_a_server_as_the_current_user_root_included(tmp_path):
    # as root (uid 0 in containers) JupyterLab exits at once unless given --allow-root,
    # so a server that answers is the proof the command works for root
    port = _free_port()
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTER_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path))
    command = [sys.executable, str(ROOT / "scripts" / "lab.py"), "--", "--no-browser",
               "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            seen.append(line)
            if f"http://127.0.0.1:{port}/lab" in line:
                break
        text = "".join(seen)
        assert f"http://127.0.0.1:{port}/lab" in text, text
        assert "build/learner" in text  # the learner edition, made first if missing
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()

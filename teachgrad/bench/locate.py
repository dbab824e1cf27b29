"""Find the repository's ``benchmarks/results`` folder wherever a notebook runs.

The chapters read stored benchmark results. A notebook may run from
``notebooks/`` (the reference edition), from ``build/learner/`` (what
``make lab`` opens) or from anywhere else, so a path relative to the working
folder (``../benchmarks/results``) is not enough. The folder is looked for, in order:

1. ``$TEACHGRAD_RESULTS``, when set (a folder of results files);
2. next to the teachgrad package (an editable install or a clone on ``sys.path``);
3. in the working folder or any folder above it.
"""
from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "TEACHGRAD_RESULTS"
RELATIVE = Path("benchmarks") / "results"


def _candidates() -> list[Path]:
    package_root = Path(__file__).resolve().parents[2]  # teachgrad/bench/locate.py -> the clone
    here = Path.cwd().resolve()
    return [package_root / RELATIVE] + [folder / RELATIVE for folder in (here, *here.parents)]


def results_dir() -> Path:
    """The folder of stored benchmark results; ``FileNotFoundError`` naming the fix if none."""
    chosen = os.environ.get(ENV_VAR, "").strip()
    if chosen:
        folder = Path(chosen).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"{ENV_VAR}={chosen!r} is not a folder. Fix: point it at a "
                                    "clone's benchmarks/results, or unset it.")
        return folder
    for folder in _candidates():
        if folder.is_dir():
            return folder
    raise FileNotFoundError(
        "no benchmarks/results folder found next to the teachgrad package or above "
        f"{Path.cwd()}: the stored results come with a clone of the repository, not with an "
        f"installed wheel. Fix: set {ENV_VAR} to a clone's benchmarks/results folder.")


def results_file(name: str) -> Path:
    """``results_dir() / name``, checked to exist (the error names the folder searched)."""
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise ValueError(f"results_file takes a file name such as 'compile_speed.json', got {name!r}")
    path = results_dir() / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: run the benchmark that writes it "
                                "(see benchmarks/README.md), or set "
                                f"{ENV_VAR} to a folder that has it.")
    return path

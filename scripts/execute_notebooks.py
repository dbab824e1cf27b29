"""Execute the reference notebooks in place, storing their outputs and widget state.

    .venv/bin/python scripts/execute_notebooks.py                 # every notebook
    .venv/bin/python scripts/execute_notebooks.py notebooks/03_autograd.ipynb

The stored outputs are what ``pytest --nbval`` compares against and what the
book shows, so the run is made deterministic: a fixed hash seed, ``cuda``
tensors in numba's CUDA simulator (what CI has; pass ``--device auto`` to use a
real GPU when there is one), numpy's and OpenBLAS's numeric kernels pinned to the
AVX2 ones on any x86-64 CPU (AVX-512 ones round some sums differently), and each
notebook seeds teachgrad itself with ``tg.manual_seed``. Widget state is stored in
the notebook metadata so the book can draw widgets without a running kernel.
Solution cells are tagged ``hide-input`` so the book shows each behind a "Show
solution" toggle.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbconvert.preprocessors import ExecutePreprocessor

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def deterministic_environment(device: str) -> None:
    """Environment the kernel inherits: same hash order, same cuda device, repo importable."""
    os.environ["PYTHONHASHSEED"] = "0"
    os.environ["TEACHGRAD_CUDA"] = device
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)  # teachgrad decides from TEACHGRAD_CUDA
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    # the same numeric kernels on every x86-64 CPU (as the Makefile's NOTEBOOK_ENV): numpy's
    # AVX2 loops and OpenBLAS's Haswell kernels, whatever AVX-512 the CPU has
    os.environ["NPY_DISABLE_CPU_FEATURES"] = "X86_V4 AVX512_ICL AVX512_SPR"
    os.environ["OPENBLAS_CORETYPE"] = "Haswell"
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")


def merge_streams(notebook: nbformat.NotebookNode) -> None:
    """Join consecutive stdout (or stderr) pieces of a cell into one output.

    The kernel flushes printed text in chunks whose boundaries depend on timing;
    one output per stream keeps the stored notebook the same from run to run.
    """
    for cell in notebook.cells:
        merged: list = []
        for output in cell.get("outputs", []):
            previous = merged[-1] if merged else None
            if (output.output_type == "stream" and previous is not None
                    and previous.output_type == "stream" and previous.name == output.name):
                previous.text += output.text
            else:
                merged.append(output)
        if cell.cell_type == "code":
            cell.outputs = merged


SOLUTION_TAG = "solution"
HIDE_TAG = "hide-input"  # myst-nb: the source sits behind a toggle button in the book
TOGGLE_PROMPTS = {"code_prompt_show": "Show solution", "code_prompt_hide": "Hide solution"}


def hide_solutions(notebook: nbformat.NotebookNode) -> None:
    """Put each solution cell's source behind a "Show solution" toggle in the book."""
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code" and SOLUTION_TAG in tags:
            if HIDE_TAG not in tags:
                cell.metadata["tags"] = [*tags, HIDE_TAG]
            cell.metadata.setdefault("mystnb", {}).update(TOGGLE_PROMPTS)


def execute(path: Path, timeout: int) -> float:
    """Run one notebook top to bottom in its own folder and save it; return seconds taken."""
    notebook = nbformat.read(path, as_version=4)
    # "python3" resolves to the interpreter running this script (the project's venv).
    # No per-cell timestamps: they would change the file on every run.
    executor = ExecutePreprocessor(timeout=timeout, kernel_name="python3",
                                   store_widget_state=True, record_timing=False)
    start = time.perf_counter()
    executor.preprocess(notebook, {"metadata": {"path": str(path.parent)}})
    elapsed = time.perf_counter() - start
    merge_streams(notebook)
    hide_solutions(notebook)
    nbformat.write(notebook, path)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to run (default: every notebooks/*.ipynb)")
    parser.add_argument("--device", choices=("sim", "auto", "gpu"), default="sim",
                        help="where cuda tensors run (default: the simulator, as in CI)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell")
    args = parser.parse_args()

    deterministic_environment(args.device)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))
    total = 0.0
    for path in paths:
        seconds = execute(path.resolve(), args.timeout)
        total += seconds
        print(f"{path.name}: {seconds:.1f} s", flush=True)
    print(f"{len(paths)} notebook(s) in {total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

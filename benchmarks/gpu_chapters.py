"""Run the code of the GPU chapters, reference solutions included, on the device in use.

    TEACHGRAD_CUDA=gpu python benchmarks/gpu_chapters.py --out build/gpu-check/chapters.json
    TEACHGRAD_CUDA=sim python benchmarks/gpu_chapters.py --out /tmp/chapters.json   # a dry run

Each chapter runs in a process of its own (a device fault is sticky on a real GPU: one
chapter's fault must not poison the next), its code cells executed top to bottom as
one script in the notebook's folder, as a kernel would run them. Nothing is displayed:
widgets are built (which draws their pictures from recorded launches) but not shown.
For each chapter the JSON file says how many cells ran, how long each took, the first
error (cell, exception, last lines of the traceback), every later one (``errors``: a
cell that fails does not stop the chapter, so one simulator-only demo does not hide the
rest; a fault on the device does, since nothing can run after it) and every checker's
verdict (``Exercise 8b.3 solved`` / ``not quite`` / ...), so a run on a GPU machine
shows at once which kernels and which checkers behave differently from the simulator.
A chapter that runs out of time keeps what it had done: the child writes each cell's
result as it goes.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import linecache
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
#: The chapters whose code runs on the cuda device.
GPU_CHAPTERS = ("02_tensors_and_devices", "06_gpu_programming_model",
                "07_reductions_and_shared_memory", "08_matmul_on_the_gpu",
                "08b_kernel_practice", "09_cpu_vs_gpu_speed", "10_asynchronous_execution")
VERDICT = re.compile(r"(✅|❌|⏳)\s*Exercise\s+(\S+)\s+([^:]+)")


def code_cells(path: Path) -> list[str]:
    """The sources of the notebook's code cells, in order (read as plain JSON data)."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cells = []
    for cell in notebook["cells"]:
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            cells.append("".join(source) if isinstance(source, list) else str(source))
    return cells


def _is_device_fault(error: BaseException) -> bool:
    """A fault that leaves the GPU's context unusable: nothing after it can run. (teachgrad
    says so of its ``DeviceFault``; a driver error met outside it carries the code.)"""
    from teachgrad.streams.stream import STICKY_ERRORS

    return bool(getattr(error, "sticky", False)) or getattr(error, "code", None) in STICKY_ERRORS


def run_chapter(path: Path, progress: Path | None = None) -> dict:
    """Execute one chapter's code cells in one namespace; go on past a failing cell (each
    error is noted), except after a fault on the device. With ``progress``, the report so
    far is written there after every cell."""
    os.chdir(path.parent)
    namespace: dict = {"__name__": "__main__"}
    report: dict = {"chapter": path.stem, "cells": 0, "cell_seconds": [], "error": None,
                    "errors": [], "verdicts": {}}
    for index, source in enumerate(code_cells(path)):
        printed = io.StringIO()
        start = time.perf_counter()
        filename = f"<{path.stem} cell {index}>"
        # as IPython does: tools that read a kernel's source lines (the simulator's shared
        # arrays are named by theirs) find them in linecache
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        try:
            with contextlib.redirect_stdout(printed):
                exec(compile(source, filename, "exec"), namespace)
        except BaseException as error:  # noqa: BLE001 (report it, whatever it is)
            failure = {"cell": index, "type": type(error).__name__,
                       "message": str(error)[:2000],
                       "traceback": traceback.format_exc().splitlines()[-12:]}
            report["error"] = report["error"] or failure
            report["errors"].append(failure)
            if _is_device_fault(error):
                report["stopped"] = f"a fault on the device in cell {index}"
        finally:
            report["cell_seconds"].append(round(time.perf_counter() - start, 4))
            for mark, exercise, verdict in VERDICT.findall(printed.getvalue()):
                report["verdicts"][exercise] = f"{mark} {verdict.strip()}"
            report["cells"] = index + 1
            if progress is not None:
                progress.write_text(json.dumps(report), encoding="utf-8")
        if report.get("stopped"):
            break
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--chapters", nargs="*", default=list(GPU_CHAPTERS),
                        help="notebook names without .ipynb (default: the GPU chapters)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per chapter")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # the child's job
    parser.add_argument("--progress", type=Path, help=argparse.SUPPRESS)  # ... and its notes
    args = parser.parse_args()
    if args.one is not None:  # in the child: one chapter, the report as JSON on stdout's last line
        report = run_chapter(args.one, args.progress)
        sys.stdout.flush()
        print("\n" + json.dumps(report))
        return 0

    import teachgrad as tg  # only to say where cuda ran

    results = {"cuda": tg.cuda.describe(), "simulated": tg.cuda.is_simulated(), "chapters": []}
    for name in args.chapters:
        path = NOTEBOOKS / f"{name}.ipynb"
        progress = Path(tempfile.mkstemp(suffix=".json")[1])
        start = time.perf_counter()
        try:
            child = subprocess.run([sys.executable, __file__, "--out", str(args.out), "--one",
                                    str(path), "--progress", str(progress)],
                                   capture_output=True, text=True, timeout=args.timeout)
            lines = child.stdout.strip().splitlines()
            report = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else \
                _so_far(progress, name, {"type": "crash", "returncode": child.returncode,
                                         "stderr": child.stderr[-3000:]})
        except subprocess.TimeoutExpired:  # keep the cells it had run
            report = _so_far(progress, name, {"type": "timeout", "seconds": args.timeout})
        finally:
            progress.unlink(missing_ok=True)
        report["seconds"] = round(time.perf_counter() - start, 2)
        results["chapters"].append(report)
        verdicts = ", ".join(f"{k}: {v}" for k, v in report.get("verdicts", {}).items())
        errors = report.get("errors", [])
        status = ("ok" if not errors else f"{len(errors)} ERROR(S), first {errors[0]}")
        print(f"{name}: {report.get('cells', 0)} cells, {report['seconds']} s, {status}"
              + (f"; {verdicts}" if verdicts else ""), flush=True)
        # (after every chapter: if the whole run is stopped, what was done is kept)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")
    failed = [c["chapter"] for c in results["chapters"] if c.get("error")]
    print(f"{len(results['chapters']) - len(failed)}/{len(results['chapters'])} chapters ran "
          f"without an error" + (f"; with errors: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _so_far(progress: Path, name: str, failure: dict) -> dict:
    """What a child that did not finish had written after its last cell, and why it ended."""
    try:
        report = json.loads(progress.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = {"chapter": name, "cells": 0}
    report["errors"] = [*report.get("errors", []), failure]
    report["error"] = report.get("error") or failure
    return report


if __name__ == "__main__":
    sys.exit(main())

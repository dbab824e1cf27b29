"""Run one chapter's mutants: the notebook's cells once, each mutant in a forked child.

``check_exercises.py`` starts one of these per notebook, or per exercise of a big one (a
process of its own, so that chapters never share state). It executes the notebook's code cells in order in a fresh
``__main__``; at each exercise it forks: a child runs the reference solution and the
checker (the baseline, timed), then one child per mutant runs the mutant cell and the
checker cell from the chapter's state just before the solution. The parent then runs
the reference solution itself and goes on to the next cells.

Each child reports one JSON line through a pipe: the verdict read from the ``Feedback``
the checker returned (``passed`` or not), or the exception that escaped. A child that
runs past its time limit is killed, one that dies without a verdict is a crash: both
count as rejected (the learner sees the harness fail) but are reported apart.

Forking after the chapter's set-up is safe here: teachgrad restarts its stream workers
in a forked child (``os.register_at_fork`` in ``teachgrad.streams``), and the CUDA
simulator's threads live only during a launch.
"""
from __future__ import annotations

import json
import linecache
import os
import select
import signal
import sys
import time
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exercise_cells import RECORDER, Exercise, code_cells, exercises, recording_checker_cell
from mutants import Mutant, mutate, replace_body

REJECTED, SURVIVED, TIMEOUT, CRASH = "rejected", "survived", "timeout", "crash"


@dataclass
class Child:
    pid: int
    fd: int
    mutant: Mutant | None  # None: the baseline (reference solution)
    started: float
    deadline: float
    data: bytearray = field(default_factory=bytearray)


# --- inside a child ----------------------------------------------------------------------

def _first_line(text: str) -> str:
    lines = str(text).strip().splitlines()
    return lines[0][:200] if lines else ""


def run_cell(namespace: dict, source: str, filename: str) -> None:
    """Execute a cell as Jupyter would (its source visible to ``inspect`` and tracebacks)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)


def verdict(namespace: dict, solution: str, checker_cell: str, tag: str) -> dict[str, Any]:
    """Run a solution and the checker cell; what the checker said about it."""
    feedbacks: list[Any] = []
    namespace[RECORDER] = lambda feedback: feedbacks.append(feedback) or feedback
    try:
        run_cell(namespace, solution, f"<{tag}: solution>")
    except BaseException as err:  # noqa: BLE001 - any failure is the verdict
        return {"outcome": CRASH, "detail": f"solution cell raised {type(err).__name__}: "
                                             f"{_first_line(err)}"}
    try:
        run_cell(namespace, recording_checker_cell(checker_cell), f"<{tag}: check>")
    except BaseException as err:  # noqa: BLE001
        return {"outcome": CRASH, "detail": f"checker cell raised {type(err).__name__}: "
                                             f"{_first_line(err)}"}
    if not feedbacks:
        return {"outcome": CRASH, "detail": "the checker cell returned no feedback"}
    failed = [f for f in feedbacks if not getattr(f, "passed", False)]
    numbers = sorted({str(getattr(f, "exercise", "")) for f in feedbacks})
    if failed:
        return {"outcome": REJECTED, "detail": _first_line(getattr(failed[0], "message", failed[0])),
                "number": ",".join(numbers)}
    return {"outcome": SURVIVED, "detail": "", "number": ",".join(numbers)}


def _child(namespace: dict, solution: str, checker_cell: str, tag: str, write_fd: int) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        result = verdict(namespace, solution, checker_cell, tag)
    except BaseException:  # noqa: BLE001 - a child never returns into the parent's loop
        result = {"outcome": CRASH, "detail": _first_line(traceback.format_exc().splitlines()[-1])}
    os.write(write_fd, (json.dumps(result) + "\n").encode())
    os._exit(0)


# --- the parent: a small pool of forked children ------------------------------------------

def _let_device_work_finish() -> None:
    """Wait until teachgrad's streams have run what earlier cells enqueued, so that a child
    does not start with work its parent still owes (a forked child's streams start empty).
    The wait neither raises a deferred error nor records a host wait: the chapter's state,
    which checkers may read, stays as the cells left it."""
    streams = sys.modules.get("teachgrad.streams.stream")
    for stream in getattr(streams, "_all_streams", []):
        stream._wait_for_queue()


def fork_child(namespace: dict, exercise: Exercise, mutant: Mutant | None, timeout: float) -> Child:
    _let_device_work_finish()
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        source = exercise.solution if mutant is None else mutant.source
        _child(namespace, source, exercise.checker_cell, exercise.name, write_fd)
    os.close(write_fd)
    now = time.monotonic()
    return Child(pid, read_fd, mutant, now, now + timeout)


def _finish(child: Child, timed_out: bool) -> dict[str, Any]:
    if timed_out:
        os.kill(child.pid, signal.SIGKILL)
    _, status = os.waitpid(child.pid, 0)
    os.close(child.fd)
    seconds = round(time.monotonic() - child.started, 2)
    if timed_out:
        return {"outcome": TIMEOUT, "detail": "killed after the time limit", "seconds": seconds}
    try:
        result = json.loads(child.data.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exit status {os.WEXITSTATUS(status)}")
        result = {"outcome": CRASH, "detail": f"the process died ({how}) without a verdict"}
    result["seconds"] = seconds
    return result


def run_pool(namespace: dict, exercise: Exercise, mutants: list[Mutant | None], jobs: int,
             timeout: float, on_result) -> None:
    """Each mutant in its own forked child, ``jobs`` at a time; ``on_result(mutant, result)``
    as each one ends (``None`` stands for the reference solution)."""
    waiting, running = list(mutants), []
    while waiting or running:
        while waiting and len(running) < jobs:
            running.append(fork_child(namespace, exercise, waiting.pop(0), timeout))
        wait = max(0.0, min(c.deadline for c in running) - time.monotonic())
        readable, _, _ = select.select([c.fd for c in running], [], [], wait)
        for child in list(running):
            ended = False
            if child.fd in readable:
                chunk = os.read(child.fd, 65536)
                child.data.extend(chunk)
                ended = not chunk
            timed_out = not ended and time.monotonic() >= child.deadline
            if ended or timed_out:
                running.remove(child)
                on_result(child.mutant, _finish(child, timed_out))


# --- the chapter -----------------------------------------------------------------------------

def mutants_of(exercise: Exercise, library_calls: dict[str, list[tuple[str, str]]]) -> list[Mutant]:
    found = mutate(exercise.solution)
    for function, body in library_calls.get(exercise.name, []):
        found.append(replace_body(exercise.solution, function, body))
    return found


def fresh_main() -> dict:
    """A new ``__main__`` module for the notebook's cells, as a Jupyter kernel gives them."""
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = module
    try:
        from IPython.display import display
        module.__dict__["display"] = display
    except ImportError:
        pass
    return module.__dict__


def run_notebook(path: Path, select_mutants, emit, jobs: int, timeout_floor: float,
                 timeout_factor: float) -> None:
    """Walk the notebook; at each exercise chosen by ``select_mutants``, test its mutants.

    ``select_mutants(exercise)`` returns the mutants to run (``None``: skip the exercise);
    ``emit(record)`` receives one dict per exercise and per mutant.
    """
    cells = code_cells(path)
    chosen = {e.cell_index: (e, found) for e in exercises(path)
              if (found := select_mutants(e)) is not None}
    namespace = fresh_main()
    os.chdir(path.parent)  # the notebooks' relative paths start where Jupyter runs them
    for index, cell in enumerate(cells):
        if index in chosen:
            exercise, mutants = chosen.pop(index)
            _test_exercise(namespace, exercise, mutants, emit, jobs, timeout_floor, timeout_factor)
        if not chosen:
            return  # nothing later is needed
        run_cell(namespace, cell.source, f"<{path.stem} cell {index}>")


def _test_exercise(namespace, exercise, chosen, emit, jobs, timeout_floor, timeout_factor) -> None:
    results: list[dict] = []
    run_pool(namespace, exercise, [None], 1, 30 * 60, lambda _, result: results.append(result))
    [baseline] = results
    emit({"kind": "exercise", "notebook": exercise.notebook, "exercise": exercise.name,
          "cell": exercise.cell_index,
          "number": baseline.get("number", ""), "reference": baseline["outcome"],
          "reference_detail": baseline["detail"], "reference_seconds": baseline["seconds"],
          "mutants": len(chosen)})
    if baseline["outcome"] != SURVIVED:  # the reference itself fails: no verdict on mutants
        return
    timeout = max(timeout_floor, timeout_factor * baseline["seconds"])

    def report(mutant: Mutant, result: dict) -> None:
        emit({"kind": "mutant", "notebook": exercise.notebook, "exercise": exercise.name,
              "cell": exercise.cell_index,
              "number": baseline.get("number", ""), "operator": mutant.operator,
              "line": mutant.line, "mutated": mutant.mutated, "lineno": mutant.lineno, **result})

    run_pool(namespace, exercise, chosen, jobs, timeout, report)

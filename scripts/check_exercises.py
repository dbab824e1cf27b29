"""Mutation-test the exercise checkers: does each checker reject wrong answers?

For every exercise of the chapters (a ``solution`` cell and the ``chNN.check_*`` cell
after it), the reference solution is mutated (``scripts/mutants.py``: comparisons
flipped, off-by-ones, ``+``/``-``, ``min``/``max``, statements left out, arguments
swapped, constants returned, the library call instead of the method) and each mutant
runs against the checker in its own forked process, from the chapter's own state
(``scripts/mutation_runner.py``). A mutant is *rejected* when the checker reports a
failure; one that hangs past its time limit or kills its process is rejected too, and
listed apart. A mutant the checker accepts *survives*: the run fails unless it is listed
in ``scripts/equivalent_mutants.toml`` with the reason it computes the same thing.

    make check-exercises                                    # every chapter
    .venv/bin/python scripts/check_exercises.py notebooks/13_hyperparameter_search.ipynb
    .venv/bin/python scripts/check_exercises.py --exercise ch13.check_promote --jobs 2
    .venv/bin/python scripts/check_exercises.py --list --exercise ch13.check_promote
    .venv/bin/python scripts/check_exercises.py --sample    # the fixed sample the tests run
    .venv/bin/python scripts/check_exercises.py --report docs/mutation-report.md

The last line printed is ``N/M mutants rejected`` (listed equivalents not counted).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path.insert(0, str(SCRIPTS))

from equivalents import load_equivalents  # noqa: E402
from exercise_cells import exercises  # noqa: E402
from library_calls import LIBRARY_CALLS  # noqa: E402
from mutants import Mutant  # noqa: E402

NOTEBOOKS = ROOT / "notebooks"
EQUIVALENTS = SCRIPTS / "equivalent_mutants.toml"
OUT = ROOT / "build" / "mutation"
# The sample the test suite runs: a few exercises from quick chapters (a kernel among them,
# so that forking after the CUDA simulator has run is exercised), a fixed number of mutants
# each, chosen by a hash of the mutant's name (the same ones every run). Their checkers
# reject every mutant today: the sample guards them and the harness; the full run is
# `make check-exercises`.
SAMPLE: dict[str, int] = {
    "ch01.check_mma_flops": 6,
    "ch03.check_gradient_by_microbatches": 6,
    "ch05.check_train_epoch": 6,
    "ch06.check_saxpy": 6,
    "ch09.check_attainable_gflops": 4,
    "ch13.check_promote": 7,
}
# Stored outputs and checks run like this (Makefile NOTEBOOK_ENV), one thread per library.
RUN_ENV = {"PYTHONHASHSEED": "0", "TEACHGRAD_CUDA": "sim", "MPLBACKEND": "Agg",
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "NUMBA_NUM_THREADS": "1"}


# --- which mutants -------------------------------------------------------------------------

def _stable_order(mutant: Mutant) -> str:
    return hashlib.sha1("\x00".join(mutant.key).encode()).hexdigest()


def selector(names: set[str], sample: bool, limit: int | None):
    """``select(exercise) -> mutants or None`` for the chosen exercises."""
    from mutation_runner import mutants_of

    def select(exercise):
        if sample and exercise.name not in SAMPLE:
            return None
        if names and exercise.name not in names:
            return None
        found = mutants_of(exercise, LIBRARY_CALLS)
        count = SAMPLE[exercise.name] if sample else limit
        if count is not None:
            kept = {id(m) for m in sorted(found, key=_stable_order)[:count]}
            found = [m for m in found if id(m) in kept]
        return found
    return select


# --- one notebook, in a process of its own ---------------------------------------------------

def run_one_notebook(args: argparse.Namespace) -> int:
    from mutation_runner import run_notebook

    select = selector(set(args.exercise), args.sample, args.limit)
    notebook = Path(args.run_notebook).resolve()
    began = time.monotonic()
    with open(args.results, "w", encoding="utf-8") as results:
        def emit(record: dict) -> None:
            results.write(json.dumps(record) + "\n")
            results.flush()
        run_notebook(notebook, select, emit, args.jobs_per_notebook,
                     args.timeout_floor, args.timeout_factor)
        emit({"kind": "chapter", "notebook": notebook.stem,
              "seconds": round(time.monotonic() - began, 1)})
    return 0


def _runner_command(args: argparse.Namespace, notebook: Path, names: list[str],
                    results: Path) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--run-notebook", str(notebook),
               "--results", str(results), "--jobs-per-notebook", str(args.jobs_per_notebook),
               "--timeout-floor", str(args.timeout_floor),
               "--timeout-factor", str(args.timeout_factor)]
    for name in names:
        command += ["--exercise", name]
    if args.sample:
        command.append("--sample")
    if args.limit is not None:
        command += ["--limit", str(args.limit)]
    return command


def work_units(args: argparse.Namespace, notebooks: list[Path]) -> list[tuple[str, Path, list[str], int]]:
    """``(label, notebook, exercises, mutant count)`` per runner process, largest first.

    A chapter is one unit, unless it has more than ``--split-above`` mutants: then each
    of its exercises is a unit (each runs the chapter's cells up to its own exercise), so
    that one big chapter does not keep a core busy long after the others are done.
    """
    select = selector(set(args.exercise), args.sample, args.limit)
    units = []
    for notebook in notebooks:
        counts = {e.name: len(found) for e in exercises(notebook)
                  if (found := select(e)) is not None}
        if sum(counts.values()) > args.split_above:
            units += [(f"{notebook.stem}--{name}", notebook, [name], count)
                      for name, count in counts.items()]
        else:
            units.append((notebook.stem, notebook, list(args.exercise), sum(counts.values())))
    return sorted(units, key=lambda unit: unit[3], reverse=True)


def run_notebooks(args: argparse.Namespace, notebooks: list[Path]) -> tuple[list[dict], dict]:
    """One runner process per work unit, ``--jobs`` at a time; their records, and the seconds
    each chapter's runners took (summed)."""
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **RUN_ENV}
    waiting = work_units(args, notebooks)
    running, records, seconds = {}, [], {}
    while waiting or running:
        while waiting and len(running) < args.jobs:
            label, notebook, names, _ = waiting.pop(0)
            results, log = args.out / f"{label}.jsonl", args.out / f"{label}.log"
            with open(log, "w", encoding="utf-8") as log_file:
                process = subprocess.Popen(_runner_command(args, notebook, names, results), env=env,
                                           stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT)
            running[label] = (notebook, process, results, log, time.monotonic())
            print(f"... {label}: started", flush=True)
        time.sleep(0.5)
        for label, (notebook, process, results, log, began) in list(running.items()):
            if process.poll() is None:
                continue
            del running[label]
            took = time.monotonic() - began
            seconds[notebook.stem] = seconds.get(notebook.stem, 0.0) + took
            found = _read_records(results)
            if process.returncode != 0:
                found.append({"kind": "failure", "notebook": notebook.stem,
                              "detail": f"the chapter's cells failed (exit {process.returncode}); "
                                        f"see {log.relative_to(ROOT)}"})
            records.extend(found)
            print(_notebook_line(label, found, took), flush=True)
    return records, seconds


def _read_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _notebook_line(stem: str, records: list[dict], seconds: float) -> str:
    mutants = [r for r in records if r["kind"] == "mutant"]
    rejected = sum(r["outcome"] != "survived" for r in mutants)
    return (f"... {stem}: {rejected}/{len(mutants)} rejected in {seconds:.0f} s "
            "(listed equivalents not yet set apart)")


# --- the verdict ---------------------------------------------------------------------------

def classify(records: list[dict], equivalents: dict) -> dict[str, list[dict]]:
    """Split the mutant records: rejected (by the checker), timeout, crash, equivalent, survived."""
    groups: dict[str, list[dict]] = {"rejected": [], "timeout": [], "crash": [],
                                     "equivalent": [], "survived": []}
    for record in records:
        if record["kind"] != "mutant":
            continue
        key = (record["exercise"], record["operator"], record["line"], record["mutated"])
        if record["outcome"] == "survived" and key in equivalents:
            record["reason"] = equivalents[key]
            groups["equivalent"].append(record)
        else:
            groups[record["outcome"]].append(record)
    for members in groups.values():  # in notebook order, whatever order the runs ended in
        members.sort(key=lambda r: (r["notebook"], r.get("cell", 0), r["lineno"],
                                    r["operator"], r["mutated"]))
    return groups


def summary_lines(records: list[dict], groups: dict[str, list[dict]]) -> list[str]:
    lines = []
    for record in records:
        if record["kind"] == "failure":
            lines.append(f"FAILED   {record['notebook']}: {record['detail']}")
        elif record["kind"] == "exercise" and record["reference"] != "survived":
            lines.append(f"FAILED   {record['exercise']}: the reference solution is not accepted "
                         f"({record['reference']}: {record['reference_detail']})")
    for record in groups["survived"]:
        lines.append(f"SURVIVED {record['exercise']} [{record['operator']}] "
                     f"{record['line']!r} -> {record['mutated']!r}")
    for kind in ("timeout", "crash"):
        for record in groups[kind]:
            lines.append(f"{kind.upper():8} {record['exercise']} [{record['operator']}] "
                         f"{record['line']!r} -> {record['mutated']!r}: {record['detail']}")
    counted = sum(len(groups[k]) for k in ("rejected", "timeout", "crash", "survived"))
    rejected = counted - len(groups["survived"])
    lines.append(f"{len(groups['timeout'])} rejected by timeout, {len(groups['crash'])} by crash; "
                 f"{len(groups['equivalent'])} listed equivalent mutants not counted")
    lines.append(f"{rejected}/{counted} mutants rejected")
    return lines


def failed(records: list[dict], groups: dict[str, list[dict]]) -> bool:
    broken = any(r["kind"] == "failure" or (r["kind"] == "exercise" and r["reference"] != "survived")
                 for r in records)
    return broken or bool(groups["survived"])


# --- the command -----------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="chapters to check (default: every notebooks/[0-9]*.ipynb)")
    parser.add_argument("--exercise", action="append", default=[],
                        help="only this exercise, named by its checker (ch13.check_promote); repeatable")
    parser.add_argument("--sample", action="store_true",
                        help="the fixed sample the test suite runs (a few minutes)")
    parser.add_argument("--limit", type=int, default=None,
                        help="at most this many mutants per exercise (a fixed, hashed choice)")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--jobs", type=int, default=2, help="chapters run at once (default 2)")
    parser.add_argument("--jobs-per-notebook", type=int, default=1,
                        help="mutants run at once within a chapter (default 1)")
    parser.add_argument("--split-above", type=int, default=150,
                        help="a chapter with more mutants runs as one process per exercise (default 150)")
    parser.add_argument("--timeout-floor", type=float, default=20.0,
                        help="a mutant's time limit is at least this many seconds (default 20)")
    parser.add_argument("--timeout-factor", type=float, default=5.0,
                        help="... and at least this many times the reference's time (default 5)")
    parser.add_argument("--equivalents", type=Path, default=EQUIVALENTS,
                        help="the reviewed list of equivalent mutants")
    parser.add_argument("--out", type=Path, default=OUT,
                        help="where each chapter's records and log go (default build/mutation)")
    parser.add_argument("--report", type=Path, default=None,
                        help="also write a Markdown report here (per chapter, survivors listed)")
    parser.add_argument("--from-records", type=Path, default=None,
                        help="run nothing: summarise the records an earlier run left in this folder")
    parser.add_argument("--run-notebook", help=argparse.SUPPRESS)
    parser.add_argument("--results", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name, value in (("--jobs", args.jobs), ("--jobs-per-notebook", args.jobs_per_notebook)):
        if value < 1:
            parser.error(f"{name} must be at least 1, got {value}")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be at least 1, got {args.limit}")
    return args


def chosen_notebooks(args: argparse.Namespace) -> list[Path]:
    notebooks = [p.resolve() for p in args.notebooks] or sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))
    missing = [str(p) for p in notebooks if not p.exists()]
    if missing:
        raise SystemExit(f"no such notebook: {', '.join(missing)}")
    wanted = set(args.exercise) | (set(SAMPLE) if args.sample else set())
    if wanted:
        notebooks = [p for p in notebooks if any(e.name in wanted for e in exercises(p))]
        known = {e.name for p in notebooks for e in exercises(p)}
        unknown = sorted(set(args.exercise) - known)
        if unknown:
            raise SystemExit(f"no exercise named {', '.join(unknown)} in the chosen notebooks "
                             "(exercises are named by their checker, e.g. ch13.check_promote)")
    return notebooks


def list_mutants(args: argparse.Namespace, notebooks: list[Path]) -> int:
    select = selector(set(args.exercise), args.sample, args.limit)
    total = 0
    for notebook in notebooks:
        for exercise in exercises(notebook):
            found = select(exercise)
            if found is None:
                continue
            print(f"{exercise.name} ({notebook.stem}): {len(found)} mutants")
            for mutant in found:
                print(f"  [{mutant.operator}] {mutant.line!r} -> {mutant.mutated!r}")
            total += len(found)
    print(f"{total} mutants")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.run_notebook:
        return run_one_notebook(args)
    equivalents = load_equivalents(args.equivalents)  # a broken file stops the run at once
    notebooks = chosen_notebooks(args)
    if args.list:
        return list_mutants(args, notebooks)
    began = time.monotonic()
    if args.from_records is not None:
        records = [r for path in sorted(args.from_records.glob("*.jsonl")) for r in _read_records(path)]
        seconds = {}
        for record in (r for r in records if r["kind"] == "chapter"):
            seconds[record["notebook"]] = seconds.get(record["notebook"], 0.0) + record["seconds"]
    else:
        records, seconds = run_notebooks(args, notebooks)
    groups = classify(records, equivalents)
    if args.report is not None:
        from mutation_report import write_report
        wall = None if args.from_records is not None else time.monotonic() - began
        write_report(args.report, records, groups, seconds, wall,
                     complete=not (args.exercise or args.sample or args.limit))
    if not (args.exercise or args.sample or args.limit or args.notebooks):
        for line in stale_entries(records, equivalents):
            print(line)
    for line in summary_lines(records, groups):
        print(line)
    return 1 if failed(records, groups) else 0


def stale_entries(records: list[dict], equivalents: dict) -> list[str]:
    """Entries of the equivalents file that no mutant of a full run matched (the solution or
    the operators changed): review and remove them."""
    made = {(r["exercise"], r["operator"], r["line"], r["mutated"])
            for r in records if r["kind"] == "mutant"}
    return [f"STALE    equivalent entry matches no mutant: {key[0]} [{key[1]}] "
            f"{key[2]!r} -> {key[3]!r}" for key in equivalents if key not in made]


if __name__ == "__main__":
    sys.exit(main())

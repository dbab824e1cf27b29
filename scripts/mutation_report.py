"""The Markdown report of a ``check_exercises.py`` run: per chapter and per exercise, how
many mutants the checkers rejected, and every survivor with the line it changed."""
from __future__ import annotations

import datetime
import platform
from collections import defaultdict
from pathlib import Path

COUNTED = ("rejected", "timeout", "crash", "survived")


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "–"


def _cell(text: str) -> str:
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def _by(records: list[dict], field: str) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        grouped[record[field]].append(record)
    return grouped


def _outcomes(mutants: list[dict], groups: dict[str, list[dict]]) -> dict[str, int]:
    ids = {id(r): kind for kind, members in groups.items() for r in members}
    counts = {kind: 0 for kind in groups}
    for record in mutants:
        counts[ids[id(record)]] += 1
    return counts


def chapter_rows(records: list[dict], groups: dict[str, list[dict]],
                 seconds: dict[str, float]) -> list[str]:
    rows = ["| chapter | exercises | mutants | rejected | by timeout / crash | survived "
            "| equivalent | score | run time |",
            "|---|---|---|---|---|---|---|---|---|"]
    exercises = _by([r for r in records if r["kind"] == "exercise"], "notebook")
    mutants = _by([r for r in records if r["kind"] == "mutant"], "notebook")
    for notebook in sorted(set(exercises) | set(mutants)):
        counts = _outcomes(mutants.get(notebook, []), groups)
        counted = sum(counts[k] for k in COUNTED)
        rejected = counted - counts["survived"]
        rows.append(f"| {notebook} | {len(exercises.get(notebook, []))} | {counted} | {rejected} "
                    f"| {counts['timeout']} / {counts['crash']} | {counts['survived']} "
                    f"| {counts['equivalent']} | {_percent(rejected, counted)} "
                    f"| {seconds.get(notebook, 0):.0f} s |")
    return rows


def exercise_rows(records: list[dict], groups: dict[str, list[dict]]) -> list[str]:
    rows = ["| exercise | checker | mutants | rejected | survived | score | reference |",
            "|---|---|---|---|---|---|---|"]
    mutants = _by([r for r in records if r["kind"] == "mutant"], "exercise")
    in_order = sorted((r for r in records if r["kind"] == "exercise"),
                      key=lambda r: (r["notebook"], r.get("cell", 0)))
    for record in in_order:
        counts = _outcomes(mutants.get(record["exercise"], []), groups)
        counted = sum(counts[k] for k in COUNTED)
        reference = ("accepted" if record["reference"] == "survived"
                     else f"**{record['reference']}**: {record['reference_detail']}")
        rows.append(f"| {record['number'] or '?'} | `{record['exercise']}` | {counted} "
                    f"| {counted - counts['survived']} | {counts['survived']} "
                    f"| {_percent(counted - counts['survived'], counted)} "
                    f"| {reference} ({record['reference_seconds']:.1f} s) |")
    return rows


def weakest_rows(groups: dict[str, list[dict]], limit: int = 8) -> list[str]:
    """The exercises with the most survivors, each with one example."""
    by_exercise = _by(groups["survived"], "exercise")
    ranked = sorted(by_exercise.items(), key=lambda item: -len(item[1]))[:limit]
    rows = ["| exercise | checker | survivors | for example |", "|---|---|---|---|"]
    for name, members in ranked:
        first = members[0]
        rows.append(f"| {first['number']} | `{name}` | {len(members)} | {first['operator']}: "
                    f"{_cell(first['line'])} → {_cell(first['mutated'])} |")
    return rows


def _mutant_rows(members: list[dict], with_detail: bool) -> list[str]:
    head = "| exercise | operator | line | mutated to |" + (" what happened |" if with_detail else "")
    rows = [head, "|---" * (5 if with_detail else 4) + "|"]
    for r in members:
        row = f"| {r['number'] or r['exercise']} | {r['operator']} | {_cell(r['line'])} | {_cell(r['mutated'])} |"
        rows.append(row + (f" {r['detail']} |" if with_detail else ""))
    return rows


def write_report(path: Path, records: list[dict], groups: dict[str, list[dict]],
                 seconds: dict[str, float], wall: float | None, complete: bool) -> None:
    counted = sum(len(groups[k]) for k in COUNTED)
    rejected = counted - len(groups["survived"])
    failures = [r for r in records if r["kind"] == "failure"]
    lines = [
        "# Mutation testing of the exercise checkers",
        "",
        "Written by `scripts/check_exercises.py --report` "
        f"({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"Python {platform.python_version()}, "
        + (f"wall time {wall / 60:.1f} min" if wall is not None
           else f"chapters' run times summed: {sum(seconds.values()) / 60:.1f} min")
        + "). Each mutant is the reference solution with one "
        "change (`scripts/mutants.py`), run against the exercise's checker in a process of its "
        "own from the chapter's state. *Rejected* counts the checker's ❌ and the mutants that "
        "hung (killed at the time limit) or crashed their process; *survived* are wrong answers "
        "the checker accepted (listed below), *equivalent* the reviewed mutants of "
        "`scripts/equivalent_mutants.toml` (not counted).",
        "",
        f"**{rejected}/{counted} mutants rejected** ({_percent(rejected, counted)})."
        + ("" if complete else " This run covered part of the exercises only (the chapters listed)."),
        "",
    ]
    for failure in failures:
        lines.append(f"- **{failure['notebook']}**: {failure['detail']}")
    lines += ["", "## Per chapter", "", *chapter_rows(records, groups, seconds),
              "", "## Per exercise", "", *exercise_rows(records, groups), ""]
    if groups["survived"]:
        lines += ["## Weakest checkers", "", *weakest_rows(groups), ""]
        lines += ["## Survivors: wrong answers the checkers accept", "",
                  *_mutant_rows(groups["survived"], False), ""]
    harness = groups["timeout"] + groups["crash"]
    if harness:
        lines += ["## Rejected by the harness, not by the checker (hang or crash)", "",
                  *_mutant_rows(harness, True), ""]
    if groups["equivalent"]:
        lines += ["## Listed equivalent mutants", "",
                  *[f"- {r['number']} {r['operator']} {_cell(r['line'])} → {_cell(r['mutated'])}: "
                    f"{r['reason']}" for r in groups["equivalent"]], ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")

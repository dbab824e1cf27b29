"""The reviewed list of equivalent mutants (``scripts/equivalent_mutants.toml``).

A mutant that computes the same thing as the reference is not a wrong answer, so a
checker may accept it; every such mutant is listed with a one-line reason. An entry
names its mutant by the exercise's checker, the operator and the changed line before
and after (stripped), never by line number::

    [[equivalent]]
    exercise = "ch13.check_promote"
    operator = "flip-compare"
    line = "if a < b:"
    mutated = "if (a <= b):"
    reason = "a and b are never equal here: ..."

The whole file is validated before any entry is used; a problem is reported with the
entry's position and what to fix.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

from mutants import OPERATORS

FIELDS = ("exercise", "operator", "line", "mutated", "reason")
EXERCISE_NAME = re.compile(r"ch\w+\.check_\w+")


class EquivalentsFileError(ValueError):
    """The equivalent-mutants file is not valid; the message says where and why."""


def load_equivalents(path: Path) -> dict[tuple[str, str, str, str], str]:
    """``{(exercise, operator, line, mutated): reason}`` from the file (empty if it is absent)."""
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise EquivalentsFileError(f"{path}: not valid TOML: {err}") from None
    unknown = set(data) - {"equivalent"}
    if unknown:
        raise EquivalentsFileError(f"{path}: unknown top-level keys {sorted(unknown)}; "
                                   "the file holds only [[equivalent]] entries")
    entries = data.get("equivalent", [])
    if not isinstance(entries, list):
        raise EquivalentsFileError(f"{path}: 'equivalent' must be an array of tables ([[equivalent]])")
    found: dict[tuple[str, str, str, str], str] = {}
    for position, entry in enumerate(entries, start=1):
        key, reason = _validated(entry, f"{path}: entry {position}")
        if key in found:
            raise EquivalentsFileError(f"{path}: entry {position} repeats an earlier entry "
                                       f"({key[0]}, {key[1]}, {key[2]!r}); remove one")
        found[key] = reason
    return found


def _validated(entry: object, where: str) -> tuple[tuple[str, str, str, str], str]:
    if not isinstance(entry, dict):
        raise EquivalentsFileError(f"{where}: must be a table with keys {', '.join(FIELDS)}")
    missing = [name for name in FIELDS if name not in entry]
    extra = sorted(set(entry) - set(FIELDS))
    if missing or extra:
        raise EquivalentsFileError(f"{where}: missing keys {missing}, unknown keys {extra}; "
                                   f"an entry has exactly {', '.join(FIELDS)}")
    for name in FIELDS:
        value = entry[name]
        if not isinstance(value, str) or not value.strip():
            raise EquivalentsFileError(f"{where}: '{name}' must be a non-empty string")
    if not EXERCISE_NAME.fullmatch(entry["exercise"]):
        raise EquivalentsFileError(f"{where}: exercise {entry['exercise']!r} is not a checker "
                                   "name such as 'ch13.check_promote'")
    if entry["operator"] not in OPERATORS:
        raise EquivalentsFileError(f"{where}: unknown operator {entry['operator']!r}; "
                                   f"one of {', '.join(OPERATORS)}")
    key = (entry["exercise"], entry["operator"], entry["line"], entry["mutated"])
    return key, entry["reason"]

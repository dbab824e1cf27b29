"""`make check-exercises --sample`: a fixed sample of the mutation test of the checkers.

The full run (every mutant of every exercise, `make check-exercises`) takes too long for
the test suite; this runs the sample the driver names (`SAMPLE` in
scripts/check_exercises.py: the same exercises and the same mutants every time) and
fails on any mutant the checker accepts that the reviewed equivalents file does not list.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import check_exercises  # noqa: E402


def test_the_sample_is_fixed():
    first = check_exercises.parse_args(["--sample", "--list"])
    notebooks = check_exercises.chosen_notebooks(first)
    select = check_exercises.selector(set(), True, None)

    def chosen():
        from exercise_cells import exercises
        return [(e.name, m.key) for nb in notebooks for e in exercises(nb)
                for m in (select(e) or [])]

    picked = chosen()
    assert picked == chosen()
    assert {name for name, _ in picked} == set(check_exercises.SAMPLE)
    for name, count in check_exercises.SAMPLE.items():
        assert 0 < sum(n == name for n, _ in picked) <= count


@pytest.mark.slow
def test_every_sampled_mutant_is_rejected_or_listed_as_equivalent(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_exercises.py"), "--sample",
                          "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=900, cwd=ROOT)
    lines = run.stdout.strip().splitlines()
    survivors = [line for line in lines if line.startswith(("SURVIVED", "FAILED"))]
    assert not survivors, "\n".join(survivors)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    counts = re.fullmatch(r"(\d+)/(\d+) mutants rejected", lines[-1])
    assert counts and counts.group(1) == counts.group(2) and int(counts.group(2)) > 0, lines[-1]


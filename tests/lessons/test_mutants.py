"""The mutation operators of scripts/mutants.py, the equivalent-mutants file's validation,
and the harness of scripts/check_exercises.py on a small notebook of its own."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

from equivalents import EquivalentsFileError, load_equivalents  # noqa: E402
from exercise_cells import exercises, recording_checker_cell  # noqa: E402
from mutants import mutate, replace_body  # noqa: E402


def changes(source: str, operator: str) -> set[tuple[str, str]]:
    source = textwrap.dedent(source)
    return {(m.line, m.mutated) for m in mutate(source) if m.operator == operator}


# --- each operator -------------------------------------------------------------------------

def test_comparisons_flip_to_their_boundary_and_negation_twins():
    found = changes("""
        def f(a, b):
            return a < b, a >= b, a == b
        """, "flip-compare")
    line = "return a < b, a >= b, a == b"
    assert found == {(line, "return (a <= b), a >= b, a == b"),
                     (line, "return a < b, (a > b), a == b"),
                     (line, "return a < b, a >= b, (a != b)")}


def test_integer_constants_move_by_one_but_booleans_and_floats_do_not():
    found = changes("""
        def f(x):
            return x * 2 + 0.5 if True else x
        """, "constant-off-by-one")
    assert {m for _, m in found} == {"return x * 3 + 0.5 if True else x",
                                     "return x * 1 + 0.5 if True else x"}


def test_indices_slices_and_range_bounds_move_by_one():
    source = """
        def f(x, i, n):
            for k in range(n):
                x[i, k] = x[i:n][0]
        """
    index = {m for _, m in changes(source, "index-off-by-one")}
    assert "x[(i + 1), k] = x[i:n][0]" in index
    assert "x[i, (k - 1)] = x[i:n][0]" in index
    assert "x[i, k] = x[i:(n + 1)][0]" in index
    assert not any("[(0" in m for m in index)  # a literal index is the constant operator's
    assert {m for _, m in changes(source, "range-off-by-one")} == {
        "for k in range((n + 1)):", "for k in range((n - 1)):"}


def test_arithmetic_swaps_in_expressions_and_augmented_assignments():
    found = changes("""
        def f(a, b):
            a += b
            return a * b - a // b
        """, "swap-arithmetic")
    assert {m for _, m in found} == {"a -= b", "return (a * b + a // b)",
                                     "return (a / b) - a // b", "return a * b - (a / b)"}


def test_min_and_max_swap_as_calls_and_as_methods():
    found = changes("""
        def f(x):
            return max(x) + x.min() + np.argmax(x)
        """, "swap-min-max")
    assert {m for _, m in found} == {"return min(x) + x.min() + np.argmax(x)",
                                     "return max(x) + x.max() + np.argmax(x)",
                                     "return max(x) + x.min() + np.argmin(x)"}


def test_each_statement_can_be_left_out_but_docstrings_and_imports_stay():
    source = textwrap.dedent('''
        @cuda.jit
        def kernel(x):
            """Doc."""
            import math
            i = cuda.grid(1)
            cuda.syncthreads()
            if i < x.size:
                cuda.atomic.add(x, i, 1)
        ''')
    deleted = [m for m in mutate(source) if m.operator == "delete-statement"]
    assert {m.line for m in deleted} == {"i = cuda.grid(1)", "cuda.syncthreads()",
                                         "if i < x.size:", "cuda.atomic.add(x, i, 1)"}
    barrier = next(m for m in deleted if m.line == "cuda.syncthreads()")
    assert "    pass\n" in barrier.source and "syncthreads" not in barrier.source
    assert all(m.mutated == "pass" for m in deleted)
    assert {m.mutated for m in mutate(source) if m.operator == "drop-guard"} == {"if True:"}


def test_swapping_arguments_skips_identical_ones_and_commuting_calls():
    found = changes("""
        def f(a, b):
            return g(a, b, b) + min(a, b) + np.maximum(a, b)
        """, "swap-arguments")
    assert {m for _, m in found} == {"return (g(b, a, b)) + min(a, b) + np.maximum(a, b)"}


def test_returned_expressions_become_constants_of_their_kind():
    found = changes("""
        def f(a):
            if a:
                return [x for x in a]
            return a + 1
        """, "return-constant")
    assert {m for _, m in found} == {"return []", "return 0"}


def test_only_function_bodies_change_and_layout_comments_and_unicode_survive():
    source = textwrap.dedent("""
        LIMIT = 3  # a constant the checker may rely on

        class Sigmoid:
            rule = "dσ/dx = σ(1 − σ)"

            @staticmethod
            def forward(ctx, x):
                y = 1 / (1 + x)   # σ
                return y
        """)
    found = mutate(source)
    assert found
    for mutant in found:
        assert mutant.source.startswith("\nLIMIT = 3  # a constant the checker may rely on\n")
        assert 'rule = "dσ/dx = σ(1 − σ)"' in mutant.source
        assert len(mutant.source.splitlines()) == len(source.splitlines())
        compile(mutant.source, "<mutant>", "exec")
    assert ("y = 1 / (1 + x)   # σ", "y = 1 / (2 + x)   # σ") in {(m.line, m.mutated) for m in found}


def test_mutants_are_distinct_and_differ_from_the_reference():
    source = "def f(a, b):\n    return a - b + a - b\n"
    found = mutate(source)
    sources = [m.source for m in found]
    assert len(sources) == len(set(sources)) and source not in sources


def test_library_call_replaces_the_body_after_the_docstring():
    source = 'def matmul(a, b):\n    """A @ B by hand."""\n    out = loops(a, b)\n    return out\n\nprint(1)\n'
    mutant = replace_body(source, "matmul", "return np.matmul(a, b)")
    assert mutant.source == ('def matmul(a, b):\n    """A @ B by hand."""\n'
                             '    return np.matmul(a, b)\n\nprint(1)')
    assert (mutant.operator, mutant.line, mutant.mutated) == (
        "library-call", "out = loops(a, b)", "return np.matmul(a, b)")
    with pytest.raises(LookupError, match="no function 'nope'"):
        replace_body(source, "nope", "return 1")


# --- the checker cell and the equivalents file ------------------------------------------------

def test_checker_calls_are_recorded_wherever_they_sit():
    cell = "ch13.check_promote(promote)\nresult = ch02.check_x(f, quiet=True)\nprint(other.check_y(1))"
    recorded = recording_checker_cell(cell)
    assert "__record_feedback__(ch13.check_promote(promote))" in recorded
    assert "result = __record_feedback__(ch02.check_x(f, quiet=True))" in recorded
    assert "__record_feedback__(other" not in recorded


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "equivalent_mutants.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


GOOD_ENTRY = """
    [[equivalent]]
    exercise = "ch13.check_promote"
    operator = "flip-compare"
    line = "if a < b:"
    mutated = "if (a <= b):"
    reason = "a and b are never equal"
    """


def test_equivalents_file_is_read_into_keys_and_reasons(tmp_path):
    assert load_equivalents(write(tmp_path, GOOD_ENTRY)) == {
        ("ch13.check_promote", "flip-compare", "if a < b:", "if (a <= b):"): "a and b are never equal"}
    assert load_equivalents(tmp_path / "absent.toml") == {}


@pytest.mark.parametrize("text, problem", [
    ("[[equivalent]\n", "not valid TOML"),
    ("[other]\nx = 1\n", "unknown top-level keys"),
    (GOOD_ENTRY.replace('    reason = "a and b are never equal"\n', ""), "missing keys \\['reason'\\]"),
    (GOOD_ENTRY + "    extra = 1\n", "unknown keys \\['extra'\\]"),
    (GOOD_ENTRY.replace('"flip-compare"', '"flip"'), "unknown operator 'flip'"),
    (GOOD_ENTRY.replace('"ch13.check_promote"', '"promote"'), "not a checker name"),
    (GOOD_ENTRY.replace('"a and b are never equal"', '"  "'), "'reason' must be a non-empty string"),
    (GOOD_ENTRY + GOOD_ENTRY, "entry 2 repeats an earlier entry"),
])
def test_a_bad_equivalents_file_is_refused_with_where_and_why(tmp_path, text, problem):
    with pytest.raises(EquivalentsFileError, match=problem):
        load_equivalents(write(tmp_path, text))


def test_the_repository_equivalents_file_is_valid():
    load_equivalents(SCRIPTS / "equivalent_mutants.toml")


# --- the harness end to end, on a notebook with a checker of its own ---------------------

SETUP = '''
class Feedback:
    def __init__(self, passed):
        self.passed, self.exercise = passed, "0.1"


class ch99:
    @staticmethod
    def check_clamp(clamp):
        cases = [((5, 0, 3), 3), ((-1, 0, 3), 0), ((2, 0, 3), 2)]
        return Feedback(all(clamp(*args) == want for args, want in cases))
'''
SOLUTION = '''
def clamp(x, low, high):
    """x limited to [low, high]."""
    while x > high:   # a mutant of this loop can spin for ever
        x = high
    if x < low:
        return low
    return x
'''


def make_notebook(tmp_path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    solution = nbformat.v4.new_code_cell(SOLUTION)
    solution.metadata["tags"] = ["solution"]
    nb.cells = [nbformat.v4.new_code_cell(SETUP), solution,
                nbformat.v4.new_code_cell("ch99.check_clamp(clamp)")]
    path = tmp_path / "99_clamp.ipynb"
    nbformat.write(nb, path)
    return path


def test_exercises_are_found_by_their_solution_tag_and_named_by_their_checker(tmp_path):
    [exercise] = exercises(make_notebook(tmp_path))
    assert (exercise.name, exercise.cell_index, exercise.notebook) == ("ch99.check_clamp", 1, "99_clamp")


def test_the_harness_runs_every_mutant_and_sorts_out_survivors_hangs_and_equivalents(tmp_path):
    notebook = make_notebook(tmp_path)
    equivalents = write(tmp_path, """
        [[equivalent]]
        exercise = "ch99.check_clamp"
        operator = "flip-compare"
        line = "if x < low:"
        mutated = "if (x <= low):"
        reason = "at x == low both branches return low"
        """)
    run = subprocess.run([sys.executable, str(SCRIPTS / "check_exercises.py"), str(notebook),
                          "--equivalents", str(equivalents), "--out", str(tmp_path / "out"),
                          "--timeout-floor", "3", "--jobs-per-notebook", "2"],
                         capture_output=True, text=True, timeout=300)
    records = [json.loads(line) for line in
               (tmp_path / "out" / "99_clamp.jsonl").read_text().splitlines()]
    mutants = {(r["operator"], r["mutated"]): r["outcome"] for r in records if r["kind"] == "mutant"}
    assert [r["reference"] for r in records if r["kind"] == "exercise"] == ["survived"]
    assert mutants[("flip-compare", "if (x <= low):")] == "survived"      # listed: equivalent
    assert mutants[("delete-statement", "pass")] in ("rejected", "timeout")
    assert mutants[("flip-compare", "while (x >= high):   # a mutant of this loop can spin for ever")] == "timeout"
    assert mutants[("delete-statement", "pass")] in ("rejected", "timeout")
    assert [r["line"] for r in records if r.get("mutated") == "return 0" and r["outcome"] == "survived"] \
        == ["return low"]  # every case the checker tries has low == 0: a weak checker, exposed
    lines = run.stdout.strip().splitlines()
    assert "SURVIVED ch99.check_clamp [return-constant] 'return low' -> 'return 0'" in run.stdout
    assert "TIMEOUT " in run.stdout
    assert "if (x <= low):" not in "\n".join(l for l in lines if l.startswith("SURVIVED"))
    rejected, total = lines[-1].split()[0].split("/")
    assert lines[-1].endswith(" mutants rejected") and int(rejected) < int(total)
    assert run.returncode == 1


# --- the verdict and the report -----------------------------------------------------------

def records_of_a_run() -> list[dict]:
    base = {"kind": "mutant", "notebook": "99_clamp", "exercise": "ch99.check_clamp",
            "number": "0.1", "lineno": 1, "detail": "", "seconds": 0.1}
    return [
        {"kind": "exercise", "notebook": "99_clamp", "exercise": "ch99.check_clamp", "number": "0.1",
         "reference": "survived", "reference_detail": "", "reference_seconds": 0.1, "mutants": 4},
        {**base, "operator": "flip-compare", "line": "if a < b:", "mutated": "if (a <= b):",
         "outcome": "survived"},
        {**base, "operator": "delete-statement", "line": "x = 1", "mutated": "pass",
         "outcome": "survived"},
        {**base, "operator": "return-constant", "line": "return x", "mutated": "return 0",
         "outcome": "rejected"},
        {**base, "operator": "constant-off-by-one", "line": "x *= 2", "mutated": "x *= 1",
         "outcome": "timeout", "detail": "killed after the time limit"},
        {"kind": "chapter", "notebook": "99_clamp", "seconds": 12.0},
    ]


def test_listed_equivalents_are_set_apart_and_the_last_line_counts_the_rest():
    from check_exercises import classify, failed, summary_lines

    records = records_of_a_run()
    equivalents = {("ch99.check_clamp", "flip-compare", "if a < b:", "if (a <= b):"): "never equal"}
    groups = classify(records, equivalents)
    assert [len(groups[k]) for k in ("rejected", "timeout", "crash", "equivalent", "survived")] \
        == [1, 1, 0, 1, 1]
    lines = summary_lines(records, groups)
    assert lines[-1] == "2/3 mutants rejected"
    assert "SURVIVED ch99.check_clamp [delete-statement] 'x = 1' -> 'pass'" in lines
    assert failed(records, groups)
    groups["survived"].clear()
    assert not failed(records, groups)


def test_the_report_has_a_row_per_chapter_and_lists_every_survivor(tmp_path):
    from check_exercises import classify
    from mutation_report import write_report

    records = records_of_a_run()
    groups = classify(records, {})
    report = tmp_path / "report.md"
    write_report(report, records, groups, {"99_clamp": 12.0}, None, complete=True)
    text = report.read_text(encoding="utf-8")
    assert "**2/4 mutants rejected** (50%)" in text
    assert "| 99_clamp | 1 | 4 | 2 | 1 / 0 | 2 | 0 | 50% | 12 s |" in text
    assert "| 0.1 | delete-statement | `x = 1` | `pass` |" in text
    assert "killed after the time limit" in text


def test_equivalent_entries_that_no_mutant_matches_are_reported_as_stale():
    from check_exercises import stale_entries

    equivalents = {("ch99.check_clamp", "flip-compare", "if a < b:", "if (a <= b):"): "never equal",
                   ("ch99.check_clamp", "flip-compare", "if c < d:", "if (c <= d):"): "gone"}
    [line] = stale_entries(records_of_a_run(), equivalents)
    assert "'if c < d:'" in line and line.startswith("STALE")

"""The learner edition of a chapter: reference solutions replaced by stubs.

In a reference notebook, each exercise's answer sits in a code cell tagged
``solution`` that defines functions or classes. The learner edition keeps
every signature and docstring and replaces each body by
``raise NotImplementedError(...)``, so the notebook still runs top to bottom and
every check reports "not solved yet"::

    def double(x):
        \"\"\"Return 2x.\"\"\"
        return 2 * x

becomes::

    def double(x):
        \"\"\"Return 2x.\"\"\"
        # your code here
        raise NotImplementedError("fill in double")

Methods of a class are stubbed one by one, and a Function's ``rule`` string
(its derivative, which would give the answer away) is emptied; other top-level
statements in a solution cell (imports, constants) are kept as they are. ``scripts/make_learner.py``
applies this to every ``solution`` cell of the reference notebooks.
"""
from __future__ import annotations

import ast

SOLUTION_TAG = "solution"


def _body_start(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The 0-based line where the stubbed body starts (after the docstring, if any)."""
    first = fn.body[0]
    has_doc = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
               and isinstance(first.value.value, str))
    if has_doc:
        return first.end_lineno  # the line after the docstring
    return first.lineno - 1


def _functions_to_stub(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    functions = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(node)
        elif isinstance(node, ast.ClassDef):
            functions.extend(n for n in node.body
                             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return functions


def _rules_to_blank(tree: ast.Module) -> list[ast.Assign]:
    """``rule = "..."`` assignments in the classes of a cell (a Function's derivative text)."""
    return [n for node in tree.body if isinstance(node, ast.ClassDef) for n in node.body
            if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and n.targets[0].id == "rule"]


def learner_stub(source: str) -> str:
    """The learner's version of a solution cell: each function body becomes a stub."""
    lines = source.splitlines()
    tree = ast.parse(source)
    for assign in _rules_to_blank(tree):  # same line count: later line numbers stay valid
        indent = " " * assign.col_offset
        blank = f'{indent}rule = ""  # optional: the derivative rule, in words, once you have it'
        lines[assign.lineno - 1:assign.end_lineno] = [blank] + [""] * (assign.end_lineno - assign.lineno)
    # Replace from the bottom up so earlier line numbers stay valid.
    for fn in sorted(_functions_to_stub(tree), key=lambda f: f.lineno, reverse=True):
        start, end = _body_start(fn), fn.end_lineno
        indent = " " * fn.body[0].col_offset
        if fn.body[0].lineno == fn.lineno:  # `def f(x): return x` on one line
            head = lines[fn.lineno - 1]
            lines[fn.lineno - 1] = head[:fn.body[0].col_offset].rstrip()
            start, indent = fn.lineno, " " * (fn.col_offset + 4)
        stub = [f"{indent}# your code here",
                f'{indent}raise NotImplementedError("fill in {fn.name}")']
        lines[start:end] = stub
    return "\n".join(lines)


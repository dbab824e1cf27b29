"""Mutants of an exercise's reference solution: small, realistic wrong answers.

A mutant is the solution cell with one change a learner could make: a comparison
flipped, an off-by-one, ``+`` for ``-``, ``min`` for ``max``, a statement left out
(a barrier, an atomic, a ``zero_grad()``), two arguments swapped, a constant
returned. ``scripts/check_exercises.py`` runs every mutant against the exercise's
checker; a checker that accepts a mutant has let a wrong answer through (unless the
mutant computes the same thing: the reviewed list in ``scripts/equivalent_mutants.toml``).

The operators follow mutmut's and cosmic-ray's (comparison, arithmetic, number and
statement operators), applied to a cell rather than a file: only code inside the
cell's functions and methods changes (the signatures, decorators, docstrings and the
cell's top-level constants stay), and each change is spliced into the cell's own text,
so comments, layout and line numbers stay those of the notebook.

    from mutants import mutate
    for mutant in mutate(cell_source):
        print(mutant.operator, mutant.line, "->", mutant.mutated)
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterator

# comparison operators and their wrong twins (mutmut's and cosmic-ray's "boundary" and
# "negation" replacements)
COMPARE_FLIPS: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
    ast.In: ast.NotIn, ast.NotIn: ast.In,
}
ARITHMETIC_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
}
# calls and methods that do the opposite reduction
MIN_MAX_SWAPS = {"min": "max", "max": "min", "minimum": "maximum", "maximum": "minimum",
                 "amin": "amax", "amax": "amin", "argmin": "argmax", "argmax": "argmin",
                 "fmin": "fmax", "fmax": "fmin"}

# calls whose arguments commute: swapping them gives the same answer, not a wrong one
COMMUTATIVE_CALLS = {"min", "max", "minimum", "maximum", "fmin", "fmax", "add", "multiply",
                     "hypot", "isclose", "allclose", "array_equal"}

OPERATORS = ("flip-compare", "constant-off-by-one", "index-off-by-one", "range-off-by-one",
             "swap-arithmetic", "swap-min-max", "delete-statement", "drop-guard",
             "swap-arguments", "return-constant", "library-call")


@dataclass(frozen=True)
class Mutant:
    """One changed version of a solution cell.

    ``line`` and ``mutated`` are the first changed line before and after the change,
    stripped: with the operator they name the mutant independently of line numbers
    (the reviewed list of equivalent mutants refers to mutants that way).
    """

    operator: str
    line: str
    mutated: str
    lineno: int
    source: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.operator, self.line, self.mutated)


@dataclass(frozen=True)
class _Edit:
    """Replace the text of ``node`` (its whole span) by ``text``."""

    operator: str
    node: ast.AST
    text: str


# --- where the mutations may go ------------------------------------------------------------

def _is_docstring(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def _function_bodies(tree: ast.Module) -> Iterator[list[ast.stmt]]:
    """The bodies (docstrings left out) of every function and method in the cell."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if _is_docstring(node.body[0]) else node.body
            if body:
                yield body


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in ``body``, nested blocks included (not nested functions' own)."""
    for statement in body:
        yield statement
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # a nested function's body is visited as a function body of its own
        for field in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(statement, field, []) or [])
        for handler in getattr(statement, "handlers", []):
            yield from _statements(handler.body)


def _expressions(statement: ast.stmt) -> Iterator[ast.AST]:
    """The expression nodes of one statement (not those of nested statements)."""
    stack = [child for child in ast.iter_child_nodes(statement) if not isinstance(child, ast.stmt)]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Lambda, ast.stmt)):
            continue
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.stmt))


# --- the operators -------------------------------------------------------------------------

def _parenthesized(node: ast.AST) -> str:
    return f"({ast.unparse(node)})"


def _replace_field(node: ast.AST, **changes) -> ast.AST:
    copy = type(node)(**{name: getattr(node, name) for name in node._fields})
    for name, value in changes.items():
        setattr(copy, name, value)
    return copy


def _is_int(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, int)
            and not isinstance(node.value, bool))


def _plus_minus_one(operator: str, node: ast.AST) -> Iterator[_Edit]:
    """``node + 1`` and ``node - 1`` (integer literals are the constant operator's)."""
    if isinstance(node, (ast.Constant, ast.Slice, ast.Starred)):
        return
    text = ast.unparse(node)
    yield _Edit(operator, node, f"({text} + 1)")
    yield _Edit(operator, node, f"({text} - 1)")


def flip_compare(node: ast.AST) -> Iterator[_Edit]:
    if isinstance(node, ast.Compare):
        for position, op in enumerate(node.ops):
            if type(op) in COMPARE_FLIPS:
                ops = list(node.ops)
                ops[position] = COMPARE_FLIPS[type(op)]()
                yield _Edit("flip-compare", node, _parenthesized(_replace_field(node, ops=ops)))


def constant_off_by_one(node: ast.AST) -> Iterator[_Edit]:
    if _is_int(node):
        yield _Edit("constant-off-by-one", node, repr(node.value + 1))
        yield _Edit("constant-off-by-one", node, repr(node.value - 1))


def index_off_by_one(node: ast.AST) -> Iterator[_Edit]:
    if not isinstance(node, ast.Subscript):
        return
    index = node.slice
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    for part in parts:
        if isinstance(part, ast.Slice):
            for bound in (part.lower, part.upper):
                if bound is not None:
                    yield from _plus_minus_one("index-off-by-one", bound)
        else:
            yield from _plus_minus_one("index-off-by-one", part)


def range_off_by_one(node: ast.AST) -> Iterator[_Edit]:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
        for argument in node.args:
            yield from _plus_minus_one("range-off-by-one", argument)


def swap_arithmetic(node: ast.AST) -> Iterator[_Edit]:
    if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC_SWAPS:
        swapped = _replace_field(node, op=ARITHMETIC_SWAPS[type(node.op)]())
        yield _Edit("swap-arithmetic", node, _parenthesized(swapped))


def swap_min_max(node: ast.AST) -> Iterator[_Edit]:
    if isinstance(node, ast.Name) and node.id in MIN_MAX_SWAPS:
        yield _Edit("swap-min-max", node, MIN_MAX_SWAPS[node.id])
    elif isinstance(node, ast.Attribute) and node.attr in MIN_MAX_SWAPS:
        swapped = _replace_field(node, attr=MIN_MAX_SWAPS[node.attr])
        yield _Edit("swap-min-max", node, ast.unparse(swapped))


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def swap_arguments(node: ast.AST) -> Iterator[_Edit]:
    if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
        return
    if _call_name(node) in COMMUTATIVE_CALLS:
        return
    for position in range(len(node.args) - 1):
        first, second = node.args[position], node.args[position + 1]
        if ast.unparse(first) == ast.unparse(second):
            continue
        arguments = list(node.args)
        arguments[position], arguments[position + 1] = second, first
        yield _Edit("swap-arguments", node, _parenthesized(_replace_field(node, args=arguments)))


EXPRESSION_OPERATORS: tuple[Callable[[ast.AST], Iterator[_Edit]], ...] = (
    flip_compare, constant_off_by_one, index_off_by_one, range_off_by_one,
    swap_arithmetic, swap_min_max, swap_arguments)


def _left_alone(statement: ast.stmt) -> bool:
    """Statements whose removal only breaks the cell (NameError), never misleads a checker."""
    return isinstance(statement, (ast.Pass, ast.Import, ast.ImportFrom, ast.Global,
                                  ast.Nonlocal, ast.FunctionDef, ast.AsyncFunctionDef,
                                  ast.ClassDef)) or _is_docstring(statement)


def statement_edits(statement: ast.stmt) -> Iterator[_Edit]:
    """Leave the statement out; run a guarded block unguarded; return a constant."""
    if not _left_alone(statement):
        yield _Edit("delete-statement", statement, "pass")
    if isinstance(statement, ast.If):
        yield _Edit("drop-guard", statement.test, "True")
    if isinstance(statement, ast.AugAssign) and type(statement.op) in ARITHMETIC_SWAPS:
        swapped = _replace_field(statement, op=ARITHMETIC_SWAPS[type(statement.op)]())
        yield _Edit("swap-arithmetic", statement, ast.unparse(swapped))
    if isinstance(statement, ast.Return) and statement.value is not None:
        yield from _constant_returns(statement.value)


def _constant_returns(value: ast.expr) -> Iterator[_Edit]:
    if isinstance(value, ast.Constant):
        return
    if isinstance(value, (ast.List, ast.ListComp)):
        yield _Edit("return-constant", value, "[]")
    elif isinstance(value, (ast.Dict, ast.DictComp)):
        yield _Edit("return-constant", value, "{}")
    elif isinstance(value, ast.Tuple):
        yield _Edit("return-constant", value, "()")
    else:
        yield _Edit("return-constant", value, "0")


# --- splicing an edit into the cell's text -------------------------------------------------

class _Text:
    """The cell as UTF-8 bytes: ast's column offsets count bytes, not characters."""

    def __init__(self, source: str) -> None:
        self.data = source.encode("utf-8")
        self.line_starts = [0]
        for position, byte in enumerate(self.data):
            if byte == ord("\n"):
                self.line_starts.append(position + 1)

    def offset(self, lineno: int, col: int) -> int:
        return self.line_starts[lineno - 1] + col

    def splice(self, node: ast.AST, text: str) -> str:
        start = self.offset(node.lineno, node.col_offset)
        end = self.offset(node.end_lineno, node.end_col_offset)
        return (self.data[:start] + text.encode("utf-8") + self.data[end:]).decode("utf-8")


def _line(source: str, lineno: int) -> str:
    lines = source.splitlines()
    return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""


def _edits(tree: ast.Module) -> Iterator[_Edit]:
    for body in _function_bodies(tree):
        for statement in _statements(body):
            yield from statement_edits(statement)
            for node in _expressions(statement):
                for operator in EXPRESSION_OPERATORS:
                    yield from operator(node)


def mutate(source: str) -> list[Mutant]:
    """Every mutant of a solution cell, in cell order; duplicates and non-compiling ones dropped."""
    tree = ast.parse(source)
    text = _Text(source)
    seen = {source}
    mutants = []
    for edit in _edits(tree):
        changed = text.splice(edit.node, edit.text)
        if changed in seen or not _compiles(changed):
            continue
        seen.add(changed)
        lineno = edit.node.lineno
        mutants.append(Mutant(edit.operator, _line(source, lineno), _line(changed, lineno),
                              lineno, changed))
    return sorted(mutants, key=lambda m: (m.lineno, OPERATORS.index(m.operator)))


def replace_body(source: str, function: str, body: str) -> Mutant:
    """The ``library-call`` mutant: ``function``'s body (after its docstring) replaced by ``body``.

    ``body`` is Python source without indentation, e.g. ``"return np.matmul(a, b)"``.
    """
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            break
    else:
        raise LookupError(f"the cell defines no function {function!r}")
    first = node.body[1] if _is_docstring(node.body[0]) and len(node.body) > 1 else node.body[0]
    lines = source.splitlines()
    indent = " " * first.col_offset
    new_body = [indent + line if line else line for line in body.strip("\n").splitlines()]
    changed = "\n".join(lines[:first.lineno - 1] + new_body + lines[node.end_lineno:])
    return Mutant("library-call", _line(source, first.lineno), new_body[0].strip(),
                  first.lineno, changed)


def _compiles(source: str) -> bool:
    try:
        compile(source, "<mutant>", "exec")
    except SyntaxError:
        return False
    return True

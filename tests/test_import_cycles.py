"""No import circles: every module of teachgrad (widgets included), scripts/ and benchmarks/.

The imports are read from the source, as a reader reads them: every ``import`` statement,
at module level, inside a function (a deferred import that reaches back is still a circle
to the reader) or under ``if TYPE_CHECKING:`` (an annotation that names a class from above
is a dependency on it too). A circle is named module by module, so the failure says which
imports to untie.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Where each tree of modules lives and the import name of its top (pyproject maps
#: ``teachgrad.widgets`` to ``widgets/``); scripts and benchmarks import their siblings
#: by bare name, as ``python scripts/x.py`` puts the script's folder on ``sys.path``.
TREES = {"teachgrad": ROOT / "teachgrad", "teachgrad.widgets": ROOT / "widgets",
         "": ROOT / "scripts"}
BENCHMARKS = ROOT / "benchmarks"


def module_files(trees: dict[str, Path]) -> dict[str, Path]:
    """Every module's dotted name -> its file (a package is its ``__init__.py``)."""
    modules = {}
    for top, folder in trees.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(([top] if top else []) + parts)] = path
    return modules


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute dotted name ``from <...> import`` refers to."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The known modules that ``module`` imports.

    ``from a import b`` imports module ``a.b`` when there is one, else a name of ``a``;
    ``import a.b`` imports ``a.b``. The package ``__init__`` that Python runs first on the
    way to ``a.b`` is not counted: a reader sees a dependency on ``a.b`` only.
    """
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package)
            for alias in node.names:
                submodule = f"{source}.{alias.name}" if source else alias.name
                found.add(submodule if submodule in known else source)
    return {name for name in found if name in known and name != module}


def import_graph(trees: dict[str, Path]) -> dict[str, set[str]]:
    known = module_files(trees)
    return {name: imported_modules(name, path, known) for name, path in known.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of two or more modules that all reach each other (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per group of modules that reach each other, as ``[a, b, ..., a]``: a
    shortest way from the group's first module back to itself."""
    return [_circle_through(group[0], set(group), graph) for group in strongly_connected(graph)]


def _circle_through(start: str, group: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest path from ``start`` back to itself inside ``group`` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & group):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return path[::-1] + [start]  # (a module never counts as importing itself)
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{start} is in a strongly connected group but has no way back")


def describe_cycles(graph: dict[str, set[str]]) -> str:
    """Each circle, module by module, and the other modules tied into the same knot."""
    lines = []
    for group in strongly_connected(graph):
        circle = _circle_through(group[0], set(group), graph)
        others = sorted(set(group) - set(circle))
        lines.append("  " + " -> ".join(circle) + (f"  (same knot: {', '.join(others)})"
                                                     if others else ""))
    return "import circles (each module imports the next):\n" + "\n".join(lines)


@pytest.mark.parametrize("trees", [TREES, {"": BENCHMARKS}], ids=["package-and-scripts", "benchmarks"])
def test_no_import_circles(trees):
    graph = import_graph(trees)
    assert not import_cycles(graph), describe_cycles(graph)


def test_every_module_is_read():
    graph = import_graph(TREES)
    assert {"teachgrad.tensor", "teachgrad.kernels.launch", "teachgrad.widgets.speed_chart",
            "teachgrad.streams", "differential_cases"} <= set(graph)
    assert "teachgrad.autograd.function" in graph["teachgrad.tensor"]
    assert "teachgrad.kernels.launch" in graph["teachgrad.streams.busy"]  # (inside a function)


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, source in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(source)
    return folder


def test_the_checker_sees_every_kind_of_import(tmp_path):
    """A deferred import, one for annotations, ``from . import x``, ``from ..x import y``
    and a package's ``__init__``: each closes a circle the checker names."""
    tree = _write(tmp_path / "pkg", {
        "__init__.py": "from .low import helper\n",
        "low.py": "def helper():\n    from .high import top  # deferred\n",
        "high.py": "from . import low\ntop = 1\n",
        "sub/__init__.py": "from typing import TYPE_CHECKING\n"
                           "if TYPE_CHECKING:\n    from ..apart import Apart\n",
        "apart.py": "from .sub import x\n",
        "fine.py": "import pkg.low\nfrom pkg import high\n",
    })
    graph = import_graph({"pkg": tree})
    assert graph["pkg.fine"] == {"pkg.low", "pkg.high"}
    assert import_cycles(graph) == [["pkg.apart", "pkg.sub", "pkg.apart"],
                                    ["pkg.high", "pkg.low", "pkg.high"]]
    assert "pkg.high -> pkg.low -> pkg.high" in describe_cycles(graph)


def test_the_checker_names_a_knot_of_three(tmp_path):
    tree = _write(tmp_path / "scripts", {"a.py": "import b\n", "b.py": "import c\n",
                                         "c.py": "def f():\n    import a\n"})
    graph = import_graph({"": tree})
    assert import_cycles(graph) == [["a", "b", "c", "a"]]


@pytest.mark.parametrize("module, line, circle", [
    ("kernels/launch.py", "from .. import streams", "teachgrad.kernels.launch -> teachgrad.streams"
     " -> teachgrad.streams.busy -> teachgrad.kernels.launch"),
    ("backends/numba_loops.py", "from . import numba_cpu", "teachgrad.backends.numba_cpu -> "
     "teachgrad.backends.numba_loops -> teachgrad.backends.numba_cpu  (same knot: "
     "teachgrad.backends.numba_flat, teachgrad.backends.numba_matmul)"),
    ("nn/init.py", "from . import layers", "teachgrad.nn.conv -> teachgrad.nn.init -> "
     "teachgrad.nn.layers -> teachgrad.nn.functional -> teachgrad.nn.conv"),
    ("streams/stream.py", "from .event import Event", "teachgrad.streams.event -> "
     "teachgrad.streams.stream -> teachgrad.streams.event"),
    ("autograd/engine.py", "from ..tensor import Tensor", "teachgrad.autograd.engine -> "
     "teachgrad.tensor -> teachgrad.autograd.engine"),
])
def test_an_import_that_climbs_back_is_caught(monkeypatch, module, line, circle):
    """The package as it stands, with one deferred import added that climbs back up."""
    changed = TREES["teachgrad"] / module
    source = changed.read_text() + f"\n\ndef _late():\n    {line}\n"
    monkeypatch.setattr(Path, "read_text", lambda self: source if self == changed else
                        Path.read_bytes(self).decode())
    graph = import_graph(TREES)
    with pytest.raises(AssertionError, match=re.escape(circle)):
        assert not import_cycles(graph), describe_cycles(graph)

"""Imports point down: the Tensor class and the engine below, the operations above them.

Read from the source (every ``import`` statement, at module level or inside a
function), so a lazy import that climbs back up is caught as surely as a top-level one.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "teachgrad"

#: Lower layers first. A module may import its own layer and the ones listed before it.
LAYERS = [
    ["_cuda_setup", "cuda_devices", "dtypes", "device", "tensor_data", "_repr", "backends", "autograd"],
    ["tensor"],
    ["random", "creation", "ops"],
    ["tensor_inplace", "tensor_methods"],
]


def _layer(module: str) -> int | None:
    """The layer of ``teachgrad.<module>`` (by its first dotted part), None if not listed."""
    first = module.split(".")[0]
    for i, names in enumerate(LAYERS):
        if first in names:
            return i
    return None


def _imports(path: Path) -> list[str]:
    """Every teachgrad module ``path`` imports, as dotted names relative to the package."""
    here = path.relative_to(PACKAGE).with_suffix("").parts
    found = []
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(block.test) for n in ast.walk(block)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue  # (names for annotations only: never imported when the code runs)
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing module's package
                base = list(here[:-1])[: len(here) - node.level]
            elif node.module and node.module.startswith("teachgrad"):
                base = []
            else:
                continue
            if node.module:  # from .x import y: module x
                found.append(".".join(base + [node.module.removeprefix("teachgrad").lstrip(".")]))
            else:  # from . import x, y: modules x and y
                found += [".".join(base + [a.name]) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [a.name.removeprefix("teachgrad").lstrip(".") for a in node.names
                      if a.name.startswith("teachgrad")]
    return [f for f in found if f]


def _modules() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if _layer(".".join(p.relative_to(PACKAGE).with_suffix("").parts)) is not None]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    mine = _layer(module)
    upward = [m for m in _imports(path) if (_layer(m) or 0) > mine]
    assert not upward, f"teachgrad.{module} (layer {mine}) imports {upward} from above it"


def test_the_checker_sees_an_upward_import(tmp_path, monkeypatch):
    fake = PACKAGE / "tensor.py"
    source = fake.read_text() + "\n\ndef _late():\n    from .ops.convert import to\n"
    monkeypatch.setattr(Path, "read_text", lambda self: source if self == fake else
                        Path.read_bytes(self).decode())
    assert "ops.convert" in _imports(fake)
    with pytest.raises(AssertionError, match=r"imports \['ops.convert'\] from above it"):
        test_imports_point_down(fake)

"""Package list that pyproject.toml cannot express on its own.

Every package under ``teachgrad/`` is found as usual; the packages under
``widgets/`` ship as ``teachgrad.widgets.*`` (the folder mapping itself is in
pyproject.toml's ``[tool.setuptools.package-dir]``). All other metadata lives
in pyproject.toml.
"""
from pathlib import Path

from setuptools import find_packages, setup


def widget_packages() -> list[str]:
    """``widgets/`` and its subpackages, named as they import: ``teachgrad.widgets...``."""
    if not Path("widgets", "__init__.py").exists():
        return []
    return ["teachgrad.widgets"] + [f"teachgrad.widgets.{name}" for name in find_packages("widgets")]


setup(packages=find_packages(include=["teachgrad", "teachgrad.*"]) + widget_packages())

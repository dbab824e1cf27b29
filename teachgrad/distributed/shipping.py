"""Run a function of yours on every rank: its source travels in the launched script.

The ranks of a job are other processes: a function defined in a notebook does not
exist there. :func:`ship` takes its **source** (never a pickle, never an import of a
module named by the caller) and checks that it can live on its own: a plain
top-level function, no closure, and no global names but those the ranks provide
(``provided``). On each rank, :func:`define` runs that source in a namespace of the
provided names, with the original file name and line numbers, so an error in it
points at the line the learner wrote.

The source is code the learner wrote and chose to run; it travels as text inside
the script that :func:`~.launcher.launch` starts, as if they had pasted it there.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import linecache
import os
import textwrap
import types
from dataclasses import dataclass
from typing import Any, Callable, Mapping


class ShippingError(ValueError):
    """The function cannot be sent to the ranks as it is (the message says why and how)."""


@dataclass(frozen=True)
class ShippedFunction:
    """A function's source, ready for :func:`define` on another process."""

    name: str
    source: str      # the ``def`` alone, dedented
    filename: str    # where it was written (a notebook cell's file, or a module's)
    first_line: int  # the line of ``def`` in that file


def ship(fn: Callable, provided: Mapping[str, Any]) -> ShippedFunction:
    """The source of ``fn``, checked to run on a rank whose globals are ``provided``."""
    name = getattr(fn, "__name__", type(fn).__name__)
    if not isinstance(fn, types.FunctionType) or name == "<lambda>":
        raise ShippingError(f"{name} must be a function written with def (not a lambda, "
                            f"a method or a {type(fn).__name__}): its source is what the "
                            "ranks receive")
    if fn.__qualname__ != name or fn.__code__.co_freevars:
        raise ShippingError(f"define {name} at the top level of a cell, not inside another "
                            "function: the ranks receive its source alone, without the "
                            "variables of the function around it")
    missing = sorted(set(inspect.getclosurevars(fn).globals) - set(provided) - {name})
    if missing:
        raise ShippingError(
            f"{name} uses {', '.join(missing)}, which the ranks will not have: they provide "
            f"only {', '.join(sorted(provided))} (and Python's builtins). Fix: use those, or "
            "import what you need inside the function")
    try:
        lines, first_line = inspect.getsourcelines(fn)
    except (OSError, TypeError) as error:
        raise ShippingError(f"the source of {name} cannot be read ({error}): define it in a "
                            "notebook cell or a .py file") from None
    source = textwrap.dedent("".join(lines))
    tree = ast.parse(source)
    if (len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef)
            or tree.body[0].decorator_list):
        raise ShippingError(f"{name} must be a plain def without decorators")
    return ShippedFunction(name, source, fn.__code__.co_filename, first_line)


def define(shipped: ShippedFunction, namespace: dict) -> Callable:
    """Run the shipped source in ``namespace`` (the provided names) and return the function.

    Lines keep their numbers in the original file, and the source is put where
    tracebacks look for it, so an error names the learner's own line.
    """
    padded = "\n" * (shipped.first_line - 1) + shipped.source
    if shipped.filename not in linecache.cache and not os.path.exists(shipped.filename):
        linecache.cache[shipped.filename] = (len(padded), None, padded.splitlines(True),
                                             shipped.filename)
    namespace.setdefault("__builtins__", builtins)
    exec(compile(padded, shipped.filename, "exec"), namespace)
    return namespace[shipped.name]

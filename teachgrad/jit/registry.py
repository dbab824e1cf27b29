"""The Functions a saved graph may name: a table, never an import.

A ``.tgjit`` file names each operation by text (``teachgrad.ops.elementwise:Mul``).
Loading looks that text up in this table and nowhere else: a name that is not in
it is an error, so a file can never make teachgrad import a module or reach an
object it did not offer.

The table holds teachgrad's own Functions, collected at import from the modules
listed in :data:`BUILTIN_MODULES` (every Function class *defined* in them), and
the ones a user adds with :func:`register_function`::

    @tg.jit.register_function
    class Swish(tg.autograd.Function):
        ...

    tg.jit.save(tg.jit.trace(model, (x,)), "model.tgjit")  # the graph may use Swish
    tg.jit.load("model.tgjit")   # in a new process: run the module defining Swish first
"""
from __future__ import annotations

import re
from types import ModuleType

from ..autograd.function import Function
from ..ops import (activation, batch_norm, conv, convert, counting, elementwise, embedding,
                   indexing, linalg, loss, lstm, norms, reduce, shape, statistics)
from ..ops import attention, diagonals, gather_scatter, masked, scans, sorting
from ..ops import normalization, pointwise_activation
from ..ops import binary_cross_entropy, hard_activations, singular_values
from . import ops as jit_ops

#: The modules whose Functions a graph file may name (add a new ops module here).
BUILTIN_MODULES: tuple[ModuleType, ...] = (
    elementwise, reduce, shape, indexing, conv, activation, linalg, convert, embedding, loss,
    batch_norm, sorting, gather_scatter, masked, scans, diagonals, statistics, norms, counting,
    lstm, pointwise_activation, normalization, attention, hard_activations,
    binary_cross_entropy, singular_values, jit_ops)

# A registered name is ``module.path:Qual.Name`` made of plain identifiers.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:"
                   r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_BY_NAME: dict[str, type[Function]] = {}
_BY_CLASS: dict[type[Function], str] = {}


def default_name(cls: type) -> str:
    """The name a Function is saved under unless told: ``module:QualName``."""
    return f"{cls.__module__}:{cls.__qualname__}"


def register_function(cls: type[Function], name: str | None = None) -> type[Function]:
    """Let saved graphs use the Function ``cls`` (also works as a class decorator).

    ``name`` is what files call it (default ``module:QualName``). Registering the
    same class again is harmless; giving a name that another class already has is
    an error. Loading a file never registers anything: only this call does.
    """
    if not (isinstance(cls, type) and issubclass(cls, Function)) or cls is Function:
        raise TypeError(f"register_function takes a tg.autograd.Function subclass, not {cls!r}")
    if getattr(cls, "generated", False):
        raise TypeError(f"{cls.__name__} is a kernel tg.compile generated; save the traced graph "
                        "and compile it again after loading instead")
    name = default_name(cls) if name is None else name
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"register_function: name must look like 'package.module:ClassName', "
                         f"got {name!r}")
    holder = _BY_NAME.get(name)
    if holder is not None and holder is not cls:
        raise ValueError(f"register_function: the name {name!r} already belongs to {holder!r}. "
                         "Fix: pass another name=")
    old = _BY_CLASS.get(cls)
    if old is not None and old != name:
        del _BY_NAME[old]
    _BY_NAME[name], _BY_CLASS[cls] = cls, name
    return cls


def unregister_function(cls: type[Function]) -> None:
    """Undo :func:`register_function` (teachgrad's own Functions stay registered)."""
    if any(cls in _defined_in(m) for m in BUILTIN_MODULES):
        raise ValueError(f"{cls.__name__} is one of teachgrad's own Functions; it stays registered")
    name = _BY_CLASS.pop(cls, None)
    if name is not None:
        del _BY_NAME[name]


def registered_functions() -> dict[str, type[Function]]:
    """Every name a graph file may use, and its Function (a copy: changing it changes nothing)."""
    return dict(_BY_NAME)


def name_of(cls: type) -> str | None:
    """The registered name of ``cls``, None when it is not registered."""
    return _BY_CLASS.get(cls)


def lookup(name: str) -> type[Function] | None:
    """The Function registered as ``name``, None when there is none (no import is tried)."""
    return _BY_NAME.get(name) if isinstance(name, str) else None


def _defined_in(module: ModuleType) -> list[type[Function]]:
    """The Function classes ``module`` itself defines (not the ones it imports)."""
    return [obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, Function) and obj is not Function
            and obj.__module__ == module.__name__]


for _module in BUILTIN_MODULES:
    for _cls in _defined_in(_module):
        register_function(_cls)

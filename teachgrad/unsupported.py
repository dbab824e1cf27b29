"""What a PyTorch name that teachgrad lacks raises.

``tg.fft``, ``tg.nn.Transformer``, ``F.ctc_loss``, ``x.stft()``: a program written
for PyTorch meets these as an ``AttributeError``. When PyTorch has the name (the
lists in ``torch_names.py`` are recorded from PyTorch itself), the error says that
teachgrad does not implement it and where the README lists what it covers; a name
PyTorch does not have either (a typo) gets Python's usual message, with its
"Did you mean" suggestion.

Modules answer through a module-level ``__getattr__``, which Python calls only
when a lookup fails. The Tensor class cannot: a ``__getattr__`` on a class makes
every attribute read of its instances slower (``benchmarks/tensor_getattr.py``
measures it), so each missing Tensor method is a small descriptor of its own that
raises, and ordinary attributes are looked up exactly as before.
"""
from __future__ import annotations

import sys
from typing import Any

from . import torch_names

WHERE = ("What teachgrad covers is listed in its README, section \"What of PyTorch is "
         "covered\"")

#: teachgrad module -> (the PyTorch module it stands for, that module's public names)
NAMESPACES = {
    "teachgrad": ("torch", torch_names.TORCH),
    "teachgrad.nn": ("torch.nn", torch_names.NN),
    "teachgrad.nn.functional": ("torch.nn.functional", torch_names.FUNCTIONAL),
    "teachgrad.linalg": ("torch.linalg", torch_names.LINALG),
}


def not_implemented(what: str) -> str:
    return f"teachgrad does not implement {what}. {WHERE}."


def module_attribute_error(module: str, name: str) -> AttributeError:
    """The error for ``<module>.<name>`` that does not exist (``module`` is a key of NAMESPACES)."""
    torch_module, names = NAMESPACES[module]
    if name in names:
        shown = module.replace("teachgrad", "tg", 1)
        return AttributeError(not_implemented(f"{torch_module}.{name} ({shown}.{name})"),
                              name=name, obj=sys.modules.get(module))
    return AttributeError(f"module {module!r} has no attribute {name!r}", name=name,
                          obj=sys.modules.get(module))


class MissingMethod:
    """Stands in for a ``torch.Tensor`` attribute teachgrad does not have: reading it
    raises an AttributeError that says so (so ``hasattr`` is False, as before). Only
    ``__get__``: an instance's own ``__dict__`` (a Parameter has one) still wins."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        raise AttributeError(not_implemented(f"torch.Tensor.{self.name} (Tensor.{self.name})"),
                             name=self.name, obj=obj)


def install_missing_methods(cls: type) -> None:
    """Give ``cls`` (the Tensor class, with all its methods attached) a MissingMethod for
    every public ``torch.Tensor`` attribute it lacks, and a ``__dir__`` that hides them."""
    present = set(dir(cls))
    for name in torch_names.TENSOR - present:
        setattr(cls, name, MissingMethod(name))

    def __dir__(self: Any) -> list[str]:
        return [n for n in object.__dir__(self)
                if not isinstance(_class_attribute(type(self), n), MissingMethod)]

    cls.__dir__ = __dir__


def _class_attribute(cls: type, name: str) -> Any:
    """The raw class attribute (no descriptor call), or None."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return None

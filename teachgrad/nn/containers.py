"""Containers: ``Sequential`` runs modules one after another; ``ModuleList`` and
``ModuleDict`` hold modules (registered, so their parameters are seen) for a parent to call."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping, overload

from .module import Module


def _renumbered(container: Module, modules: Iterable[Module]) -> None:
    """Refill ``container`` with ``modules`` named "0", "1", ... (after a removal or insert)."""
    container._modules.clear()
    for i, module in enumerate(modules):
        container._modules[str(i)] = module


class Sequential(Module):
    """A chain of modules: ``Sequential(Linear(2, 8), ReLU(), Linear(8, 1))``.

    Children are named ``"0"``, ``"1"``, ... (or by the keys of an
    ``OrderedDict``), which is where names like ``"0.weight"`` come from.
    """

    def __init__(self, *modules: Module | "OrderedDict[str, Module]") -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, module in modules[0].items():
                self.add_module(name, module)
        else:
            for index, module in enumerate(modules):
                self.add_module(str(index), module)

    def forward(self, input: Any) -> Any:
        for module in self:
            input = module(input)
        return input

    def _index(self, index: int) -> int:
        size = len(self)
        if not -size <= index < size:
            raise IndexError(f"index {index} is out of range for a Sequential of length {size}")
        return index % size

    @overload
    def __getitem__(self, index: int) -> Module: ...
    @overload
    def __getitem__(self, index: slice) -> "Sequential": ...

    def __getitem__(self, index: int | slice) -> "Module | Sequential":
        items = list(self._modules.items())
        if isinstance(index, slice):
            # A slice keeps the original names, as in PyTorch: model[1:3] has (1) and (2).
            return Sequential(OrderedDict(items[index]))
        return items[self._index(index)][1]

    def __setitem__(self, index: int, module: Module) -> None:
        name = list(self._modules)[self._index(index)]
        setattr(self, name, module)

    def __delitem__(self, index: int | slice) -> None:
        names = list(self._modules)
        doomed = names[index] if isinstance(index, slice) else [names[self._index(index)]]
        for name in doomed:
            del self._modules[name]
        # renumber "0", "1", ... as PyTorch does, so a later append gets a fresh name
        _renumbered(self, list(self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        """Add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "Sequential":
        """Add each of ``modules`` at the end, in order."""
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        """Put ``module`` at position ``index``; the ones after it move up by one."""
        if not isinstance(module, Module):
            raise TypeError(f"module should be of type Module, got {type(module).__name__}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index} (the Sequential has {n} modules)")
        if index < 0:
            index += n  # as PyTorch counts: insert(-1, m) puts m before the last module
        kept = list(self._modules.values())
        kept.insert(index, module)
        _renumbered(self, kept)
        return self

    def pop(self, index: int | slice) -> "Module | Sequential":
        """Remove the module at ``index`` and return it."""
        popped = self[index]
        del self[index]
        return popped


class ModuleList(Module):
    """A list of modules whose parameters the parent sees: ``ModuleList([Block() for _ in
    range(4)])``. A plain Python list would hide them from ``parameters()``, ``to()`` and
    ``state_dict()``; this registers each one as a child named "0", "1", ...

    It has no ``forward``: the parent decides how the modules are called.
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, index: int) -> int:
        if not isinstance(index, int):
            raise TypeError(f"ModuleList indices must be integers or slices, not "
                            f"{type(index).__name__}")
        size = len(self)
        if not -size <= index < size:
            raise IndexError(f"index {index} is out of range for a ModuleList of length {size}")
        return index % size

    def __getitem__(self, index: int | slice) -> "Module | ModuleList":
        if isinstance(index, slice):
            return type(self)(list(self._modules.values())[index])
        return self._modules[str(self._index(index))]

    def __setitem__(self, index: int, module: Module) -> None:
        self.add_module(str(self._index(index)), module)

    def __delitem__(self, index: int | slice) -> None:
        kept = list(self._modules.values())
        if isinstance(index, slice):
            del kept[index]
        else:
            del kept[self._index(index)]
        _renumbered(self, kept)  # PyTorch renumbers too: names stay "0".."n-1"

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: "ModuleList") -> "ModuleList":
        return ModuleList([*self, *other])

    def append(self, module: Module) -> "ModuleList":
        """Add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        """Add each of ``modules`` at the end, in order."""
        if isinstance(modules, Module) and not isinstance(modules, ModuleList):
            raise TypeError(f"ModuleList.extend should be called with an iterable of modules, "
                            f"but got {type(modules).__name__}")
        for module in list(modules):
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Put ``module`` before position ``index`` (the ones after it move up by one)."""
        if not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        kept = list(self._modules.values())
        kept.insert(index, module)
        _renumbered(self, kept)

    def pop(self, index: int = -1) -> Module:
        """Remove the module at ``index`` and return it."""
        module = self[index]
        del self[index]
        return module


class ModuleDict(Module):
    """A dictionary of modules whose parameters the parent sees:
    ``ModuleDict({"wte": Embedding(65, 32), "ln_f": LayerNorm(32)})``. Keys keep their
    insertion order and become the children's names (``"wte.weight"`` in ``state_dict``).
    """

    def __init__(self, modules: "Mapping[str, Module] | Iterable[tuple[str, Module]] | None"
                 = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove the module called ``key`` and return it."""
        module = self[key]
        del self[key]
        return module

    def update(self, modules: "Mapping[str, Module] | Iterable[tuple[str, Module]]") -> None:
        """Add (or replace) modules from a mapping or from ``(name, module)`` pairs."""
        if isinstance(modules, Module) and not isinstance(modules, ModuleDict):
            raise TypeError(f"ModuleDict.update should be called with a mapping or an "
                            f"iterable of (name, module) pairs, but got {type(modules).__name__}")
        pairs = modules.items() if hasattr(modules, "items") else modules
        for number, pair in enumerate(pairs):
            if isinstance(pair, Module) or len(pair) != 2:
                raise ValueError(f"ModuleDict update sequence element #{number} should be a "
                                 f"(name, module) pair, got {type(pair).__name__}")
            self[pair[0]] = pair[1]

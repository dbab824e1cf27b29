"""``Sequential``: run modules one after another, feeding each one's output to the next."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Iterator, overload

from .module import Module


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
        kept = list(self._modules.values())
        self._modules.clear()
        for i, module in enumerate(kept):
            self._modules[str(i)] = module

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
        self._modules.clear()
        for i, m in enumerate(kept):
            self._modules[str(i)] = m
        return self

    def pop(self, index: int | slice) -> "Module | Sequential":
        """Remove the module at ``index`` and return it."""
        popped = self[index]
        del self[index]
        return popped

"""``Module``: the base class of every layer and every model.

A Module is an object that (1) holds tensors that training should change
(its :class:`Parameter` s), (2) holds other modules (its children), and
(3) says how to compute its output in ``forward``. Everything else here —
finding all parameters, saving and loading them, switching to evaluation
mode, moving to a device — is a walk over that tree of modules.

The trick that makes ``self.fc = Linear(3, 4)`` "just work" is ``__setattr__``:
assigning a Parameter or a Module to an attribute files it in a registry
(``_parameters`` / ``_modules``), in the order of assignment.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterator, Mapping, NamedTuple

import teachgrad as tg
from teachgrad.device import as_device
from teachgrad.dtypes import DType, get_dtype
from teachgrad.tensor import Tensor

from .module_hooks import ModuleHooks
from .parameter import Parameter, forget_grads


#: Where a Module files what is assigned to it, and how each kind is named in errors.
_REGISTRIES = ("_parameters", "_buffers", "_modules")
_SLOT_KINDS = {
    "_parameters": ("parameter", "teachgrad.nn.Parameter"),
    "_buffers": ("buffer", "Tensor"),
    "_modules": ("child module", "Module"),
}


class _IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` could not match."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"_IncompatibleKeys(missing_keys={self.missing_keys}, "
                f"unexpected_keys={self.unexpected_keys})")


def _quoted(keys: list[str]) -> str:
    return ", ".join(f'"{key}"' for key in keys)


def _addindent(text: str, spaces: int) -> str:
    """Indent every line but the first (how nested modules are printed)."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * spaces
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


class Module(ModuleHooks):
    """Base class for all layers and models; subclass it and define ``forward``.

    Example::

        class MLP(nn.Module):
            def __init__(self):
                super().__init__()          # sets up the registries: call it first
                self.hidden = nn.Linear(2, 16)
                self.out = nn.Linear(16, 2)

            def forward(self, x):
                return self.out(self.hidden(x).relu())
    """

    training: bool

    def __init__(self) -> None:
        # object.__setattr__ skips our own __setattr__, which needs these to exist.
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", {})
        self._init_hooks()  # forward/backward hooks (module_hooks.py)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The single entry point of every module call; hooks run here when there are any.
        if self._has_hooks():
            return self._call_with_hooks(args, kwargs)
        return self._forward_in_scope(args, kwargs)

    # -- registration ----------------------------------------------------------
    def _require_init(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {what} before Module.__init__() call. "
                f"Fix: call super().__init__() first in {type(self).__name__}.__init__"
            )

    def _check_new_name(self, name: str, registry: dict) -> None:
        if not isinstance(name, str):
            raise TypeError(f"attribute name should be a string, got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f"attribute name can't be empty or contain '.', got {name!r}")
        if hasattr(self, name) and name not in registry:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a ``None`` placeholder, like a missing bias) by name."""
        self._require_init("parameters")
        self._check_new_name(name, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign {type(param).__name__} object to parameter '{name}' "
                "(teachgrad.nn.Parameter or None required). Fix: wrap it, nn.Parameter(tensor)"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is state but not trained (e.g. running averages).

        Buffers move with ``to()`` and, when ``persistent``, are saved in ``state_dict``.
        """
        self._require_init("buffers")
        self._check_new_name(name, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign {type(tensor).__name__} object to buffer '{name}' (Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        """Add a child module by name (what ``self.name = module`` does)."""
        self._require_init("module")
        self._check_new_name(name, self._modules)
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value: Any) -> None:
        # Parameters and Modules are filed by their type. Anything else goes where the
        # name already lives (a registry slot accepts its own kind, or None to clear it).
        if isinstance(value, Parameter):
            registry = "_parameters"
        elif isinstance(value, Module):
            registry = "_modules"
        else:
            registry = next((r for r in _REGISTRIES if name in self.__dict__.get(r, {})), None)
            if registry is None:
                object.__setattr__(self, name, value)
                return
            kind, expected = _SLOT_KINDS[registry]
            allowed = Tensor if registry == "_buffers" else type(None)
            if value is not None and not isinstance(value, allowed):
                raise TypeError(f"cannot assign {type(value).__name__} as {kind} '{name}' "
                                f"({expected} or None expected)")
            self.__dict__[registry][name] = value
            return
        self._require_init("parameters" if registry == "_parameters" else "module")
        # An attribute lives in exactly one place; re-assigning keeps its position.
        self.__dict__.pop(name, None)
        for other in _REGISTRIES:
            if other != registry:
                self.__dict__[other].pop(name, None)
        self.__dict__[registry][name] = value

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: look in the registries.
        for registry in _REGISTRIES:
            entries = self.__dict__.get(registry)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for registry in _REGISTRIES:
            if name in self.__dict__.get(registry, {}):
                del self.__dict__[registry][name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        names = list(super().__dir__())
        for registry in _REGISTRIES:
            names += list(self.__dict__.get(registry, {}))
        return sorted(set(names))

    # -- walking the tree ------------------------------------------------------
    def named_modules(
        self, memo: set[int] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, "Module"]]:
        """Yield ``(dotted_name, module)`` for this module and every descendant, parents first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is None:
                continue
            child_prefix = f"{prefix}.{name}" if prefix else name
            yield from child.named_modules(memo, child_prefix, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        """This module and all its descendants."""
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        """Yield ``(name, module)`` for the direct children only."""
        seen: set[int] = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator["Module"]:
        """The direct children only."""
        for _, child in self.named_children():
            yield child

    def _named_members(
        self, registry: str, prefix: str, recurse: bool, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """Walk the tree and yield the entries of one registry with dotted names."""
        seen: set[int] = set()
        if recurse:
            modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
        else:
            modules = iter([(prefix, self)])
        for module_prefix, module in modules:
            for name, tensor in getattr(module, registry).items():
                if tensor is None or (remove_duplicate and id(tensor) in seen):
                    continue
                seen.add(id(tensor))  # a shared (tied) tensor is listed once
                yield (f"{module_prefix}.{name}" if module_prefix else name), tensor

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """Yield ``(dotted_name, parameter)``, e.g. ``("0.weight", ...)`` in a Sequential."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)  # type: ignore

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every parameter of this module (and, with ``recurse``, of its descendants)."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        """Yield ``(dotted_name, buffer)``."""
        yield from self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Every buffer of this module (and, with ``recurse``, of its descendants)."""
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Call ``fn`` on every descendant, then on this module (e.g. custom init)."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # -- modes and gradients ---------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Switch this module and all descendants to training mode (or eval with False)."""
        if not isinstance(mode, bool):
            raise ValueError(f"training mode is expected to be a bool, got {type(mode).__name__}")
        for module in self.modules():
            module.training = mode
        return self

    def eval(self) -> "Module":
        """Switch to evaluation mode: Dropout becomes the identity. Same as ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Freeze (False) or unfreeze (True) every parameter."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients of every parameter (``None``, or zeros with ``set_to_none=False``)."""
        forget_grads(self.parameters(), set_to_none)

    # -- devices and dtypes ----------------------------------------------------
    def _apply(self, convert: Callable[[Tensor], Tensor]) -> "Module":
        """Replace the data of every parameter and buffer by ``convert(data)``.

        Parameters keep their identity (an optimizer that holds them still works):
        only their ``.data`` is swapped, as in PyTorch.
        """
        for module in self.modules():
            for param in module._parameters.values():
                if param is None:
                    continue
                with tg.no_grad():
                    param.data = convert(param.data)
                    if param.grad is not None:
                        param.grad = convert(param.grad)
            for name, buffer in module._buffers.items():
                if buffer is not None:
                    module._buffers[name] = convert(buffer)
        return self

    def to(self, *args: Any, device: Any = None, dtype: Any = None) -> "Module":
        """Move parameters and buffers to a device and/or cast floating ones to a dtype.

        ``model.to("cuda")``, ``model.to(tg.float64)``, ``model.to(device="cpu")``.
        Works in place and returns ``self``.
        """
        for arg in args:
            if isinstance(arg, DType):
                dtype = arg
            else:
                device = arg
        if device is not None:
            device = as_device(device)
        if dtype is not None:
            dtype = get_dtype(dtype)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(
                f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}"
            )

        def convert(t: Tensor) -> Tensor:
            keep_dtype = dtype is None or not t.dtype.is_floating_point
            return t.to(device=device or t.device, dtype=t.dtype if keep_dtype else dtype)

        return self._apply(convert)

    def cpu(self) -> "Module":
        return self.to("cpu")

    def cuda(self, device: Any = None) -> "Module":
        """To the current cuda device, or to ``device`` (an index or ``"cuda:N"``)."""
        return self.to("cuda" if device is None else as_device(device))

    def float(self) -> "Module":
        return self.to(get_dtype("float32"))

    def double(self) -> "Module":
        return self.to(get_dtype("float64"))

    # -- saving and loading ------------------------------------------------------
    def state_dict(self, prefix: str = "", keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """An ordered ``{dotted_name: tensor}`` of every parameter and persistent buffer.

        The tensors are detached but share memory with the module (as in PyTorch):
        clone them if you want a snapshot that later training does not change.
        """
        result: OrderedDict[str, Tensor] = OrderedDict()
        # Shared submodules are saved under every name, as in PyTorch.
        walk = self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False)
        for module_prefix, module in walk:
            dot = f"{module_prefix}." if module_prefix else ""
            for name, param in module._parameters.items():
                if param is not None:
                    result[dot + name] = param if keep_vars else param.detach()
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent_buffers:
                    result[dot + name] = buffer if keep_vars else buffer.detach()
        return result

    def load_state_dict(
        self, state_dict: Mapping[str, Tensor], strict: bool = True
    ) -> _IncompatibleKeys:
        """Copy values from ``state_dict`` into this module's parameters and buffers.

        Everything is checked before anything is copied, so a failed load leaves the
        module unchanged. With ``strict=True`` missing or unexpected keys are errors;
        a shape mismatch is always an error.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        own = self.state_dict(keep_vars=True)
        missing = [key for key in own if key not in state_dict]
        unexpected = [key for key in state_dict if key not in own]
        errors = []
        if strict and missing:
            errors.append(f"Missing key(s) in state_dict: {_quoted(missing)}. ")
        if strict and unexpected:
            errors.append(f"Unexpected key(s) in state_dict: {_quoted(unexpected)}. ")
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                errors.append(f'While copying the parameter named "{key}", expected a Tensor '
                              f"from checkpoint but received {type(value).__name__}")
            elif tuple(value.shape) != tuple(target.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} from "
                    f"checkpoint, the shape in current model is {tuple(target.shape)}."
                )
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__} (nothing was loaded):\n\t"
                + "\n\t".join(errors)
            )
        with tg.no_grad():
            for key, target in own.items():
                if key in state_dict:
                    target.copy_(state_dict[key].to(device=target.device, dtype=target.dtype))
        return _IncompatibleKeys(missing, unexpected)

    # -- printing ----------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside the parentheses, e.g. ``in_features=3, out_features=4, bias=True``."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [
            f"({name}): " + _addindent(repr(module), 2) for name, module in self._modules.items()
        ]
        lines = extra_lines + child_lines
        body = ""
        if len(extra_lines) == 1 and not child_lines:
            body = extra_lines[0]
        elif lines:
            body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"

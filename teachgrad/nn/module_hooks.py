"""Module hooks: functions that run before forward, after forward, and in backward.

After ``torch.nn.Module``'s hooks, with the same signatures and order::

    handle = model.fc1.register_forward_hook(lambda module, args, output: print(output.shape))
    handle.remove()

* ``register_forward_pre_hook(hook(module, args))`` runs before ``forward``; a
  returned value replaces the positional arguments (a tuple, or one value).
* ``register_forward_hook(hook(module, args, output))`` runs after ``forward``; a
  returned value replaces the output.
* ``register_full_backward_pre_hook(hook(module, grad_output))`` runs when the
  gradient of the output is known; it may return a new ``grad_output``.
* ``register_full_backward_hook(hook(module, grad_input, grad_output))`` runs when
  the gradient with respect to the module's positional inputs is known; it may
  return a new ``grad_input``. Both are tuples, with ``None`` where there is no
  gradient (an input that does not require grad, or is not a tensor).

Hooks of one kind run in the order they were registered (``prepend=True`` puts
one first). This is what a logger, a profiler or a debugger hangs on a model.
"""
from __future__ import annotations

from typing import Any, Callable

from ..autograd import function
from ..utils.hooks import BackwardHook, RemovableHandle, call_hook

#: The dicts a Module keeps its hooks in, each {handle id: hook}.
HOOK_DICTS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
              "_forward_hooks_with_kwargs", "_backward_hooks", "_backward_pre_hooks")


def _check_hook(hook: Any, method: str) -> None:
    if not callable(hook):
        raise TypeError(f"{method} expects a callable hook, got {type(hook).__name__}. "
                        "Fix: pass a function, e.g. def hook(module, args, output): ...")


def _add(hooks: dict, handle: RemovableHandle, hook: Callable, prepend: bool) -> None:
    hooks[handle.id] = hook
    if prepend:
        hooks_in_order = [(handle.id, hook)] + [(k, v) for k, v in hooks.items() if k != handle.id]
        hooks.clear()
        hooks.update(hooks_in_order)


class ModuleHooks:
    """The hook half of :class:`~teachgrad.nn.Module` (mixed into it)."""

    def _init_hooks(self) -> None:
        for name in HOOK_DICTS:
            object.__setattr__(self, name, {})

    def _hook_dict(self, name: str) -> dict:
        if name not in self.__dict__:
            raise AttributeError(f"cannot register a hook before Module.__init__() call. Fix: "
                                 f"call super().__init__() first in {type(self).__name__}.__init__")
        return self.__dict__[name]

    def _register(self, method: str, hooks_name: str, hook: Callable, prepend: bool,
                  flags_name: str | None = None, with_kwargs: bool = False) -> RemovableHandle:
        """File ``hook`` in ``self.<hooks_name>`` (first with ``prepend``) and return its handle;
        ``with_kwargs`` hooks are also marked in ``self.<flags_name>``."""
        _check_hook(hook, method)
        hooks = self._hook_dict(hooks_name)
        flags = self._hook_dict(flags_name) if flags_name else {}
        handle = RemovableHandle(hooks, flags)
        _add(hooks, handle, hook, prepend)
        if with_kwargs:
            flags[handle.id] = True
        return handle

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args)`` before each ``forward`` (with ``with_kwargs``:
        ``hook(module, args, kwargs)``, returning ``None`` or ``(args, kwargs)``)."""
        return self._register("register_forward_pre_hook", "_forward_pre_hooks", hook, prepend,
                              "_forward_pre_hooks_with_kwargs", with_kwargs)

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after each ``forward``; a value it returns
        replaces the output (with ``with_kwargs``: ``hook(module, args, kwargs, output)``)."""
        return self._register("register_forward_hook", "_forward_hooks", hook, prepend,
                              "_forward_hooks_with_kwargs", with_kwargs)

    def register_full_backward_pre_hook(self, hook: Callable, *,
                                        prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_output)`` in backward, before ``grad_input`` is computed."""
        return self._register("register_full_backward_pre_hook", "_backward_pre_hooks", hook,
                              prepend)

    def register_full_backward_hook(self, hook: Callable, *,
                                    prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_input, grad_output)`` in backward, once the gradient with
        respect to the module's inputs is known; a tuple it returns replaces ``grad_input``."""
        return self._register("register_full_backward_hook", "_backward_hooks", hook, prepend)

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        raise RuntimeError(
            "register_backward_hook (deprecated in PyTorch, and wrong for modules of more than "
            "one operation) is not provided. Fix: use register_full_backward_hook"
        )

    # -- calling -----------------------------------------------------------------
    def _has_hooks(self) -> bool:
        d = self.__dict__
        return bool(d.get("_forward_pre_hooks") or d.get("_forward_hooks")
                    or d.get("_backward_hooks") or d.get("_backward_pre_hooks"))

    def _call_with_hooks(self, args: tuple, kwargs: dict) -> Any:
        """``module(*args, **kwargs)`` with its hooks, in PyTorch's order."""
        pre_flags = self._forward_pre_hooks_with_kwargs
        for key, hook in list(self._forward_pre_hooks.items()):
            if key in pre_flags:
                result = call_hook("forward pre", self, hook, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            "forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                            f"but got {result}."
                        )
                    args, kwargs = result
            else:
                result = call_hook("forward pre", self, hook, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)

        backward_hook = None
        if self._backward_hooks or self._backward_pre_hooks:
            backward_hook = BackwardHook(self, list(self._backward_hooks.values()),
                                         list(self._backward_pre_hooks.values()))
            args = backward_hook.setup_input_hook(args)

        output = self._forward_in_scope(args, kwargs)

        flags = self._forward_hooks_with_kwargs
        for key, hook in list(self._forward_hooks.items()):
            if key in flags:
                result = call_hook("forward", self, hook, args, kwargs, output)
            else:
                result = call_hook("forward", self, hook, args, output)
            if result is not None:
                output = result

        if backward_hook is not None:
            output = backward_hook.setup_output_hook(output)
        return output

    def _forward_in_scope(self, args: tuple, kwargs: dict) -> Any:
        # The graph nodes made inside remember this module (a graph view groups by it).
        outer = function.module_path
        function.module_path = outer + (self,)
        try:
            return self.forward(*args, **kwargs)
        finally:
            function.module_path = outer

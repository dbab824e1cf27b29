"""Handles for hooks, and the machinery behind a module's full backward hook.

After ``torch.utils.hooks``. A module's backward hook needs two gradients that
no single graph node holds: the gradient of the module's *outputs* and of its
*inputs*. So the module wraps its inputs and its outputs in an identity
operation, :class:`BackwardHookFunction`. In backward, the identity after the
outputs sees ``grad_output`` first and remembers it; the identity before the
inputs sees ``grad_input`` last, and calls the user's hooks with both. The
backward engine needs no special case: it simply runs two more nodes.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable

from ..autograd import grad_mode
from ..autograd.function import Context, Function
from ..tensor import Tensor

_handle_ids = itertools.count()


class RemovableHandle:
    """What ``register_*_hook`` returns: ``handle.remove()`` takes the hook off again.

    Also a context manager: ``with module.register_forward_hook(h): ...`` removes
    the hook at the end of the block.
    """

    def __init__(self, *hook_dicts: dict) -> None:
        self.id = next(_handle_ids)
        self._hook_dicts = hook_dicts  # a hook may sit in two dicts (e.g. with its kwargs flag)

    def remove(self) -> None:
        for hooks in self._hook_dicts:
            hooks.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def hook_name(hook: Callable) -> str:
    """How an error names a hook: its function name (or its type for a callable object)."""
    return getattr(hook, "__qualname__", None) or type(hook).__name__


def call_hook(kind: str, module: Any, hook: Callable, *args: Any) -> Any:
    """Run one hook; if it raises, say which hook on which module did (the original is chained)."""
    try:
        return hook(module, *args)
    except Exception as err:
        raise RuntimeError(
            f"{kind} hook '{hook_name(hook)}' registered on module {type(module).__name__} "
            f"raised {type(err).__name__}: {err}"
        ) from err


class BackwardHookFunction(Function):
    """Identity in forward; in backward it hands the gradients to a :class:`BackwardHook`."""

    rule = "identity (a module's backward hook watches the gradient here)"

    @staticmethod
    def forward(ctx: Context, watcher: "BackwardHook", stage: str, *tensors: Tensor) -> tuple:
        ctx.watcher, ctx.stage = watcher, stage
        outputs = tuple(t.detach() for t in tensors)
        # As in PyTorch: a tensor that did not require grad still does not, and its
        # slot in the hook's gradients holds zeros.
        ctx.mark_non_differentiable(*[o for o, t in zip(outputs, tensors) if not t.requires_grad])
        return outputs

    @staticmethod
    def backward(ctx: Context, *grads: Any) -> tuple:
        if ctx.stage == "output":
            grads = ctx.watcher.on_grad_output(grads)
        else:
            grads = ctx.watcher.on_grad_input(grads)
        return (None, None, *grads)


class BackwardHook:
    """One module call's backward hooks: set up in forward, fired during backward."""

    def __init__(self, module: Any, hooks: list[Callable], pre_hooks: list[Callable]) -> None:
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.n_inputs = 0
        self.input_index: list[int] | None = None  # positions of inputs that get a gradient
        self.n_outputs = 0
        self.output_index: list[int] = []
        self.grad_output: tuple | None = None

    def _wrap(self, values: tuple, stage: str) -> tuple[tuple, list[int] | None]:
        """Route the tensors among ``values`` through the identity; others pass as they are."""
        index = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
        if not grad_mode.is_grad_enabled() or not any(values[i].requires_grad for i in index):
            return values, None
        wrapped = BackwardHookFunction.apply(self, stage, *[values[i] for i in index])
        out = list(values)
        for i, w in zip(index, wrapped):
            out[i] = w
        return tuple(out), index

    def setup_input_hook(self, args: tuple) -> tuple:
        self.n_inputs = len(args)
        args, self.input_index = self._wrap(args, "input")
        return args

    def setup_output_hook(self, result: Any) -> Any:
        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        self.n_outputs = len(outputs)
        outputs, index = self._wrap(outputs, "output")
        self.output_index = index or []
        return outputs[0] if single else outputs

    def _pack(self, index: list[int], grads: tuple, size: int) -> tuple:
        packed: list[Any] = [None] * size
        for i, g in zip(index, grads):
            packed[i] = g
        return tuple(packed)

    def on_grad_output(self, grads: tuple) -> tuple:
        grad_output = self._pack(self.output_index, grads, self.n_outputs)
        for hook in self.pre_hooks:
            new = call_hook("backward pre", self.module, hook, grad_output)
            if new is not None:
                grad_output = self._checked(new, grad_output, "grad_output")
        self.grad_output = grad_output
        if self.input_index is None:
            # No input wants a gradient: the hook runs now, with grad_input all None.
            none_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                new = call_hook("full backward", self.module, hook, none_inputs, grad_output)
                if new is not None and any(g is not None for g in new):
                    raise RuntimeError(
                        f"backward hook '{hook_name(hook)}' on {type(self.module).__name__} "
                        "returned gradients, but no input of this module requires grad: "
                        "return None (there is no grad_input to replace)"
                    )
        return tuple(grad_output[i] for i in self.output_index)

    def on_grad_input(self, grads: tuple) -> tuple:
        assert self.input_index is not None
        grad_input = self._pack(self.input_index, grads, self.n_inputs)
        for hook in self.hooks:
            new = call_hook("full backward", self.module, hook, grad_input, self.grad_output)
            if new is not None:
                grad_input = self._checked(new, grad_input, "grad_input")
        return tuple(grad_input[i] for i in self.input_index)

    def _checked(self, new: Any, old: tuple, what: str) -> tuple:
        new = new if isinstance(new, tuple) else (new,)
        if len(new) != len(old):
            raise RuntimeError(
                f"Backward hook returned an invalid number of {what}, got {len(new)}, but "
                f"expected {len(old)} (one per {what.split('_')[1]} of "
                f"{type(self.module).__name__}, None where there is none)"
            )
        return new

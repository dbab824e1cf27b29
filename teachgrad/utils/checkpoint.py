"""Activation checkpointing: trade compute for memory, as ``torch.utils.checkpoint``.

Backward needs what forward saved (``ctx.save_for_backward``): for a deep network
that is most of the memory of a training step. ``checkpoint(fn, *args)`` runs
``fn`` without recording a graph, so nothing inside it is saved; it keeps only
its inputs. When backward reaches it, it runs ``fn`` again, this time recording,
and backpropagates through that fresh graph. The peak falls; each checkpointed
piece costs one more forward.

Dropout inside ``fn`` must drop the same elements both times, so the random
generator's state is saved before the first run and restored for the second
(``preserve_rng_state=True``)::

    from teachgrad.utils.checkpoint import checkpoint, checkpoint_sequential
    h = checkpoint(block, x, use_reentrant=False)
    out = checkpoint_sequential(model, segments=2, input=x, use_reentrant=False)

Both ``use_reentrant`` modes recompute in backward with a nested backward pass (the
"reentrant" design). The difference kept from PyTorch: with ``use_reentrant=False``
the parameters inside ``fn`` get gradients even when no input requires grad, and
``fn`` may take keyword arguments.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

from .. import random as tg_random
from ..autograd import Function, backward, enable_grad
from ..tensor import Tensor


def _rng_state() -> dict:
    return tg_random.generator().bit_generator.state


def _set_rng_state(state: dict) -> None:
    tg_random.generator().bit_generator.state = state


class CheckpointFunction(Function):
    """Runs ``run_function`` unrecorded in forward; again, recorded, in backward."""

    @staticmethod
    def forward(ctx, run_function: Callable, preserve_rng_state: bool, *args: Any) -> Any:
        ctx.run_function = run_function
        ctx.rng_state = _rng_state() if preserve_rng_state else None
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]  # non-tensors kept as is
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        outputs = run_function(*args)  # grad mode is off here: nothing inside is saved
        _check_outputs(outputs)
        return outputs

    @staticmethod
    def backward(ctx, *grad_outputs: Any) -> tuple:
        inputs = _fresh_inputs(ctx.inputs, ctx.saved_tensors)
        outputs = _rerun(ctx.run_function, inputs, ctx.rng_state)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if pairs:
            backward([o for o, _ in pairs], [g for _, g in pairs])
        grads = tuple(a.grad if isinstance(a, Tensor) else None for a in inputs)
        return (None, None) + grads


def _check_outputs(outputs: Any) -> None:
    parts = outputs if isinstance(outputs, tuple) else (outputs,)
    if not parts or not all(isinstance(o, Tensor) for o in parts):
        raise TypeError("checkpoint: the function must return a tensor or a tuple of tensors, "
                        f"not {type(outputs).__name__}")


def _fresh_inputs(inputs: list, saved: tuple) -> list:
    """The saved inputs detached (a new graph starts at them), keeping requires_grad."""
    tensors = iter(saved)
    fresh = []
    for a in inputs:
        if a is None:
            t = next(tensors)
            a = t.detach().requires_grad_(t.requires_grad)
        fresh.append(a)
    return fresh


def _rerun(run_function: Callable, inputs: list, rng_state: dict | None) -> Any:
    """``run_function`` again with recording on, the random generator as it was the first time."""
    if rng_state is None:
        with enable_grad():
            return run_function(*inputs)
    now = _rng_state()
    _set_rng_state(rng_state)
    try:
        with enable_grad():
            return run_function(*inputs)
    finally:
        _set_rng_state(now)  # the rest of the program draws as if nothing was re-run


def checkpoint(function: Callable, *args: Any, use_reentrant: bool | None = None,
               preserve_rng_state: bool = True, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``, keeping only its inputs for backward and re-running it there.

    Pass ``use_reentrant`` explicitly, as PyTorch asks: left out, it warns and uses ``False``,
    the recommended variant (PyTorch warns too, and falls back to ``True``).
    """
    if not callable(function):
        raise TypeError(f"checkpoint: the first argument must be a function or module, "
                        f"not {type(function).__name__}")
    if use_reentrant is None:
        warnings.warn("checkpoint: pass use_reentrant explicitly (False is recommended); "
                      "teachgrad uses False when it is left out", UserWarning, stacklevel=2)
        use_reentrant = False
    if not isinstance(use_reentrant, bool) or not isinstance(preserve_rng_state, bool):
        raise TypeError("checkpoint: use_reentrant and preserve_rng_state must be True or False")
    if use_reentrant and kwargs:
        raise ValueError(f"checkpoint: unexpected keyword arguments {', '.join(kwargs)}: "
                         "the reentrant variant passes positional arguments only; "
                         "use use_reentrant=False")
    run = (lambda *a: function(*a, **kwargs)) if kwargs else function
    needs_grad = any(isinstance(a, Tensor) and a.requires_grad for a in args)
    from ..autograd import is_grad_enabled

    if use_reentrant and is_grad_enabled() and not needs_grad:
        warnings.warn("checkpoint: none of the inputs has requires_grad=True: with "
                      "use_reentrant=True the gradients inside will be None", UserWarning,
                      stacklevel=2)
    if not use_reentrant and is_grad_enabled() and not needs_grad:
        # an input that requires grad makes the engine record this node, so backward
        # reaches it and the parameters inside still get their gradients
        args = args + (_anchor(args),)
        inner = run
        run = lambda *a: inner(*a[:-1])  # noqa: E731 (the anchor is not the function's)
    return CheckpointFunction.apply(run, preserve_rng_state, *args)


def _anchor(args: tuple) -> Tensor:
    """An empty tensor that requires grad, on the inputs' device (it holds no memory)."""
    from ..creation import zeros

    device = next((a.device for a in args if isinstance(a, Tensor)), "cpu")
    return zeros(0, requires_grad=True, device=device)


def checkpoint_sequential(functions: Any, segments: int, input: Tensor,
                          use_reentrant: bool | None = None, **kwargs: Any) -> Tensor:
    """Run ``functions`` (an ``nn.Sequential`` or a list) in ``segments`` pieces, each but the
    last checkpointed: only the input of each piece stays alive until backward."""
    layers = list(functions.children()) if hasattr(functions, "children") else functions
    if not isinstance(layers, (list, tuple)) or not all(callable(f) for f in layers):
        raise TypeError("checkpoint_sequential: functions must be an nn.Sequential or a list "
                        "of callables")
    if (isinstance(segments, bool) or not isinstance(segments, int)
            or not 1 <= segments <= len(layers)):
        raise ValueError(f"checkpoint_sequential: segments must be an int from 1 to the "
                         f"number of functions ({len(layers)}), not {segments!r}")
    size = len(layers) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(_run_layers(layers, start, end), input,
                           use_reentrant=use_reentrant, **kwargs)
    return _run_layers(layers, end + 1, len(layers) - 1)(input)


def _run_layers(layers: list, first: int, last: int) -> Callable:
    def run(x):
        for layer in layers[first:last + 1]:
            x = layer(x)
        return x
    return run


__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointFunction"]

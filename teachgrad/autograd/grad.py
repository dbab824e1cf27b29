"""``tg.autograd.grad``: the gradients of outputs with respect to chosen inputs, returned
instead of added to anyone's ``.grad`` (PyTorch's ``torch.autograd.grad``).

It runs the same backward engine as ``loss.backward()``. Every leaf the graph
reaches has its ``.grad`` set aside first and put back afterwards, so the only
trace of the call is the tuple it returns.
"""
from __future__ import annotations

from typing import Any, Sequence

from . import function
from .engine import run_backward


def _as_list(x: Any, name: str) -> list:
    items = [x] if isinstance(x, function.Tensor) else list(x)
    for t in items:
        if not isinstance(t, function.Tensor):
            raise TypeError(f"grad: {name} must be tensors, got {type(t).__name__}")
    return items


def _reachable_leaves(outputs: Sequence[Any]) -> list:
    """The leaf tensors whose ``.grad`` a backward from ``outputs`` would change."""
    leaves, seen = [], set()
    stack = [o.grad_fn for o in outputs if o.grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, function.AccumulateGrad):
            leaves.append(node.variable)
            continue
        stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
    return leaves


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool = False) -> tuple:
    """d(outputs)/d(inputs) as a tuple, one gradient per input (``None`` if unused and allowed)."""
    if create_graph:
        raise NotImplementedError(
            "teachgrad does not support grad(create_graph=True): its backward is not recorded, "
            "so gradients of gradients are not available. Fix: leave out create_graph"
        )
    outs, ins = _as_list(outputs, "outputs"), _as_list(inputs, "inputs")
    for t in ins:
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad. "
                               "Fix: make it with requires_grad=True")
    captured: dict[int, Any] = {}
    handles = []
    for t in ins:
        if not t.is_leaf:  # a non-leaf keeps no .grad: catch its gradient on the way through
            def keep(g: Any, key: int = id(t)) -> None:
                captured[key] = g if key not in captured else captured[key] + g
            handles.append(t.register_hook(keep))
    set_aside = {id(t): t for t in _reachable_leaves(outs) + [t for t in ins if t.is_leaf]}
    saved = {key: t.grad for key, t in set_aside.items()}
    try:
        for t in set_aside.values():
            t.grad = None
        if isinstance(grad_outputs, function.Tensor):
            grad_outputs = [grad_outputs]
        run_backward(outs, grad_outputs, bool(retain_graph))
        result = tuple(t.grad if t.is_leaf else captured.get(id(t)) for t in ins)
    finally:
        for key, t in set_aside.items():
            t.grad = saved[key]
        for handle in handles:
            handle.remove()
    if not allow_unused and any(g is None for g in result):
        raise RuntimeError("One of the differentiated Tensors appears to not have been used in the "
                           "graph. Set allow_unused=True if this is the desired behavior.")
    return result
